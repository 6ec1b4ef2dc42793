// CubeFile (io.hpp): a cube file read by windows. Raw formats (ENVI, C-order .npy) read only the
// window's runs of contiguous samples, several at once; GDAL rasters (GeoTIFF) by GDAL's windows;
// others are read whole when opened.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <optional>

#include "core/cuda_backend.hpp"
#include "io/io_internal.hpp"

namespace cubekit {

using namespace io_detail;

namespace {

constexpr std::string_view kFn = "read_window";

// One positioned read: `bytes` at `offset` of the file into `dst`.
struct Run {
    std::uint64_t offset;
    std::byte* dst;
    std::size_t bytes;
};

// pread until done; returns 0, or the errno, or -1 when the file ended first. Never throws (it runs
// inside an OpenMP loop).
int read_fully(int fd, const Run& r) noexcept {
    std::size_t done = 0;
    while (done < r.bytes) {
        const ssize_t n = ::pread(fd, r.dst + done, std::min<std::size_t>(r.bytes - done, std::size_t(1) << 30),
                                  off_t(r.offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return errno;
        if (n == 0) return -1;
        done += std::size_t(n);
    }
    return 0;
}

// Runs larger than this are split so that one big window is still read by several threads.
constexpr std::size_t kPiece = std::size_t(1) << 20;

}  // namespace

struct CubeFile::State {
    CubeShape shape;
    Metadata metadata;
    // Windowed: the raw description and an open descriptor. Else: the whole cube.
    std::optional<RawCube> raw;
    int fd = -1;
    std::unique_ptr<GdalWindows> gdal;  // GeoTIFF and other GDAL rasters: windows through GDAL
    Cube whole;

    ~State() {
        if (fd >= 0) ::close(fd);
    }

    // The runs of a window of a raw file, read into `dst` dense in the file's layout.
    std::vector<Run> runs(int x0, int y0, int w, int h, std::byte* dst) const {
        const std::size_t e = dtype_size(shape.dtype);
        const std::uint64_t W = std::uint64_t(shape.width), H = std::uint64_t(shape.height), B = std::uint64_t(shape.bands);
        const bool full = x0 == 0 && std::uint64_t(w) == W;
        std::vector<Run> out;
        const auto add = [&](std::uint64_t element, std::size_t count) {
            const std::size_t bytes = count * e;
            for (std::size_t at = 0; at < bytes; at += kPiece) {
                out.push_back({raw->offset + element * e + at, dst, std::min(kPiece, bytes - at)});
                dst += std::min(kPiece, bytes - at);
            }
        };
        switch (shape.layout) {
            case Layout::BSQ:  // [b][y][x]: a band's rows of a full-width window are one run
                for (std::uint64_t b = 0; b < B; ++b) {
                    if (full) add((b * H + std::uint64_t(y0)) * W, std::size_t(w) * std::size_t(h));
                    else
                        for (int y = y0; y < y0 + h; ++y) add((b * H + std::uint64_t(y)) * W + std::uint64_t(x0), std::size_t(w));
                }
                break;
            case Layout::BIL:  // [y][b][x]: the rows of a full-width window, all bands, are one run
                if (full) add(std::uint64_t(y0) * B * W, std::size_t(h) * std::size_t(B) * std::size_t(w));
                else
                    for (int y = y0; y < y0 + h; ++y)
                        for (std::uint64_t b = 0; b < B; ++b) add((std::uint64_t(y) * B + b) * W + std::uint64_t(x0), std::size_t(w));
                break;
            case Layout::BIP:  // [y][x][b]
                if (full) add(std::uint64_t(y0) * W * B, std::size_t(h) * std::size_t(w) * std::size_t(B));
                else
                    for (int y = y0; y < y0 + h; ++y) add((std::uint64_t(y) * W + std::uint64_t(x0)) * B, std::size_t(w) * std::size_t(B));
                break;
        }
        return out;
    }

    // The runs of bands [b0, b0+n) of a BSQ or BIL raw file, read into `dst` dense in the file's layout.
    std::vector<Run> band_runs(int b0, int n, std::byte* dst) const {
        const std::size_t e = dtype_size(shape.dtype);
        const std::uint64_t W = std::uint64_t(shape.width), H = std::uint64_t(shape.height), B = std::uint64_t(shape.bands);
        std::vector<Run> out;
        const auto add = [&](std::uint64_t element, std::uint64_t count) {
            const std::uint64_t bytes = count * e;
            for (std::uint64_t at = 0; at < bytes; at += kPiece) {
                const std::size_t piece = std::size_t(std::min<std::uint64_t>(kPiece, bytes - at));
                out.push_back({raw->offset + element * e + at, dst, piece});
                dst += piece;
            }
        };
        if (shape.layout == Layout::BSQ)  // [b][y][x]: the n bands are one run
            add(std::uint64_t(b0) * H * W, std::uint64_t(n) * H * W);
        else  // BIL, [y][b][x]: each row's n bands are one run
            for (std::uint64_t y = 0; y < H; ++y) add((y * B + std::uint64_t(b0)) * W, std::uint64_t(n) * W);
        return out;
    }

    // Reads the runs into place (several threads); throws naming the file.
    void read_runs(const std::vector<Run>& runs) const {
        std::atomic<int> failure{0};
        const std::int64_t n = std::int64_t(runs.size());
#pragma omp parallel for schedule(dynamic, 4) if (n > 4)
        for (std::int64_t i = 0; i < n; ++i) {
            if (failure.load(std::memory_order_relaxed) != 0) continue;
            const int err = read_fully(fd, runs[std::size_t(i)]);
            if (err != 0) failure.store(err);
        }
        if (const int err = failure.load(); err > 0) throw_os_error(kFn, raw->data, "cannot read", err);
        else if (err < 0) throw_invalid(kFn, raw->data, "truncated: the file ended inside the window (it shrank after it was opened?)");
    }

    // Reads the window into `dst`, dense in the file's layout.
    void read_dense(int x0, int y0, int w, int h, std::byte* dst) const {
        read_runs(runs(x0, y0, w, h, dst));
        if (raw->swap) byteswap_inplace(dst, std::size_t(w) * std::size_t(h) * std::size_t(shape.bands), dtype_size(shape.dtype));
    }
};

CubeFile::CubeFile(const std::filesystem::path& path, const ReadOptions& options) : state_(std::make_unique<State>()) {
    const FileFormat format = options.format == FileFormat::Auto ? detect_format(path) : options.format;
    std::optional<RawCube> raw;
    if (format == FileFormat::Envi) {
        raw = describe_envi(path);
        if (raw->gzip) raw.reset();  // compressed: no positions to read windows at; read whole
    }
    if (format == FileFormat::Npy) {
        raw = describe_npy(path);
        if (raw->fortran) raw.reset();  // columns contiguous: no layout to read rows of; read whole
    }
    if (format == FileFormat::Gdal) {
        state_->gdal = std::make_unique<GdalWindows>(path);
        state_->shape = state_->gdal->shape();
        state_->metadata = state_->gdal->metadata();
        return;
    }
    if (raw) {
        state_->fd = ::open(raw->data.c_str(), O_RDONLY | O_CLOEXEC);
        if (state_->fd < 0) throw_os_error("CubeFile", raw->data, "cannot open", errno);
        state_->shape = raw->shape;
        state_->metadata = raw->metadata;
        state_->raw = std::move(raw);
        return;
    }
    state_->whole = read_cube(path, options);
    state_->shape = state_->whole.shape();
    state_->metadata = state_->whole.metadata();
}

CubeFile::~CubeFile() = default;
CubeFile::CubeFile(CubeFile&&) noexcept = default;
CubeFile& CubeFile::operator=(CubeFile&&) noexcept = default;

const CubeShape& CubeFile::shape() const { return state_->shape; }
const Metadata& CubeFile::metadata() const { return state_->metadata; }
bool CubeFile::windowed() const { return state_->raw.has_value() || state_->gdal; }

void CubeFile::read_window(int x0, int y0, int w, int h, const MutableCubeView& dst) const {
    const CubeShape& s = state_->shape;
    if (x0 < 0 || y0 < 0 || w < 1 || h < 1 || x0 + std::int64_t(w) > s.width || y0 + std::int64_t(h) > s.height)
        throw InvalidInput("read_window: window " + std::to_string(w) + "x" + std::to_string(h) + " at (" + std::to_string(x0) +
                           ", " + std::to_string(y0) + ") leaves the " + std::to_string(s.width) + "x" +
                           std::to_string(s.height) + " cube");
    if (dst.on_device() || dst.width() != w || dst.height() != h || dst.bands() != s.bands || dst.dtype() != s.dtype)
        throw InvalidInput("read_window: destination " + dst.describe() + "; expected " + std::to_string(w) + "x" +
                           std::to_string(h) + "x" + std::to_string(s.bands) + " " + std::string(dtype_name(s.dtype)) +
                           " in host memory");
    if (state_->gdal) {
        if (dst.is_dense(Layout::BSQ)) return state_->gdal->read(x0, y0, w, h, dst.data());
        Cube bounce = Cube::uninitialized(w, h, s.bands, s.dtype, Layout::BSQ);
        state_->gdal->read(x0, y0, w, h, bounce.bytes());
        detail::copy_cube_host(bounce.view(), dst);
        return;
    }
    if (!state_->raw) {
        detail::copy_cube_host(state_->whole.view().window(x0, y0, w, h), dst);
        return;
    }
    if (dst.is_dense(s.layout)) {
        state_->read_dense(x0, y0, w, h, dst.data());
        return;
    }
    Cube bounce = Cube::uninitialized(w, h, s.bands, s.dtype, s.layout);
    state_->read_dense(x0, y0, w, h, bounce.bytes());
    detail::copy_cube_host(bounce.view(), dst);
}

void CubeFile::read_bands(int b0, int n, const MutableCubeView& dst) const {
    const CubeShape& s = state_->shape;
    if (b0 < 0 || n < 1 || b0 + std::int64_t(n) > s.bands)
        throw InvalidInput("read_bands: bands " + std::to_string(b0) + ".." + std::to_string(std::int64_t(b0) + n - 1) +
                           " leave the cube's " + std::to_string(s.bands));
    if (dst.on_device() || dst.width() != s.width || dst.height() != s.height || dst.bands() != n || dst.dtype() != s.dtype)
        throw InvalidInput("read_bands: destination " + dst.describe() + "; expected " + std::to_string(s.width) + "x" +
                           std::to_string(s.height) + "x" + std::to_string(n) + " " + std::string(dtype_name(s.dtype)) +
                           " in host memory");
    if (!state_->raw && !state_->gdal) {
        detail::copy_cube_host(state_->whole.view().band_range(b0, n), dst);
        return;
    }
    if (state_->raw && s.layout != Layout::BIP) {  // runs of whole bands (BSQ) or of each row's bands (BIL)
        const bool direct = dst.is_dense(s.layout);
        Cube bounce = direct ? Cube() : Cube::uninitialized(s.width, s.height, n, s.dtype, s.layout);
        std::byte* into = direct ? dst.data() : bounce.bytes();
        state_->read_runs(state_->band_runs(b0, n, into));
        if (state_->raw->swap) byteswap_inplace(into, std::size_t(s.width) * std::size_t(s.height) * std::size_t(n), dtype_size(s.dtype));
        if (!direct) detail::copy_cube_host(bounce.view(), dst);
        return;
    }
    // BIP or GDAL: blocks of whole rows (every band), the bands taken from each.
    const std::size_t row_bytes = std::size_t(s.width) * std::size_t(s.bands) * dtype_size(s.dtype);
    const int rows = int(std::clamp<std::size_t>((std::size_t(16) << 20) / std::max<std::size_t>(row_bytes, 1), 1, std::size_t(s.height)));
    Cube block = Cube::uninitialized(s.width, rows, s.bands, s.dtype, s.layout);
    for (int y = 0; y < s.height; y += rows) {
        const int h = std::min(rows, s.height - y);
        const MutableCubeView part = block.mutable_view().window(0, 0, s.width, h);
        read_window(0, y, s.width, h, part);
        detail::copy_cube_host(CubeView(part).band_range(b0, n), dst.window(0, y, s.width, h));
    }
}

}  // namespace cubekit
