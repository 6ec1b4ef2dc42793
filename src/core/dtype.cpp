#include "cubekit/dtype.hpp"

#include <string>

namespace cubekit {

std::string_view dtype_name(DType t) {
    switch (t) {
        case DType::U8: return "u8";
        case DType::U16: return "u16";
        case DType::I16: return "i16";
        case DType::U32: return "u32";
        case DType::I32: return "i32";
        case DType::F32: return "f32";
        case DType::F64: return "f64";
    }
    return "?";
}

DType parse_dtype(std::string_view name, std::string_view what) {
    struct Alias { std::string_view a, b; DType t; };
    static constexpr Alias kAliases[] = {
        {"u8", "uint8", DType::U8},     {"u16", "uint16", DType::U16}, {"i16", "int16", DType::I16},
        {"u32", "uint32", DType::U32},  {"i32", "int32", DType::I32},  {"f32", "float32", DType::F32},
        {"f64", "float64", DType::F64},
    };
    for (const Alias& alias : kAliases)
        if (name == alias.a || name == alias.b) return alias.t;
    throw InvalidInput(std::string(what) + " = '" + std::string(name) +
                       "': unknown element type (u8, u16, i16, u32, i32, f32, f64 are accepted)");
}

}  // namespace cubekit
