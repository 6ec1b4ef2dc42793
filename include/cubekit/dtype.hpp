#pragma once
/// Element types of a Cube and a compile-time dispatch over them.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "cubekit/error.hpp"
#include "cubekit/options.hpp"

namespace cubekit {

/// The element types a Cube can hold.
enum class DType { U8, U16, I16, U32, I32, F32, F64 };

/// Bytes per element: 1, 2, 2, 4, 4, 4, 8.
constexpr std::size_t dtype_size(DType t) {
    switch (t) {
        case DType::U8: return 1;
        case DType::U16:
        case DType::I16: return 2;
        case DType::U32:
        case DType::I32:
        case DType::F32: return 4;
        case DType::F64: return 8;
    }
    return 0;
}

/// Names: "u8", "u16", "i16", "u32", "i32", "f32", "f64"; NumPy's "uint8", "int16", "float32", ... also parse.
template <>
struct EnumNames<DType> {
    static constexpr EnumName<DType> names[] = {{DType::U8, "u8"},   {DType::U16, "u16"}, {DType::I16, "i16"},
                                                {DType::U32, "u32"}, {DType::I32, "i32"}, {DType::F32, "f32"},
                                                {DType::F64, "f64"}};
    static constexpr EnumName<DType> aliases[] = {{DType::U8, "uint8"},   {DType::U16, "uint16"},
                                                  {DType::I16, "int16"},  {DType::U32, "uint32"},
                                                  {DType::I32, "int32"},  {DType::F32, "float32"},
                                                  {DType::F64, "float64"}};
};

/// Short name: "u8", "u16", "i16", "u32", "i32", "f32", "f64".
inline std::string_view dtype_name(DType t) { return enum_name(t); }

/// Parses a short or NumPy name; throws InvalidInput naming `what` when the name is unknown.
inline DType parse_dtype(std::string_view name, std::string_view what = "element type") {
    return parse_enum<DType>(name, what);
}

constexpr bool dtype_is_float(DType t) { return t == DType::F32 || t == DType::F64; }

template <typename T> struct dtype_of;
template <> struct dtype_of<std::uint8_t> { static constexpr DType value = DType::U8; };
template <> struct dtype_of<std::uint16_t> { static constexpr DType value = DType::U16; };
template <> struct dtype_of<std::int16_t> { static constexpr DType value = DType::I16; };
template <> struct dtype_of<std::uint32_t> { static constexpr DType value = DType::U32; };
template <> struct dtype_of<std::int32_t> { static constexpr DType value = DType::I32; };
template <> struct dtype_of<float> { static constexpr DType value = DType::F32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::F64; };
template <typename T> inline constexpr DType dtype_v = dtype_of<T>::value;

/// Calls f(T{}) with T the C++ type of `t`: visit_dtype(t, [&](auto tag) { using T = decltype(tag); ... }).
template <typename F>
decltype(auto) visit_dtype(DType t, F&& f) {
    switch (t) {
        case DType::U8: return std::forward<F>(f)(std::uint8_t{});
        case DType::U16: return std::forward<F>(f)(std::uint16_t{});
        case DType::I16: return std::forward<F>(f)(std::int16_t{});
        case DType::U32: return std::forward<F>(f)(std::uint32_t{});
        case DType::I32: return std::forward<F>(f)(std::int32_t{});
        case DType::F32: return std::forward<F>(f)(float{});
        case DType::F64: return std::forward<F>(f)(double{});
    }
    throw InvalidInput("visit_dtype: unknown element type");
}

}  // namespace cubekit
