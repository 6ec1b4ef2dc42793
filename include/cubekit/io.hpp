#pragma once
/// Reading and writing cubes and images.
///
///     Cube scene = cubekit::read_cube("data/samson/samson_1.img");      // ENVI, format from content
///     Cube mat   = cubekit::read_cube("scene.mat", {.var = "data"});    // MATLAB R×C×B → H=R, W=C
///     cubekit::write_cube(gradient, "out/gradient.npy");                 // (H, W) f32, atomically
///
/// Formats: ENVI (.hdr + raw; data types 1, 2, 3, 4, 5, 12, 13; bsq/bil/bip; both byte orders),
/// NumPy .npy (C and Fortran order; 2-D = (H, W), 3-D = (H, W, B)), MATLAB .mat (read; v5
/// compressed or not, v7.3), PNG (8/16 bit, gray/gray+alpha/RGB/RGBA; palette files are read as
/// RGB/RGBA and written by write_indexed_png), PGM/PPM (8/16 bit), JPEG (read), and through GDAL
/// when built with it (GeoTIFF, ERDAS .lan, ...).
/// Errors: IoError when the operating system refuses (missing file, permission, disk full);
/// InvalidInput when the content is wrong (bad header, truncated data, unsupported type).
/// Both name the file and the reason.
#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cubekit/cube.hpp"

