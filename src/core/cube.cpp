#include "cubekit/cube.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <limits>
#include <string>

#include "core/cuda_backend.hpp"
#include "cubekit/context.hpp"
#include "cubekit/error.hpp"

namespace cubekit {

std::string CubeShape::describe() const {
    return std::to_string(width) + "x" + std::to_string(height) + "x" + std::to_string(bands) + " " +
           std::string(dtype_name(dtype)) + " " + std::string(layout_name(layout));
}

Metadata Metadata::select_bands(const std::vector<int>& bands) const {
    Metadata out = *this;
    if (!wavelengths.empty()) {
        out.wavelengths.clear();
        for (int b : bands) out.wavelengths.push_back(wavelengths.at(std::size_t(b)));
    }
    if (!band_names.empty()) {
        out.band_names.clear();
        for (int b : bands) out.band_names.push_back(band_names.at(std::size_t(b)));
    }
    return out;
}

Cube::Cube(int width, int height, int bands, DType dtype, Layout layout)
    : Cube(uninitialized(width, height, bands, dtype, layout)) {
    if (!buffer_.empty()) std::memset(buffer_.data(), 0, buffer_.size());
}

Cube Cube::uninitialized(int width, int height, int bands, DType dtype, Layout layout) {
    if (width < 0 || height < 0 || bands < 0)
        throw InvalidInput("Cube: dimensions " + std::to_string(width) + "x" + std::to_string(height) + "x" +
                           std::to_string(bands) + " must not be negative");
    Cube c;
    c.shape_ = CubeShape{width, height, bands, dtype, layout};
    c.buffer_ = HostBuffer(c.shape_.num_bytes());
    return c;
}

Cube Cube::clone() const {
    Cube copy;
    copy.shape_ = shape_;
    copy.buffer_ = buffer_.clone();
    copy.metadata_ = metadata_;
    return copy;
}

void Cube::check_type(DType t) const {
    if (t != shape_.dtype)
        throw InvalidInput("Cube: accessed as " + std::string(dtype_name(t)) + " but holds " +
                           std::string(dtype_name(shape_.dtype)));
}

double Cube::value(int x, int y, int b) const {
    const std::size_t i = shape_.offset(x, y, b);
    return visit_dtype(shape_.dtype, [&](auto tag) {
        using T = decltype(tag);
        return double(reinterpret_cast<const T*>(buffer_.data())[i]);
    });
}

namespace {

// Float → integer: round to nearest (ties away from zero), saturate, NaN → 0.
template <typename T>
T convert_value(double v) {
    if constexpr (std::is_floating_point_v<T>) {
        return T(v);
    } else {
        if (std::isnan(v)) return T(0);
        const double r = std::round(v);
        if (r <= double(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
        if (r >= double(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
        return T(r);
    }
}

}  // namespace

void Cube::set_value(int x, int y, int b, double v) {
    const std::size_t i = shape_.offset(x, y, b);
    visit_dtype(shape_.dtype, [&](auto tag) {
        using T = decltype(tag);
        reinterpret_cast<T*>(buffer_.data())[i] = convert_value<T>(v);
    });
}

Cube Cube::to_layout(Layout layout) const {
    Cube out(width(), height(), bands(), dtype(), layout);
    out.metadata_ = metadata_;
    if (layout == this->layout()) {
        if (num_bytes()) std::memcpy(out.bytes(), bytes(), num_bytes());
        return out;
    }
    const CubeShape& src = shape_;
    const CubeShape& dst = out.shape_;
    const std::byte* s = bytes();
    std::byte* d = out.bytes();
    // Element-wise copy; the element size is dispatched once so the inner loop stays simple.
    visit_dtype(dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* sp = reinterpret_cast<const T*>(s);
        T* dp = reinterpret_cast<T*>(d);
#pragma omp parallel for schedule(static)
        for (int y = 0; y < height(); ++y)
            for (int b = 0; b < bands(); ++b)
                for (int x = 0; x < width(); ++x) dp[dst.offset(x, y, b)] = sp[src.offset(x, y, b)];
    });
    return out;
}

Cube Cube::to_dtype(DType dtype) const {
    Cube out(width(), height(), bands(), dtype, layout());
    out.metadata_ = metadata_;
    const std::size_t n = num_elements();
    visit_dtype(this->dtype(), [&](auto src_tag) {
        using S = decltype(src_tag);
        const S* s = reinterpret_cast<const S*>(bytes());
        visit_dtype(dtype, [&](auto dst_tag) {
            using D = decltype(dst_tag);
            D* d = reinterpret_cast<D*>(out.bytes());
            for (std::size_t i = 0; i < n; ++i) {
                if constexpr (std::is_same_v<S, D>) d[i] = s[i];
                else if constexpr (std::is_floating_point_v<D> && !std::is_floating_point_v<S>) d[i] = D(s[i]);
                else if constexpr (std::is_integral_v<D> && std::is_integral_v<S>) {
                    // integer → integer saturates
                    const long long v = (long long)s[i];
                    d[i] = v < (long long)std::numeric_limits<D>::lowest() ? std::numeric_limits<D>::lowest()
                         : v > (long long)std::numeric_limits<D>::max()    ? std::numeric_limits<D>::max()
                                                                            : D(v);
                } else d[i] = convert_value<D>(double(s[i]));
            }
        });
    });
    return out;
}

Cube Cube::select_bands(const std::vector<int>& band_list) const {
    for (int b : band_list)
        if (b < 0 || b >= bands())
            throw InvalidInput("bands: band " + std::to_string(b) + " is out of range (the cube has " +
                               std::to_string(bands()) + " bands, 0.." + std::to_string(bands() - 1) + ")");
    Cube out(width(), height(), int(band_list.size()), dtype(), layout());
    out.metadata_ = metadata_.select_bands(band_list);
    visit_dtype(dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* s = data<T>();
        T* d = out.data<T>();
        for (int y = 0; y < height(); ++y)
            for (std::size_t k = 0; k < band_list.size(); ++k)
                for (int x = 0; x < width(); ++x) d[out.shape_.offset(x, y, int(k))] = s[shape_.offset(x, y, band_list[k])];
    });
    return out;
}

Cube Cube::crop(int x0, int y0, int w, int h) const {
    if (x0 < 0 || y0 < 0 || w <= 0 || h <= 0 || std::int64_t(x0) + w > width() || std::int64_t(y0) + h > height())
        throw InvalidInput("crop: window " + std::to_string(w) + "x" + std::to_string(h) + "+" + std::to_string(x0) +
                           "+" + std::to_string(y0) + " does not lie inside the " + std::to_string(width()) + "x" +
                           std::to_string(height()) + " image");
    Cube out(w, h, bands(), dtype(), layout());
    out.metadata_ = metadata_.window(x0, y0);
    visit_dtype(dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* s = data<T>();
        T* d = out.data<T>();
        for (int y = 0; y < h; ++y)
            for (int b = 0; b < bands(); ++b)
                for (int x = 0; x < w; ++x) d[out.shape_.offset(x, y, b)] = s[shape_.offset(x0 + x, y0 + y, b)];
    });
    return out;
}

DeviceCube::DeviceCube(const Context& ctx, const CubeShape& shape) : shape_(shape), buffer_(ctx, shape.num_bytes()) {}

DeviceCube DeviceCube::upload(const Context& ctx, const Cube& cube) {
    DeviceCube d(ctx, cube.shape());
    d.buffer_.upload(ctx, cube.bytes(), cube.num_bytes());
    return d;
}

Cube DeviceCube::download(const Context& ctx) const {
    Cube out(shape_.width, shape_.height, shape_.bands, shape_.dtype, shape_.layout);
    buffer_.download(ctx, out.bytes(), out.num_bytes());
    return out;
}

std::vector<int> parse_band_list(std::string_view text, int num_bands, std::string_view what) {
    std::vector<int> out;
    auto fail = [&](std::string_view token, const std::string& why) -> InvalidInput {
        return InvalidInput(std::string(what) + " = '" + std::string(text) + "': '" + std::string(token) + "' " + why);
    };
    auto parse_int = [&](std::string_view s, std::string_view token) {
        int v = 0;
        const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || p != s.data() + s.size() || s.empty())
            throw fail(token, "is not a band number or range (0-based, e.g. 0-9,20)");
        if (v < 0 || v >= num_bands)
            throw fail(token, "is out of range (the cube has " + std::to_string(num_bands) + " bands, 0.." +
                                  std::to_string(num_bands - 1) + ")");
        return v;
    };
    std::size_t start = 0;
    while (start <= text.size()) {
        const std::size_t comma = text.find(',', start);
        const std::string_view token = text.substr(start, comma == std::string_view::npos ? text.npos : comma - start);
        const std::size_t dash = token.find('-', 1);
        int a = 0, b = 0;
        if (dash == std::string_view::npos) {
            a = b = parse_int(token, token);
        } else {
            a = parse_int(token.substr(0, dash), token), b = parse_int(token.substr(dash + 1), token);
            if (b < a) throw fail(token, "is a decreasing range");
        }
        // A band may repeat, but the selection may not outgrow the cube (a list of thousands of
        // repeats would multiply the memory without meaning anything more).
        if (out.size() + std::size_t(b - a + 1) > std::size_t(num_bands))
            throw fail(token, "makes the selection longer than the cube's " + std::to_string(num_bands) +
                                  " bands (a band may repeat, the list may not outgrow the cube)");
        for (int v = a; v <= b; ++v) out.push_back(v);
        if (comma == std::string_view::npos) break;
        start = comma + 1;
    }
    return out;
}

}  // namespace cubekit

