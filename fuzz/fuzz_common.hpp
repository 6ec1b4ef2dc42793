#pragma once
// Shared by the fuzz targets: each input is written to a file in a private folder (the readers take
// paths, as users give them), then read. cubekit::Error is the expected outcome of a bad input;
// anything else escaping a reader (another exception, a crash, a sanitizer report, an allocation
// beyond libFuzzer's limit) is a finding.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "cubekit/error.hpp"

namespace cubekit::fuzz {

/// A folder of this process's own (tmpfs when there is one), removed at exit.
inline const std::filesystem::path& scratch() {
    static const std::filesystem::path dir = [] {
        const std::filesystem::path base = std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
        std::filesystem::path d = base / ("cubekit-fuzz-" + std::to_string(::getpid()));
        std::filesystem::create_directories(d);
        std::atexit([] { std::error_code ec; std::filesystem::remove_all(scratch(), ec); });
        return d;
    }();
    return dir;
}

/// Writes `bytes` to scratch()/name and returns the path.
inline std::filesystem::path put(const std::string& name, std::string_view bytes) {
    const std::filesystem::path p = scratch() / name;
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), std::streamsize(bytes.size()));
    return p;
}

/// Runs `read`; a cubekit::Error is a refusal (fine), any other exception a finding (abort).
template <class F>
void expect_refusal_or_success(F&& read) {
    try {
        read();
    } catch (const cubekit::Error&) {
    } catch (const std::exception& e) {
        std::fprintf(stderr, "fuzz: a non-cubekit exception escaped: %s\n", e.what());
        std::abort();
    }
}

/// The input as text.
inline std::string_view text(const std::uint8_t* data, std::size_t size) {
    return {reinterpret_cast<const char*>(data), size};
}

}  // namespace cubekit::fuzz
