#pragma once
/// Private helpers of the I/O module (src/io/*.cpp): error formatting, whole-file and ranged
/// reads, byte swapping, the atomic output file, and the per-format entry points that io.cpp
/// dispatches to. Not installed; nothing here is part of the public API.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cubekit/cube.hpp"
#include "cubekit/error.hpp"
#include "cubekit/io.hpp"

namespace cubekit::io_detail {

namespace fs = std::filesystem;

// ---- errors -------------------------------------------------------------------------------------

/// IoError "fn: path: action: strerror(err)", e.g. "read_envi: x.img: cannot open: No such file...".
[[noreturn]] void throw_os_error(std::string_view fn, const fs::path& path, std::string_view action,
                                 int err);
/// InvalidInput "fn: path: what".
[[noreturn]] void throw_invalid(std::string_view fn, const fs::path& path, std::string_view what);

// ---- small text helpers -------------------------------------------------------------------------

std::string to_lower(std::string_view s);
std::string_view trim(std::string_view s);
/// Lower-cased extension with the dot (".img"), or "" when there is none.
std::string lower_extension(const fs::path& p);
/// Shortest text that reads back as the same double ("400.938721", "1e-05").
std::string format_double(double v);

// ---- input files --------------------------------------------------------------------------------

/// A file opened for reading (POSIX descriptor, closed on destruction). Every failure is an
/// IoError naming `fn` and the path; a short read (the file shrank or is shorter than asked) is an
/// InvalidInput "truncated".
class InputFile {
public:
    InputFile(std::string_view fn, fs::path path);
    ~InputFile();
    InputFile(const InputFile&) = delete;
    InputFile& operator=(const InputFile&) = delete;

    std::uint64_t size() const { return size_; }
    const fs::path& path() const { return path_; }
    /// Reads exactly n bytes at offset; throws InvalidInput when the file ends first.
    void read_at(std::uint64_t offset, void* dst, std::size_t n) const;
    /// Reads up to n bytes at offset; returns how many were read (fewer only at end of file).
    std::size_t read_some_at(std::uint64_t offset, void* dst, std::size_t n) const;
    /// The whole file.
    std::string read_all() const;

private:
    std::string fn_;
    fs::path path_;
    int fd_ = -1;
    std::uint64_t size_ = 0;
};

// ---- byte order ---------------------------------------------------------------------------------

/// Reverses the bytes of each of `count` elements of `elem_size` bytes (1 = nothing to do).
void byteswap_inplace(void* data, std::size_t count, std::size_t elem_size);
/// True when the host stores multi-byte numbers least significant byte first.
bool host_is_little_endian();

// ---- atomic output ------------------------------------------------------------------------------

/// An output file written to a temporary in the target folder (".<name>.tmp-XXXXXX") and renamed
/// over the target by commit(). If it is destroyed before commit() (an exception, a write error),
/// the temporary is removed, so a failed write leaves neither output nor temporary. All OS
/// failures (ENOENT, EACCES, ENOTDIR, ENOSPC, EFBIG...) throw IoError naming `fn`, the *target*
/// path and strerror(errno). Writes are buffered; no fsync (not required by the contract).
class AtomicFile {
public:
    AtomicFile(std::string_view fn, fs::path target);
    ~AtomicFile();
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;

