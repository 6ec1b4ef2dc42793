// Views: checks, descriptions, and host copies between any strides.
#include "cubekit/view.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <string>

namespace cubekit {

template <typename Byte>
BasicCubeView<Byte>::BasicCubeView(Void* data, int width, int height, int bands, DType dtype, Strides strides,
                                   Memory memory, int device)
    : data_(static_cast<Byte*>(data)), width_(width), height_(height), bands_(bands), dtype_(dtype),
      strides_(strides), memory_(memory), device_(device) {
    if (width < 0 || height < 0 || bands < 0)
        throw InvalidInput("view: dimensions " + std::to_string(width) + "x" + std::to_string(height) + "x" +
                           std::to_string(bands) + " must not be negative");
    if (!data && width && height && bands) throw InvalidInput("view: a non-empty view needs a data pointer");
    if (memory == Memory::Device && device < 0)
        throw InvalidInput("view: device = " + std::to_string(device) + "; expected a CUDA device index >= 0");
}

namespace {
// Strides of axes of extent 1 do not matter: NumPy gives them any value.
Strides canonical(const Strides& s, int width, int height, int bands) {
    return {width > 1 ? s.x : 0, height > 1 ? s.y : 0, bands > 1 ? s.b : 0};
}
}  // namespace

template <typename Byte>
bool BasicCubeView<Byte>::is_dense(Layout layout) const {
    if (empty()) return true;
    return canonical(strides_, width_, height_, bands_) ==
           canonical(dense_strides(width_, height_, bands_, layout), width_, height_, bands_);
}

template <typename Byte>
bool BasicCubeView<Byte>::is_pitched(Layout layout) const {
    if (empty()) return true;
    const Strides& s = strides_;
    const std::int64_t W = width_, H = height_, B = bands_;
    // An axis of extent > 1 must step over the whole span of the faster axes (no overlap).
    auto fits = [](std::int64_t extent, std::int64_t stride, std::int64_t span) { return extent <= 1 || stride >= span; };
    auto unit = [](std::int64_t extent, std::int64_t stride) { return extent <= 1 || stride == 1; };
    const std::int64_t row = H > 1 ? s.y : W, band = B > 1 ? s.b : W;
    switch (layout) {
        case Layout::BSQ: return unit(W, s.x) && fits(H, s.y, W) && fits(B, s.b, row * (H - 1) + W);
        case Layout::BIL: return unit(W, s.x) && fits(B, s.b, W) && fits(H, s.y, band * (B - 1) + W);
        case Layout::BIP: return unit(B, s.b) && (W <= 1 || s.x == B) && fits(H, s.y, W * B);
    }
    return false;
}

template <typename Byte>
Layout BasicCubeView<Byte>::nearest_layout() const {
    const Strides s = canonical(strides_, width_, height_, bands_);
    const std::int64_t ax = std::llabs(s.x), ay = std::llabs(s.y), ab = std::llabs(s.b);
    if (ab <= ax && ab <= ay) return ax <= ay ? Layout::BIP : Layout::BSQ;  // b fastest (y<x: rare)
    if (ax <= ab && ab <= ay) return Layout::BIL;
    return Layout::BSQ;
}

template <typename Byte>
std::string BasicCubeView<Byte>::describe() const {
    std::string text = std::to_string(width_) + "x" + std::to_string(height_) + "x" + std::to_string(bands_) + " " +
                       std::string(dtype_name(dtype_)) + " ";
    const std::array<std::string_view, 3> names{"bsq", "bil", "bip"};
    if (const auto l = dense_layout()) text += names[int(*l)];
    else if (is_pitched(nearest_layout())) text += "window of " + std::string(names[int(nearest_layout())]);
    else text += "strided (" + std::to_string(strides_.x) + ", " + std::to_string(strides_.y) + ", " +
                 std::to_string(strides_.b) + ")";
    if (memory_ == Memory::Device) text += " on device " + std::to_string(device_);
    return text;
}

template <typename Byte>
void BasicCubeView<Byte>::check_window(int x0, int y0, int w, int h) const {
    if (x0 < 0 || y0 < 0 || w < 0 || h < 0 || std::int64_t(x0) + w > width_ || std::int64_t(y0) + h > height_)
        throw InvalidInput("view: window " + std::to_string(w) + "x" + std::to_string(h) + "+" + std::to_string(x0) +
                           "+" + std::to_string(y0) + " does not lie inside the " + std::to_string(width_) + "x" +
                           std::to_string(height_) + " image");
}

template <typename Byte>
void BasicCubeView<Byte>::check_band_range(int b0, int n) const {
    if (b0 < 0 || n < 0 || std::int64_t(b0) + n > bands_)
        throw InvalidInput("view: bands " + std::to_string(b0) + ".." + std::to_string(std::int64_t(b0) + n - 1) +
                           " are out of range (the view has " + std::to_string(bands_) + " bands)");
}

template <typename Byte>
void BasicCubeView<Byte>::throw_type_mismatch(DType asked) const {
    throw InvalidInput("view: accessed as " + std::string(dtype_name(asked)) + " but holds " +
                       std::string(dtype_name(dtype_)));
}

template class BasicCubeView<const std::byte>;
template class BasicCubeView<std::byte>;

}  // namespace cubekit