namespace cubekit {

enum class FileFormat { Auto, Envi, Npy, Mat, Png, Pnm, Jpeg, Gdal };

/// Names "auto", "envi", "npy", "mat", "png", "pnm", "jpeg", "gdal" ("jpg" too; case and blanks ignored).
template <>
struct EnumNames<FileFormat> {
    static constexpr EnumName<FileFormat> names[] = {
        {FileFormat::Auto, "auto"}, {FileFormat::Envi, "envi"}, {FileFormat::Npy, "npy"},   {FileFormat::Mat, "mat"},
        {FileFormat::Png, "png"},   {FileFormat::Pnm, "pnm"},   {FileFormat::Jpeg, "jpeg"}, {FileFormat::Gdal, "gdal"}};
    static constexpr EnumName<FileFormat> aliases[] = {{FileFormat::Jpeg, "jpg"}};
    static constexpr bool case_insensitive = true;
};
inline std::string_view format_name(FileFormat f) { return enum_name(f); }
/// parse_enum<FileFormat> with this module's message: "parse_format: <what> = 'x'; expected one of auto, envi, ...".
FileFormat parse_format(std::string_view name, std::string_view what = "format");

/// Format of an existing file, from its first bytes (magic numbers) and then its extension.
/// An ENVI data file is recognised by its header X.hdr or X.img.hdr next to it; a path to the
/// .hdr itself also means ENVI. Throws IoError if the file cannot be opened, InvalidInput if
/// nothing matches.
FileFormat detect_format(const std::filesystem::path& path);

/// Format an output path asks for, from its extension (.hdr/.img/.dat/.raw/.bsq/.bil/.bip → ENVI,
/// .npy, .png, .pgm/.ppm/.pnm, and .tif/.tiff → GeoTIFF through GDAL when it is available, with the
/// metadata's coordinate system and geotransform). Throws InvalidInput naming the path when unknown
/// or read-only (.mat, .jpg; .tif without GDAL).
FileFormat output_format(const std::filesystem::path& path);

struct ReadOptions {
    /// MATLAB variable to read; empty = the only 3-D numeric array, else the only 2-D one.
    std::string var;
    /// Forces a format instead of detecting it.
    FileFormat format = FileFormat::Auto;
};

/// The declarations of ReadOptions' fields (options.hpp); the format is set by each front end from
/// its own arguments.
template <class O, class V>
    requires std::same_as<std::remove_const_t<O>, ReadOptions>
void visit_fields(O& o, V&& visit) {
    visit(o.var, Field{.name = "var", .doc = "MATLAB variable to read (default: the only 3-D array)"});
}

/// Reads any supported file into a host cube (its stored element type and layout; images are BIP
/// with bands = channels, .npy arrives as BIP (H, W, B), .mat as BSQ).
Cube read_cube(const std::filesystem::path& path, const ReadOptions& options = {});

/// A cube file read by windows, so that a scene larger than memory never has to fit (issue 17):
/// ENVI (any interleave and byte order) and C-order .npy are read with positioned reads of the
/// window's rows only, GDAL rasters (GeoTIFF, ...) with GDAL's windowed reads (BSQ, a GDAL handle per
/// thread); every other format (compressed .mat, PNG, JPEG, Fortran-order .npy) is read whole when
/// opened and its windows are copied from memory (windowed() tells which).
///
///     cubekit::CubeFile f("flight_line.hdr");                    // reads the header only
///     cubekit::Cube w = cubekit::Cube::uninitialized(512, 64, f.shape().bands, f.shape().dtype, f.shape().layout);
///     f.read_window(0, 1024, 512, 64, w.mutable_view());       // rows 1024..1087, columns 0..511
class CubeFile {
public:
    /// Opens `path` (format from content, as read_cube; `options.var` for MATLAB files). Throws as read_cube.
    explicit CubeFile(const std::filesystem::path& path, const ReadOptions& options = {});
    ~CubeFile();
    CubeFile(CubeFile&&) noexcept;
    CubeFile& operator=(CubeFile&&) noexcept;
    CubeFile(const CubeFile&) = delete;
    CubeFile& operator=(const CubeFile&) = delete;
    /// Size, element type and the file's layout (the nesting a window is read fastest in).
    const CubeShape& shape() const;
    const Metadata& metadata() const;
    /// True when windows are read from the file; false when the cube was read whole on opening.
    bool windowed() const;
    /// Copies the window [x0, x0+w) × [y0, y0+h), all bands, into `dst` (host memory, w × h × bands of
    /// shape().dtype, any strides; fastest when dense in shape().layout), byte-swapped to the host's order.
    /// Safe to call from several threads at once. Throws InvalidInput naming the window when it leaves
    /// the cube or `dst` does not match, IoError (naming the file) when a read fails.
    void read_window(int x0, int y0, int w, int h, const MutableCubeView& dst) const;
    /// Copies bands [b0, b0+n), every pixel, into `dst` (host memory, width × height × n of shape().dtype,
    /// any strides; fastest when dense in shape().layout). A BSQ file reads each band's run, a BIL file
    /// each row's runs of those bands; a BIP file or a GDAL raster is read a block of rows at a time
    /// (every band of the rows, about 16 MiB of them held at once) and the bands taken from it. Safe to
    /// call from several threads at once. Throws as read_window.
    ///
    ///     cubekit::CubeFile f("flight_line.hdr");
    ///     cubekit::Cube bands = cubekit::Cube::uninitialized(W, H, 8, f.shape().dtype, f.shape().layout);
    ///     f.read_bands(40, 8, bands.mutable_view());
    void read_bands(int b0, int n, const MutableCubeView& dst) const;

private:
    struct State;
    std::unique_ptr<State> state_;
};

/// How hard PNG output is compressed. Fast (the default): zlib level 1 after the Sub filter (None
/// for palette images). Measured with libpng on the 2-core development machine, 2026-11-25: a
/// 3840×2160 photo in 307 ms and 12.3 MB where libpng's own settings took 4.7 s for 10.4 MB; the
/// same photo quantized to 16 colours in 72 ms and 1.1 MB against 261 ms and 0.73 MB. (zlib's
/// run-length strategy wrote the photo faster and smaller, 251 ms and 10.6 MB, but the quantized
/// image slower and larger, 82 ms and 1.4 MB.) Default: libpng's own (level 6, adaptive filters).
/// Small: level 9, adaptive filters.
enum class PngCompression { Fast, Default, Small };
template <>
struct EnumNames<PngCompression> {
    static constexpr EnumName<PngCompression> names[] = {
        {PngCompression::Fast, "fast"}, {PngCompression::Default, "default"}, {PngCompression::Small, "small"}};
};

struct WriteOptions {
    FileFormat format = FileFormat::Auto;  ///< Auto: from the extension
    /// ENVI interleave to write; the cube's own layout when unset (written as given otherwise).
    bool envi_keep_layout = true;
    Layout envi_layout = Layout::BSQ;
    /// PNG output: speed against size (PngCompression).
    PngCompression png_compression = PngCompression::Fast;
};

/// The declarations of WriteOptions' fields (options.hpp); format and the ENVI interleave are set
/// by each front end from its own arguments.
template <class O, class V>
    requires std::same_as<std::remove_const_t<O>, WriteOptions>
void visit_fields(O& o, V&& visit) {
    visit(o.png_compression, Field{.name = "png_compression",
                                   .doc = "PNG outputs: fast (default), default (libpng's level 6) or small (level 9)"});
}

/// Writes a cube. The file is written to a temporary file in the target folder and renamed when
/// complete; on failure nothing is left (neither output nor temporary). ENVI writes X.hdr beside
/// the data file (and the data to X.img when the path given is X.hdr). .npy: (H, W) for one band,
/// else (H, W, B), little-endian, C order. PNG/PNM accept u8 and u16 cubes of 1, 2 (PNG), 3 or 4
/// (PNG) bands; other types throw InvalidInput (convert with to_display_u8 first).
void write_cube(const Cube& cube, const std::filesystem::path& path, const WriteOptions& options = {});

/// An output cube written where it will lie: a temporary file in the output's folder, given its full
/// size on disk and mapped into memory, so that a tiled run fills it tile by tile (any thread, any
/// window) and the result never has to fit in memory (the kernel writes the pages back as they fill).
/// commit() renames it onto `path` (ENVI: the data file, then the header); a writer destroyed without
/// commit() removes its temporaries, so a failed run leaves nothing. Formats: .npy (C order: (H, W) or
/// (H, W, B), i.e. BIP) and ENVI (the interleave of `options`: shape.layout unless envi_keep_layout is
/// off); streamable() tells whether a path is one of them. Throws IoError (naming the path) when the
/// folder is not writable or the disk cannot hold the file, InvalidInput for an empty shape or a
/// format that cannot be streamed.
///
///     cubekit::CubeFileWriter out("gradient.npy", {.width = W, .height = H, .bands = 1, .dtype = cubekit::DType::F32});
///     cubekit::rcmg_tiled(gpu, cubekit::CubeFile("flight.hdr"), out.view(), {}, {.memory_limit = 1ull << 30});
///     out.commit();
class CubeFileWriter {
public:
    CubeFileWriter(const std::filesystem::path& path, const CubeShape& shape, const Metadata& metadata,
                   const WriteOptions& options);
    CubeFileWriter(const std::filesystem::path& path, const CubeShape& shape, const Metadata& metadata = {});
    ~CubeFileWriter();
    CubeFileWriter(CubeFileWriter&&) noexcept;
    CubeFileWriter& operator=(CubeFileWriter&&) noexcept;
    CubeFileWriter(const CubeFileWriter&) = delete;
    CubeFileWriter& operator=(const CubeFileWriter&) = delete;
    /// True when `path` names a format written in place (.npy, ENVI) and the host stores numbers
    /// little-endian (the files' order; a big-endian host writes whole cubes with write_cube).
    static bool streamable(const std::filesystem::path& path, const WriteOptions& options);
    static bool streamable(const std::filesystem::path& path);
    /// The samples, host memory in the file's layout (the shape given, its layout as written). Valid
    /// until destruction; after commit() it reads (and would write) the file in place.
    const MutableCubeView& view() const;
    /// The shape as written (layout: the file's).
    const CubeShape& shape() const;
    /// Puts the file in place. Throws IoError when a rename fails (nothing is left then).
    void commit();

private:
    struct State;
    std::unique_ptr<State> state_;
};

/// Writes `text` to `path` atomically, like write_cube: a temporary in the target folder renamed
/// over the target when complete; on failure neither is left. Throws IoError naming the path.
void write_text_file(const std::filesystem::path& path, std::string_view text);

/// Removes the temporary file of every write in progress in this process, and makes every later
/// commit of a write fail (IoError) instead of renaming its temporary into place: for a front end
/// that must exit at once (the CLI on SIGINT/SIGTERM after its grace period). Never throws.
void abandon_unfinished_writes() noexcept;

/// Names and shapes of the numeric variables of a .mat file ("data: 100x100x224 int16").
std::vector<std::string> list_mat_variables(const std::filesystem::path& path);

/// True when the library was built with GDAL.
bool gdal_available();

/// Writes an indexed-colour PNG (colour type 3) atomically, like write_cube: `indices` holds the
/// width × height palette indices in raster order, `palette` 1 to 256 RGB entries (the PLTE
/// chunk), `alpha` optional per-entry opacities (a tRNS chunk; entries beyond its size are opaque).
/// The bit depth is the smallest of 1, 2, 4, 8 that holds the palette. read_cube expands such a
/// file to RGB (RGBA when it has alpha). Throws InvalidInput naming the path for an empty image,
/// an empty or oversized palette, an index outside the palette or sizes that do not match.
void write_indexed_png(const std::filesystem::path& path, int width, int height,
                       const std::vector<std::uint8_t>& indices,
                       const std::vector<std::array<std::uint8_t, 3>>& palette,
                       const std::vector<std::uint8_t>& alpha = {},
                       PngCompression compression = PngCompression::Fast);

/// A one-band image scaled to u8 for display: v ↦ round(255 · min(v, white) / white), where white
/// is the given white point, or when white ≤ 0 the largest finite sample (0, negatives and NaN map
/// to 0; no positive white point gives an all-zero image).
Cube to_display_u8(const Cube& one_band, double white = 0.0);

}  // namespace cubekit
