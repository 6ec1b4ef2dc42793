// Public entry points of the I/O module: format names, read_cube / write_cube dispatch,
// list_mat_variables, to_display_u8; plus the small shared helpers declared in io_internal.hpp.
#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <limits>

#include "io/io_internal.hpp"

namespace cubekit {

namespace io_detail {

std::string to_lower(std::string_view s) {
    std::string r(s);
    for (char& c : r) c = char((c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c);
    return r;
}

std::string_view trim(std::string_view s) {
    const auto ws = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; };
    while (!s.empty() && ws(s.front())) s.remove_prefix(1);
    while (!s.empty() && ws(s.back())) s.remove_suffix(1);
    return s;
}

std::string lower_extension(const fs::path& p) { return to_lower(p.extension().string()); }

std::string format_double(double v) {
    char buf[64];
    const auto res = std::to_chars(buf, buf + sizeof(buf), v);  // shortest round-trip form
    return std::string(buf, res.ptr);
}

bool host_is_little_endian() { return std::endian::native == std::endian::little; }

void byteswap_inplace(void* data, std::size_t count, std::size_t elem_size) {
    auto* p = static_cast<unsigned char*>(data);
    switch (elem_size) {
        case 1: return;
        case 2:
            for (std::size_t i = 0; i < count; ++i, p += 2) std::swap(p[0], p[1]);
            return;
        case 4:
            for (std::size_t i = 0; i < count; ++i, p += 4) {
                std::swap(p[0], p[3]);
                std::swap(p[1], p[2]);
            }
            return;
        case 8:
            for (std::size_t i = 0; i < count; ++i, p += 8) {
                std::swap(p[0], p[7]);
                std::swap(p[1], p[6]);
                std::swap(p[2], p[5]);
                std::swap(p[3], p[4]);
            }
            return;
        default:
            for (std::size_t i = 0; i < count; ++i, p += elem_size) std::reverse(p, p + elem_size);
    }
}

void check_image(std::string_view fn, const fs::path& path, const Cube& cube, int min_bands, int max_bands,
                 std::string_view accepted_bands) {
    if (cube.dtype() != DType::U8 && cube.dtype() != DType::U16) {
        throw_invalid(fn, path,
                      "element type " + std::string(dtype_name(cube.dtype())) +
                          " is not supported (u8, u16 are; convert first, e.g. with to_display_u8 or out_type = u8)");
    }
    if (cube.bands() < min_bands || cube.bands() > max_bands) {
        throw_invalid(fn, path,
                      std::to_string(cube.bands()) + " bands are not supported (" + std::string(accepted_bands) +
                          " are)");
    }
    if (cube.width() <= 0 || cube.height() <= 0) {
        throw_invalid(fn, path, "the image is empty (" + cube.shape().describe() + ")");
    }
}

Cube image_as_bip(std::string_view fn, const fs::path& path, const Cube& cube, int min_bands,
                  int max_bands, std::string_view accepted_bands) {
    check_image(fn, path, cube, min_bands, max_bands, accepted_bands);
    return cube.to_layout(Layout::BIP);
}

}  // namespace io_detail

using namespace io_detail;

FileFormat parse_format(std::string_view name, std::string_view what) {
    if (const std::optional<FileFormat> f = find_enum<FileFormat>(name)) return *f;
    std::string all;
    for (std::string_view n : enum_choices<FileFormat>()) all += (all.empty() ? "" : ", ") + std::string(n);
    throw InvalidInput("parse_format: " + std::string(what) + " = '" + std::string(name) + "'; expected one of " + all);
}

Cube read_cube(const std::filesystem::path& path, const ReadOptions& options) {
    const FileFormat format = options.format == FileFormat::Auto ? detect_format(path) : options.format;
    switch (format) {
        case FileFormat::Envi: return read_envi(path);
        case FileFormat::Npy: return read_npy(path);
        case FileFormat::Mat: return read_mat(path, options.var);
        case FileFormat::Png: return read_png(path);
        case FileFormat::Pnm: return read_pnm(path);
        case FileFormat::Jpeg: return read_jpeg(path);
        case FileFormat::Gdal: return read_gdal(path);
        case FileFormat::Auto: break;
    }
    throw_invalid("read_cube", path, "no format to read it with");
}

void write_cube(const Cube& cube, const std::filesystem::path& path, const WriteOptions& options) {
    const FileFormat format = options.format == FileFormat::Auto ? output_format(path) : options.format;
    switch (format) {
        case FileFormat::Envi: return write_envi(cube, path, options);
        case FileFormat::Npy: return write_npy(cube, path);
        case FileFormat::Png: return write_png(cube, path, options.png_compression);
        case FileFormat::Pnm: return write_pnm(cube, path);
        case FileFormat::Gdal: return write_gdal(cube, path);
        case FileFormat::Mat:
        case FileFormat::Jpeg:
        case FileFormat::Auto: break;
    }
    throw_invalid("write_cube", path,
                  "format '" + std::string(format_name(format)) + "' cannot be written (envi, npy, png, pnm can)");
}

std::vector<std::string> list_mat_variables(const std::filesystem::path& path) { return list_mat(path); }

Cube to_display_u8(const Cube& one_band, double white) {
    if (one_band.bands() != 1) {
        throw InvalidInput("to_display_u8: the cube has " + std::to_string(one_band.bands()) +
                           " bands (" + one_band.shape().describe() + "); expected 1");
    }
    Cube out(one_band.width(), one_band.height(), 1, DType::U8, one_band.layout());
    out.metadata() = one_band.metadata();
    const std::size_t n = one_band.num_elements();
    auto* dst = out.data<std::uint8_t>();
    visit_dtype(one_band.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* src = one_band.data<T>();
        // With one band every layout stores the same row-major image, so index directly.
        double max = -std::numeric_limits<double>::infinity();
        for (std::size_t i = 0; i < n; ++i) {
            const double v = double(src[i]);
            if (std::isfinite(v) && v > max) max = v;
        }
        if (white > 0.0) max = white;  // the caller's white point (e.g. a percentile); larger values saturate
        if (!(max > 0.0)) return;  // zero, negative or no finite sample: all-zero image
        for (std::size_t i = 0; i < n; ++i) {
            const double v = double(src[i]);
            if (!(v > 0.0)) continue;  // 0, negatives and NaN map to 0 (out is zero-filled)
            const double s = std::round(255.0 * v / max);  // +inf saturates below
            dst[i] = std::uint8_t(std::min(s, 255.0));
        }
    });
    return out;
}

}  // namespace cubekit
