#pragma once
/// Cube: width × height × bands samples of one element type, in one layout, on the host.
/// DeviceCube: the same on a CUDA device.
///
///     Cube c(95, 95, 156, DType::I16, Layout::BSQ);   // zero-filled
///     c.at<std::int16_t>(x, y, b) = 7;                 // x column, y row (row 0 on top), b band
///     Cube bip = c.to_layout(Layout::BIP);             // conversions are explicit
///     CubeView w = c.view().window(8, 8, 16, 16);      // views never copy (view.hpp)
///
/// Both own their samples, or borrow them from a caller (Cube::borrow, DeviceCube::borrow): a
/// borrowed cube frees nothing, and its memory must outlive it.
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cubekit/buffer.hpp"
#include "cubekit/dtype.hpp"
#include "cubekit/view.hpp"

namespace cubekit {

/// Layout names: "bsq", "bil", "bip" (parsed ignoring case: ENVI headers write "BSQ").
template <>
struct EnumNames<Layout> {
    static constexpr EnumName<Layout> names[] = {{Layout::BSQ, "bsq"}, {Layout::BIL, "bil"}, {Layout::BIP, "bip"}};
    static constexpr bool case_insensitive = true;
};
inline std::string_view layout_name(Layout l) { return enum_name(l); }  ///< "bsq", "bil", "bip"

/// "x0, dx, rx, y0, ry, dy" (the form of Metadata::extra["geotransform"]).
std::string geotransform_text(const std::array<double, 6>& t);
/// The ENVI map info of a north-up geotransform ("Arbitrary, 1, 1, x0, y0, dx, -dy": the projection
/// is the coordinate system string beside it); empty for a rotated one.
std::string map_info_from_geotransform(const std::array<double, 6>& t);

/// Optional metadata carried through reads, conversions and writes.
struct Metadata {
    std::vector<double> wavelengths;      ///< one per band, or empty
    std::string wavelength_units;         ///< e.g. "Nanometers"; empty if unknown
    std::vector<std::string> band_names;  ///< one per band, or empty
    std::string map_info;                 ///< ENVI 'map info' value (without braces), or empty
    std::string coordinate_system;        ///< ENVI 'coordinate system string' / GDAL WKT, or empty
    std::string description;
    /// Other header fields kept verbatim (ENVI keyword → value), e.g. "fwhm", "bbl".
    std::map<std::string, std::string> extra;
    /// What the reader noticed and accepted (e.g. bytes after the samples an ENVI header
    /// describes), one sentence each naming the file; never written to an output.
    std::vector<std::string> warnings;

    /// Keeps the per-band fields of the listed bands, in that order.
    Metadata select_bands(const std::vector<int>& bands) const;
    /// The metadata of the window starting at pixel (x0, y0): map info and geotransform shifted so
    /// each pixel keeps its map coordinates (georef.cpp).
    Metadata window(int x0, int y0) const;
    /// The georeference alone (map info, coordinate system, geotransform): what a product covering
    /// the same pixels (a gradient, a class map, a score map) carries into its outputs.
    Metadata georeference() const;
    /// Pixel corner (column, row) → map: GDAL's (x0, dx, rx, y0, ry, dy), from extra["geotransform"]
    /// (a GDAL input) or the ENVI map info (north-up; a rotated one gives none); nullopt without one.
    std::optional<std::array<double, 6>> geotransform() const;
};

/// Shape, element type and layout of a cube, wherever its samples live.
struct CubeShape {
    int width = 0;
    int height = 0;
    int bands = 0;
    DType dtype = DType::F32;
    Layout layout = Layout::BSQ;