// ---- Views, borrowing and copies between any strides ------------------------------------------

namespace cubekit {
namespace {

template <typename E>
void copy_host_elements(const CubeView& src, const MutableCubeView& dst) {
    const E* s = reinterpret_cast<const E*>(src.data());
    E* d = reinterpret_cast<E*>(dst.data());
    const int W = src.width(), H = src.height(), B = src.bands();
    // Loop in the destination's own order so that writes are sequential.
    switch (dst.nearest_layout()) {
        case Layout::BIP:
#pragma omp parallel for schedule(static)
            for (int y = 0; y < H; ++y)
                for (int x = 0; x < W; ++x)
                    for (int b = 0; b < B; ++b) d[dst.offset(x, y, b)] = s[src.offset(x, y, b)];
            break;
        case Layout::BIL:
#pragma omp parallel for schedule(static)
            for (int y = 0; y < H; ++y)
                for (int b = 0; b < B; ++b)
                    for (int x = 0; x < W; ++x) d[dst.offset(x, y, b)] = s[src.offset(x, y, b)];
            break;
        case Layout::BSQ:
#pragma omp parallel for collapse(2) schedule(static)
            for (int b = 0; b < B; ++b)
                for (int y = 0; y < H; ++y)
                    for (int x = 0; x < W; ++x) d[dst.offset(x, y, b)] = s[src.offset(x, y, b)];
            break;
    }
}

void check_same_cube(const CubeView& src, const MutableCubeView& dst) {
    if (src.width() != dst.width() || src.height() != dst.height() || src.bands() != dst.bands() ||
        src.dtype() != dst.dtype())
        throw InvalidInput("copy_cube: source is " + src.describe() + ", destination " + dst.describe() +
                           "; width, height, bands and element type must agree");
}

CubeShape dense_shape(const CubeView& v, Layout layout) {
    return CubeShape{v.width(), v.height(), v.bands(), v.dtype(), layout};
}

}  // namespace

namespace detail {
// Host ↔ host, any strides (used by copy_cube and the CPU-only build).
// memmove, in parallel 1 MiB pieces when the buffers are large and apart (one thread copies ~10 GB/s;
// the tiled path's staging needs several).
static void copy_bytes(std::byte* dst, const std::byte* src, std::size_t n) {
    constexpr std::size_t kPiece = std::size_t(1) << 20;
    const bool apart = dst + n <= src || src + n <= dst;
    if (n < 4 * kPiece || !apart) {
        std::memmove(dst, src, n);
        return;
    }
    const std::int64_t pieces = std::int64_t((n + kPiece - 1) / kPiece);
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < pieces; ++i) {
        const std::size_t at = std::size_t(i) * kPiece;
        std::memcpy(dst + at, src + at, std::min(kPiece, n - at));
    }
}

// Both sides hold each row's samples contiguously (x stride 1: BSQ and BIL and their windows; or
// whole spectra of a row contiguous: BIP windows): one memcpy per row, rows in parallel. This is
// the staging copy of the tiled path, so it must run near memory bandwidth.
static bool copy_host_rows(const CubeView& src, const MutableCubeView& dst) {
    const std::int64_t W = src.width(), H = src.height(), B = src.bands();
    const std::size_t e = dtype_size(src.dtype());
    const Strides &s = src.strides(), &d = dst.strides();
    if (s.x == 1 && d.x == 1) {
        const std::int64_t rows = H * B;
#pragma omp parallel for schedule(static)
        for (std::int64_t r = 0; r < rows; ++r) {
            const std::int64_t y = r % H, b = r / H;
            std::memcpy(dst.data() + dst.offset(0, int(y), int(b)) * std::int64_t(e),
                        src.data() + src.offset(0, int(y), int(b)) * std::int64_t(e), std::size_t(W) * e);
        }
        return true;
    }
    if (s.b == 1 && d.b == 1 && s.x == B && d.x == B) {
#pragma omp parallel for schedule(static)
        for (std::int64_t y = 0; y < H; ++y)
            std::memcpy(dst.data() + dst.offset(0, int(y), 0) * std::int64_t(e),
                        src.data() + src.offset(0, int(y), 0) * std::int64_t(e), std::size_t(W * B) * e);
        return true;
    }
    return false;
}

void copy_cube_host(const CubeView& src, const MutableCubeView& dst) {
    if (src.empty()) return;
    const auto layout = src.dense_layout();
    if (layout && dst.is_dense(*layout)) {
        copy_bytes(dst.data(), src.data(), src.num_bytes());
        return;
    }
    if (copy_host_rows(src, dst)) return;
    switch (dtype_size(src.dtype())) {
        case 1: copy_host_elements<std::uint8_t>(src, dst); break;
        case 2: copy_host_elements<std::uint16_t>(src, dst); break;
        case 4: copy_host_elements<std::uint32_t>(src, dst); break;
        default: copy_host_elements<std::uint64_t>(src, dst); break;
    }
}
}  // namespace detail

