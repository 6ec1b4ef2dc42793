#pragma once
// Integers read from JSON files and numeric arrays, checked: nlohmann's get<int>() on a stored float
// (1e80) and a C++ cast of an out-of-range double are undefined behaviour (the fuzzer found both).
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "cubekit/error.hpp"

namespace cubekit::detail {

/// `d` as T when it is an integer T holds; else InvalidInput "<what> = <d>; expected an integer".
template <class T>
T checked_integer(double d, std::string_view what) {
    if (!(d == std::floor(d)) || d < double(std::numeric_limits<T>::lowest()) || d > double(std::numeric_limits<T>::max()))
        throw InvalidInput(std::string(what) + " = " + std::to_string(d) + "; expected an integer from " +
                           std::to_string(std::numeric_limits<T>::lowest()) + " to " + std::to_string(std::numeric_limits<T>::max()));
    return T(d);
}

/// A JSON integer as T (a stored float with an integral value is accepted), checked as above.
template <class T>
T json_integer(const nlohmann::json& v, std::string_view what) {
    if (v.is_number_integer() && v.is_number_unsigned()) {
        const auto u = v.get<std::uint64_t>();
        if (u > std::uint64_t(std::numeric_limits<T>::max()))
            throw InvalidInput(std::string(what) + " = " + std::to_string(u) + "; expected at most " + std::to_string(std::numeric_limits<T>::max()));
        return T(u);
    }
    if (v.is_number_integer()) {
        const auto i = v.get<std::int64_t>();
        if (i < std::int64_t(std::numeric_limits<T>::lowest()) || (i > 0 && std::uint64_t(i) > std::uint64_t(std::numeric_limits<T>::max())))
            throw InvalidInput(std::string(what) + " = " + std::to_string(i) + "; out of range");
        return T(i);
    }
    if (v.is_number_float()) return checked_integer<T>(v.get<double>(), what);
    throw InvalidInput(std::string(what) + " is not a number");
}

/// A JSON array of integers as std::vector<T>, each checked.
template <class T>
std::vector<T> json_integers(const nlohmann::json& v, std::string_view what) {
    if (!v.is_array()) throw InvalidInput(std::string(what) + " is not an array");
    std::vector<T> out;
    out.reserve(v.size());
    for (const auto& e : v) out.push_back(json_integer<T>(e, what));
    return out;
}

}  // namespace cubekit::detail