    std::size_t num_pixels() const { return std::size_t(width) * std::size_t(height); }
    std::size_t num_elements() const { return num_pixels() * std::size_t(bands); }
    std::size_t num_bytes() const { return num_elements() * dtype_size(dtype); }
    /// Element offset of sample (x, y, b) in this layout.
    std::size_t offset(int x, int y, int b) const {
        const std::size_t W = std::size_t(width), H = std::size_t(height), B = std::size_t(bands);
        switch (layout) {
            case Layout::BSQ: return (std::size_t(b) * H + std::size_t(y)) * W + std::size_t(x);
            case Layout::BIL: return (std::size_t(y) * B + std::size_t(b)) * W + std::size_t(x);
            case Layout::BIP: return (std::size_t(y) * W + std::size_t(x)) * B + std::size_t(b);
        }
        return 0;
    }
    /// "95x95x156 i16 bsq"
    std::string describe() const;
};

/// A host-resident cube that owns its samples.
class Cube {
public:
    Cube() = default;
    /// Allocates a zero-filled cube. Throws InvalidInput for negative dimensions.
    Cube(int width, int height, int bands, DType dtype, Layout layout = Layout::BSQ);
    Cube(Cube&&) noexcept = default;
    Cube& operator=(Cube&&) noexcept = default;
    Cube clone() const;
    /// A cube whose samples are not initialised, for a caller that writes every one of them (a
    /// reader, a copy): saves the zero-filling pass over memory the caller overwrites at once.
    static Cube uninitialized(int width, int height, int bands, DType dtype, Layout layout = Layout::BSQ);
    /// A dense copy of any host view, in `layout` (metadata empty). Throws InvalidInput for a
    /// device view (use download()).
    static Cube from_view(const CubeView& view, Layout layout);
    /// A cube over a caller's dense host memory (no copy, nothing freed). Throws InvalidInput when
    /// the view is on a device or not dense in any layout.
    static Cube borrow(const MutableCubeView& view);
    /// Read-only borrowing: the caller promises not to write through the returned cube.
    static Cube borrow_const(const CubeView& view);
    /// True when the samples belong to someone else.
    bool borrowed() const { return buffer_.borrowed(); }

    /// Views of the samples (no copy).
    CubeView view() const;
    MutableCubeView mutable_view();
    operator CubeView() const { return view(); }
    operator MutableCubeView() { return mutable_view(); }

    const CubeShape& shape() const { return shape_; }
    int width() const { return shape_.width; }
    int height() const { return shape_.height; }
    int bands() const { return shape_.bands; }
    DType dtype() const { return shape_.dtype; }
    Layout layout() const { return shape_.layout; }
    bool empty() const { return shape_.num_elements() == 0; }
    std::size_t num_elements() const { return shape_.num_elements(); }
    std::size_t num_bytes() const { return shape_.num_bytes(); }

    std::byte* bytes() { return buffer_.data(); }
    const std::byte* bytes() const { return buffer_.data(); }
    /// Typed access; throws InvalidInput when T is not the cube's element type.
    template <typename T> T* data() { check_type(dtype_v<T>); return reinterpret_cast<T*>(buffer_.data()); }
    template <typename T> const T* data() const { check_type(dtype_v<T>); return reinterpret_cast<const T*>(buffer_.data()); }
    template <typename T> T& at(int x, int y, int b) { return data<T>()[shape_.offset(x, y, b)]; }
    template <typename T> const T& at(int x, int y, int b) const { return data<T>()[shape_.offset(x, y, b)]; }
    /// Any sample as double (exact for every type but u32/i32 beyond 2^53, which cannot occur).
    double value(int x, int y, int b) const;
    void set_value(int x, int y, int b, double v);  ///< rounds and saturates for integer types

    Metadata& metadata() { return metadata_; }
    const Metadata& metadata() const { return metadata_; }

