#pragma once
/// Errors thrown by cubekit. Every message names the function, the file or parameter, the
/// offending value and what is accepted, e.g.
///     rcmg: connectivity = 6; expected 4 or 8
/// Front ends map the classes to exit codes: InvalidInput 2, IoError 3, DeviceError 4.
#include <stdexcept>
#include <string>
#include <string_view>

namespace cubekit {

/// Base of every cubekit exception.
class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// The content of a file or a parameter is invalid (bad header, truncated data, size mismatch,
/// out-of-range option). CLI exit code 2.
class InvalidInput : public Error {
public:
    using Error::Error;
};

/// The operating system refused (missing file, permission, disk full, a path below a regular
/// file). CLI exit code 3.
class IoError : public Error {
public:
    using Error::Error;
};

/// A CUDA device is missing, failed or ran out of memory. CLI exit code 4.
class DeviceError : public Error {
public:
    using Error::Error;
};

/// Device (or pinned host) memory could not be allocated.
class OutOfMemory : public DeviceError {
public:
    using DeviceError::DeviceError;
};

/// The work was cancelled through Context's cancellation flag.
class Cancelled : public Error {
public:
    using Error::Error;
};

/// A JSON library message without its tag: "[json.exception.parse_error.101] parse error at ..."
/// becomes "parse error at ..." (users read the reason, not the library's numbering).
inline std::string json_reason(std::string_view what) {
    if (what.starts_with("[json.exception.")) {
        const std::size_t close = what.find("] ");
        if (close != std::string_view::npos) what.remove_prefix(close + 2);
    }
    return std::string(what);
}

}  // namespace cubekit