    void write(const void* data, std::size_t n);
    void write(std::string_view s) { write(s.data(), s.size()); }
    /// Writes the samples of `cube` in its own layout, little-endian.
    void write_cube_le(const Cube& cube);
    /// Writes what is buffered, gives the temporary `size` bytes (reserved on disk) and maps all of them
    /// into memory, writable: the caller fills the file through the pointer (any thread), after the
    /// bytes written before. Valid until destruction (after close() and commit() too: it then shows the
    /// file in place). Throws IoError when the disk cannot hold `size`.
    std::byte* map(std::uint64_t size);
    /// Flushes and closes the temporary (idempotent). Throws IoError on a flush/close failure.
    void close();
    /// close(), then renames the temporary over the target.
    void commit();
    const fs::path& target() const { return target_; }
    const fs::path& temp_path() const { return temp_; }

private:
    void flush();
    void write_all(const char* p, std::size_t n);
    std::string fn_;
    fs::path target_;
    fs::path temp_;
    int fd_ = -1;
    bool committed_ = false;
    std::byte* map_ = nullptr;
    std::size_t map_size_ = 0;
    std::vector<char> buf_;
    std::size_t used_ = 0;
};

// ---- per-format entry points --------------------------------------------------------------------

/// The ENVI header beside a data file: X.hdr (extension replaced) or X.img.hdr (appended); empty
/// when neither exists. A path that is itself a .hdr returns itself.
fs::path find_envi_header(const fs::path& data_path);

/// A cube stored as raw samples in a file (ENVI data, .npy): where they are and how they are laid out.
struct RawCube {
    fs::path data;              ///< the file holding the samples
    std::uint64_t offset = 0;   ///< byte offset of sample (0, 0, 0)
    CubeShape shape;            ///< layout = the file's nesting (BSQ, BIL or BIP)
    bool fortran = false;       ///< .npy in Fortran order (element (h, w, b) at h + H (w + W b)): no layout
    bool swap = false;          ///< the file's byte order is not the host's
    bool gzip = false;          ///< ENVI 'file compression = 1': gzip data, read whole (no windows)
    Metadata metadata;
};
/// The description of an ENVI cube (header checked, data file size checked) without reading it.
RawCube describe_envi(const fs::path& path);
/// The description of a .npy file (header checked, data size checked) without reading it.
RawCube describe_npy(const fs::path& path);
Cube read_envi(const fs::path& path);
void write_envi(const Cube& cube, const fs::path& path, const WriteOptions& options);
Cube read_npy(const fs::path& path);
void write_npy(const Cube& cube, const fs::path& path);
/// The bytes of a .npy file before its samples (magic, version, the padded dictionary: the data start
/// on a 64-byte boundary), for a C-order (H, W) or (H, W, B) array of shape.dtype. InvalidInput naming
/// `path` when the shape is empty.
std::string npy_header(const CubeShape& shape, const fs::path& path);
/// The data file and the header file an ENVI output `path` (either of them named) is written as.
std::pair<fs::path, fs::path> envi_output_paths(const fs::path& path);
/// The text of an ENVI header for samples of `shape` in `layout`, little-endian, with `meta`'s
/// wavelengths, band names, map info and extra keys. InvalidInput naming `path` when the shape is
/// empty or the metadata's lists do not have one entry per band.
std::string envi_header(const CubeShape& shape, Layout layout, const Metadata& meta, const fs::path& path);
/// Renames an ENVI pair into place, data first, so a reader never finds a new header beside old data;
/// when the header's rename fails, the data just renamed is removed again.
void commit_envi_pair(AtomicFile& data_file, AtomicFile& header_file);
Cube read_mat(const fs::path& path, const std::string& var);
std::vector<std::string> list_mat(const fs::path& path);
Cube read_png(const fs::path& path);
void write_png(const Cube& cube, const fs::path& path, PngCompression compression);
Cube read_pnm(const fs::path& path);
void write_pnm(const Cube& cube, const fs::path& path);
Cube read_jpeg(const fs::path& path);
Cube read_gdal(const fs::path& path);
/// Writes a GeoTIFF through the GDAL plugin (BSQ planes, the georeference of the metadata), atomically.
void write_gdal(const Cube& cube, const fs::path& path);
/// A GeoTIFF of shape's samples, planes in order (BSQ) at `bsq`, georeferenced by meta (its
/// geotransform and coordinate system), written atomically.
void write_gdal_planes(const std::byte* bsq, const CubeShape& shape, const Metadata& meta, const fs::path& path);
/// A raster read by windows through GDAL (BSQ: band by band); thread-safe (a GDAL handle per thread).
class GdalWindows {
public:
    explicit GdalWindows(const fs::path& path);  ///< throws as read_gdal
    ~GdalWindows();
    const CubeShape& shape() const { return shape_; }
    const Metadata& metadata() const { return metadata_; }
    /// The window of every band into `dst`, dense BSQ (w × h × bands).
    void read(int x0, int y0, int w, int h, std::byte* dst) const;

private:
    struct Pool;
    CubeShape shape_;
    Metadata metadata_;
    std::unique_ptr<Pool> pool_;
};
/// With GDAL: whether a GDAL driver recognises the file. Without: false.
bool gdal_identifies(const fs::path& path);

/// Throws InvalidInput naming `fn`, the path, what was given and what is accepted unless the cube
/// is a non-empty u8/u16 image with an allowed band count for an image writer.
void check_image(std::string_view fn, const fs::path& path, const Cube& cube, int min_bands, int max_bands,
                 std::string_view accepted_bands);
/// check_image, then the cube as BIP (a copy).
Cube image_as_bip(std::string_view fn, const fs::path& path, const Cube& cube, int min_bands,
                  int max_bands, std::string_view accepted_bands);

}  // namespace cubekit::io_detail