void copy_cube(const Context& ctx, const CubeView& src, const MutableCubeView& dst) {
    check_same_cube(src, dst);
    if (src.empty()) return;
    if (!src.on_device() && !dst.on_device()) detail::copy_cube_host(src, dst);
    else detail::copy_cube_cuda(ctx, src, dst);
}

Cube Cube::from_view(const CubeView& view, Layout layout) {
    if (view.on_device())
        throw InvalidInput("Cube::from_view: the view is in device memory; use DeviceCube::download or copy_cube");
    Cube out(view.width(), view.height(), view.bands(), view.dtype(), layout);
    detail::copy_cube_host(view, out.mutable_view());
    return out;
}

namespace {
Layout borrowable_layout(const CubeView& view, Memory memory, const char* who) {
    if (view.memory() != memory)
        throw InvalidInput(std::string(who) + ": the view is in " + (view.on_device() ? "device" : "host") +
                           " memory");
    const auto layout = view.dense_layout();
    if (!layout) throw InvalidInput(std::string(who) + ": the view (" + view.describe() + ") is not dense in any layout");
    return *layout;
}
}  // namespace

Cube Cube::borrow(const MutableCubeView& view) { return borrow_const(view); }

Cube Cube::borrow_const(const CubeView& view) {
    Cube c;
    c.shape_ = dense_shape(view, borrowable_layout(view, Memory::Host, "Cube::borrow"));
    c.buffer_ = HostBuffer::borrow(const_cast<std::byte*>(view.data()), view.num_bytes());
    return c;
}

