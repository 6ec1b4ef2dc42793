#pragma once
/// Views: a cube's samples where they already are — host or device memory, owned by a Cube, a
/// DeviceCube or the caller — described by element strides, so BSQ, BIL and BIP are stride
/// patterns and a window is an offset. A view never owns or copies memory.
///
///     cubekit::Cube cube = cubekit::read_cube("scene.hdr");        // e.g. BIP on disk
///     cubekit::CubeView all = cube;                                 // no copy
///     cubekit::CubeView win = all.window(10, 20, 64, 64);           // no copy: offset + the same strides
///     cubekit::CubeView b40 = all.band_range(40, 1);                // one band of a BIP cube: x stride = bands
///     cubekit::Cube g = cubekit::rcmg(ctx, win);                    // reads the window where it is
///
///     // A caller's device array (CuPy, PyTorch): H×W×B, C order, float32 = dense BIP.
///     auto v = cubekit::CubeView::device(ptr, 0, W, H, B, cubekit::DType::F32,
///                                        cubekit::dense_strides(W, H, B, cubekit::Layout::BIP));
///
/// Strides count elements (not bytes) and may be negative (a flipped NumPy array) or zero (a
/// broadcast band); sample (x, y, b) is data[x·stride.x + y·stride.y + b·stride.b].
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

#include "cubekit/dtype.hpp"
#include "cubekit/error.hpp"

#if defined(__CUDACC__)
#define CUBEKIT_VIEW_HD __host__ __device__ __forceinline__
#else
#define CUBEKIT_VIEW_HD inline
#endif

namespace cubekit {

/// Sample order in memory.
/// BSQ: band-major, each band a contiguous row-major image ([b][y][x]).
/// BIL: line-interleaved ([y][b][x]).
/// BIP: pixel-major, each spectrum contiguous ([y][x][b]).
enum class Layout { BSQ, BIL, BIP };

/// Where samples live.
enum class Memory { Host, Device };

/// Element strides of the x (column), y (row) and b (band) axes.
struct Strides {
    std::int64_t x = 0, y = 0, b = 0;
    bool operator==(const Strides&) const = default;
};

/// The strides of a dense cube of this size in this layout.
constexpr Strides dense_strides(int width, int height, int bands, Layout layout) {
    const std::int64_t W = width, H = height, B = bands;
    switch (layout) {
        case Layout::BSQ: return {1, W, W * H};
        case Layout::BIL: return {1, W * B, W};
        case Layout::BIP: return {B, W * B, 1};
    }
    return {};
}

/// A typed strided view, for backends: `v(x, y, b)` is the sample. Usable in CUDA kernels.
template <typename T>
struct StridedView {
    T* data = nullptr;
    int width = 0, height = 0, bands = 0;
    Strides strides;
    CUBEKIT_VIEW_HD std::int64_t offset(int x, int y, int b) const {
        return std::int64_t(x) * strides.x + std::int64_t(y) * strides.y + std::int64_t(b) * strides.b;
    }
    CUBEKIT_VIEW_HD T& operator()(int x, int y, int b) const { return data[offset(x, y, b)]; }
};

template <typename Byte>
class BasicCubeView;
/// A read-only view; every Cube, DeviceCube and MutableCubeView converts to it.
using CubeView = BasicCubeView<const std::byte>;
/// A writable view (outputs of the `_into` calls).
using MutableCubeView = BasicCubeView<std::byte>;

template <typename Byte>
class BasicCubeView {
    static_assert(std::is_same_v<std::remove_const_t<Byte>, std::byte>);
    using Void = std::conditional_t<std::is_const_v<Byte>, const void, void>;

public:
    BasicCubeView() = default;
    /// A mutable view converts to a read-only one.
    template <typename Other>
        requires(std::is_const_v<Byte> && !std::is_const_v<Other>)
    BasicCubeView(const BasicCubeView<Other>& v)
        : data_(v.data()), width_(v.width()), height_(v.height()), bands_(v.bands()), dtype_(v.dtype()),
          strides_(v.strides()), memory_(v.memory()), device_(v.device()) {}