    /// Same samples in another layout (a copy, even when the layout is the same).
    Cube to_layout(Layout layout) const;
    /// Same layout, another element type. Float → integer rounds to nearest (ties away from
    /// zero) and saturates at the type's range; NaN becomes 0. Integer → float is exact except
    /// u32/i32 → f32 (rounded).
    Cube to_dtype(DType dtype) const;
    /// The listed bands (0-based, any order, repeats allowed), metadata kept.
    /// Throws InvalidInput naming the first band out of range.
    Cube select_bands(const std::vector<int>& bands) const;
    /// The window [x0, x0+w) × [y0, y0+h). Throws InvalidInput when it leaves the cube.
    Cube crop(int x0, int y0, int w, int h) const;

private:
    friend class CubeInLayout;
    void check_type(DType t) const;
    CubeShape shape_;
    HostBuffer buffer_;
    Metadata metadata_;
};

/// A cube resident on a CUDA device (samples in a DeviceBuffer).
class DeviceCube {
public:
    DeviceCube() = default;
    /// Allocates an uninitialised device cube on the context's device.
    DeviceCube(const Context& ctx, const CubeShape& shape);
    /// Uploads a host cube, keeping its type and layout; waits for the copy.
    static DeviceCube upload(const Context& ctx, const Cube& cube);
    /// A dense device copy of any view (host or device, any strides) in `layout`, on the context's
    /// device; waits for the copy.
    static DeviceCube from_view(const Context& ctx, const CubeView& view, Layout layout);
    /// A cube over a caller's dense device memory (no copy, nothing freed). Throws InvalidInput
    /// when the view is in host memory or not dense in any layout.
    static DeviceCube borrow(const MutableCubeView& view);
    static DeviceCube borrow_const(const CubeView& view);
    bool borrowed() const { return buffer_.borrowed(); }
    /// Downloads into a new host cube.
    Cube download(const Context& ctx) const;

    CubeView view() const;
    MutableCubeView mutable_view();
    operator CubeView() const { return view(); }
    operator MutableCubeView() { return mutable_view(); }

    const CubeShape& shape() const { return shape_; }
    void* data() { return buffer_.data(); }
    const void* data() const { return buffer_.data(); }
    DeviceBuffer& buffer() { return buffer_; }

private:
    friend class CubeInLayout;
    CubeShape shape_;
    DeviceBuffer buffer_;
};

/// The shape of a view: its layout is the one it is dense in, else the nearest (describe() tells).
CubeShape shape_of(const CubeView& view);

/// Copies every sample of `src` into `dst`: same width, height, bands and element type; any
/// strides; host or device on either side (device memory on ctx's device). Copies that touch a
/// device run on ctx's stream and are complete on return. Throws InvalidInput on a mismatch.
void copy_cube(const Context& ctx, const CubeView& src, const MutableCubeView& dst);

/// What a backend asks of its input: dense in one layout, in host or device memory.
/// Holds `input` itself when it already is so (no copy), else an owned converted copy; the
/// view, host() and device() stay valid as long as this object and the input do.
///
///     const CubeInLayout in(ctx, view, Layout::BSQ, ctx.is_cuda() ? Memory::Device : Memory::Host);
///     detail::rcmg_cpu(ctx, in.host(), out, options);     // in.copied(): was a copy needed?
class CubeInLayout {
public:
    CubeInLayout(const Context& ctx, const CubeView& input, Layout layout, Memory memory);
    const CubeView& view() const { return view_; }
    /// True when the input had to be converted or moved.
    bool copied() const { return copied_; }
    /// The dense host cube (memory = Host): borrowed from the input or owned.
    const Cube& host() const { return host_; }
    /// The dense device cube (memory = Device).
    const DeviceCube& device() const { return device_; }
    const CubeShape& shape() const;

private:
    Cube host_;
    DeviceCube device_;
    CubeView view_;
    bool copied_ = false;
};

/// Parses a band list: 0-based, comma-separated, inclusive ranges ("0-9,20"). Throws
/// InvalidInput naming `what` (e.g. "bands") and the bad token, a band ≥ num_bands, or a list longer
/// than num_bands (bands may repeat, up to that length).
std::vector<int> parse_band_list(std::string_view text, int num_bands, std::string_view what = "bands");

}  // namespace cubekit