CubeView Cube::view() const {
    return CubeView::host(bytes(), width(), height(), bands(), dtype(),
                          dense_strides(width(), height(), bands(), layout()));
}

MutableCubeView Cube::mutable_view() {
    return MutableCubeView::host(bytes(), width(), height(), bands(), dtype(),
                                 dense_strides(width(), height(), bands(), layout()));
}

DeviceCube DeviceCube::from_view(const Context& ctx, const CubeView& view, Layout layout) {
    DeviceCube out(ctx, dense_shape(view, layout));
    copy_cube(ctx, view, out.mutable_view());
    return out;
}

DeviceCube DeviceCube::borrow(const MutableCubeView& view) { return borrow_const(view); }

DeviceCube DeviceCube::borrow_const(const CubeView& view) {
    DeviceCube c;
    c.shape_ = dense_shape(view, borrowable_layout(view, Memory::Device, "DeviceCube::borrow"));
    c.buffer_ = DeviceBuffer::borrow(const_cast<std::byte*>(view.data()), view.num_bytes(), view.device());
    return c;
}

CubeView DeviceCube::view() const {
    return CubeView::device(buffer_.data(), buffer_.device(), shape_.width, shape_.height, shape_.bands, shape_.dtype,
                            dense_strides(shape_.width, shape_.height, shape_.bands, shape_.layout));
}