    /// Wraps a caller's host memory: `data` points at sample (0, 0, 0). Throws InvalidInput for
    /// negative sizes.
    static BasicCubeView host(Void* data, int width, int height, int bands, DType dtype, Strides strides) {
        return BasicCubeView(data, width, height, bands, dtype, strides, Memory::Host, 0);
    }
    /// Wraps a caller's memory on CUDA device `device`.
    static BasicCubeView device(Void* data, int device, int width, int height, int bands, DType dtype, Strides strides) {
        return BasicCubeView(data, width, height, bands, dtype, strides, Memory::Device, device);
    }

    Byte* data() const { return data_; }
    int width() const { return width_; }
    int height() const { return height_; }
    int bands() const { return bands_; }
    DType dtype() const { return dtype_; }
    const Strides& strides() const { return strides_; }
    Memory memory() const { return memory_; }
    bool on_device() const { return memory_ == Memory::Device; }
    /// CUDA device index (device memory only).
    int device() const { return device_; }
    std::size_t num_pixels() const { return std::size_t(width_) * std::size_t(height_); }
    std::size_t num_elements() const { return num_pixels() * std::size_t(bands_); }
    /// Bytes of the samples themselves (what a dense copy holds).
    std::size_t num_bytes() const { return num_elements() * dtype_size(dtype_); }
    bool empty() const { return num_elements() == 0; }

    /// True when the view is exactly a dense cube in `layout` (no padding, no offset gaps).
    /// (Strides of axes of extent 1 are ignored: NumPy gives them any value.)
    bool is_dense(Layout layout) const;
    /// The layout the view is dense in (BSQ first, then BIL, BIP), or none.
    std::optional<Layout> dense_layout() const {
        for (Layout l : {Layout::BSQ, Layout::BIL, Layout::BIP})
            if (is_dense(l)) return l;
        return std::nullopt;
    }
    /// True when rows of each band are contiguous and the axes nest in `layout`'s order with any
    /// pitch: a window of a dense cube in that layout is pitched in it.
    bool is_pitched(Layout layout) const;
    /// The layout whose axis order (fastest to slowest) the strides follow: what a dense copy of
    /// this view should use to copy in one sweep.
    Layout nearest_layout() const;

    /// Element offset of sample (x, y, b) from data().
    std::int64_t offset(int x, int y, int b) const {
        return std::int64_t(x) * strides_.x + std::int64_t(y) * strides_.y + std::int64_t(b) * strides_.b;
    }

    /// The window [x0, x0+w) × [y0, y0+h), all bands, no copy. Throws InvalidInput naming the
    /// window when it leaves the view.
    BasicCubeView window(int x0, int y0, int w, int h) const {
        check_window(x0, y0, w, h);
        BasicCubeView v = *this;
        v.data_ = data_ + offset(x0, y0, 0) * std::int64_t(dtype_size(dtype_));
        v.width_ = w;
        v.height_ = h;
        return v;
    }
    /// Bands [b0, b0+n), no copy. Throws InvalidInput when the range leaves the view.
    BasicCubeView band_range(int b0, int n) const {
        check_band_range(b0, n);
        BasicCubeView v = *this;
        v.data_ = data_ + offset(0, 0, b0) * std::int64_t(dtype_size(dtype_));
        v.bands_ = n;
        return v;
    }

    /// The typed view for a backend. Throws InvalidInput when T is not the element type.
    template <typename T>
    StridedView<std::conditional_t<std::is_const_v<Byte>, const T, T>> typed() const {
        if (dtype_v<T> != dtype_) throw_type_mismatch(dtype_v<T>);
        using P = std::conditional_t<std::is_const_v<Byte>, const T, T>;
        return {reinterpret_cast<P*>(data_), width_, height_, bands_, strides_};
    }

    /// "64x64x156 i16 bsq" for a dense view; "64x64x156 i16 strided (window of bsq)" otherwise.
    std::string describe() const;

private:
    BasicCubeView(Void* data, int width, int height, int bands, DType dtype, Strides strides, Memory memory, int device);
    void check_window(int x0, int y0, int w, int h) const;
    void check_band_range(int b0, int n) const;
    [[noreturn]] void throw_type_mismatch(DType asked) const;

    Byte* data_ = nullptr;
    int width_ = 0, height_ = 0, bands_ = 0;
    DType dtype_ = DType::F32;
    Strides strides_;
    Memory memory_ = Memory::Host;
    int device_ = 0;
};

extern template class BasicCubeView<const std::byte>;
extern template class BasicCubeView<std::byte>;

}  // namespace cubekit