MutableCubeView DeviceCube::mutable_view() {
    return MutableCubeView::device(buffer_.data(), buffer_.device(), shape_.width, shape_.height, shape_.bands,
                                   shape_.dtype, dense_strides(shape_.width, shape_.height, shape_.bands, shape_.layout));
}

CubeInLayout::CubeInLayout(const Context& ctx, const CubeView& input, Layout layout, Memory memory) {
    if ((memory == Memory::Device || input.on_device()) && !ctx.is_cuda())
        throw InvalidInput("CubeInLayout: device memory needs a CUDA context; this one runs on the CPU");
    const bool in_place = input.memory() == memory && input.is_dense(layout) &&
                          (memory == Memory::Host || input.device() == ctx.device());
    copied_ = !in_place;
    if (memory == Memory::Host) {
        if (in_place) {
            host_ = Cube::borrow_const(input);
            host_.shape_.layout = layout;  // a cube dense in several layouts (one band) takes the one asked for
        } else if (!input.on_device()) {
            host_ = Cube::from_view(input, layout);
        } else {
            host_ = Cube(input.width(), input.height(), input.bands(), input.dtype(), layout);
            copy_cube(ctx, input, host_.mutable_view());
        }
        view_ = host_.view();
    } else {
        if (in_place) {
            device_ = DeviceCube::borrow_const(input);
            device_.shape_.layout = layout;
        } else {
            device_ = DeviceCube::from_view(ctx, input, layout);
        }
        view_ = device_.view();
    }
}

const CubeShape& CubeInLayout::shape() const { return view_.on_device() ? device_.shape() : host_.shape(); }

}  // namespace cubekit

namespace cubekit {
CubeShape shape_of(const CubeView& view) {
    return CubeShape{view.width(), view.height(), view.bands(), view.dtype(),
                     view.dense_layout().value_or(view.nearest_layout())};
}
}  // namespace cubekit
