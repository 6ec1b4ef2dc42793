// Tiles with halos (tiles.hpp) and the tiled runner of the local families (tiled_local.hpp).
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/cuda_backend.hpp"
#include "core/tiled_local.hpp"
#include "cubekit/buffer.hpp"
#include "cubekit/error.hpp"

namespace cubekit {

std::vector<Tile> plan_tiles(int width, int height, int tile_width, int tile_height, int halo) {
    if (width < 1 || height < 1 || tile_width < 1 || tile_height < 1 || halo < 0)
        throw InvalidInput("plan_tiles: scene " + std::to_string(width) + "x" + std::to_string(height) + ", tiles " +
                           std::to_string(tile_width) + "x" + std::to_string(tile_height) + ", halo " +
                           std::to_string(halo) + "; expected sizes >= 1 and a halo >= 0");
    std::vector<Tile> tiles;
    for (int y0 = 0; y0 < height; y0 += tile_height)
        for (int x0 = 0; x0 < width; x0 += tile_width) {
            Tile t;
            t.x0 = x0, t.y0 = y0;
            t.width = std::min(tile_width, width - x0), t.height = std::min(tile_height, height - y0);
            t.read_x0 = std::max(0, x0 - halo), t.read_y0 = std::max(0, y0 - halo);
            t.read_width = std::min(width, x0 + t.width + halo) - t.read_x0;
            t.read_height = std::min(height, y0 + t.height + halo) - t.read_y0;
            tiles.push_back(t);
        }
    return tiles;
}

std::size_t parse_bytes(std::string_view text, std::string_view what) {
    const auto bad = [&] {
        return InvalidInput(std::string(what) + " = '" + std::string(text) +
                            "'; expected a byte count such as 1048576, 512K, 64M or 2G");
    };
    std::uint64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end == text.data()) throw bad();
    std::string_view suffix(end, std::size_t(text.data() + text.size() - end));
    int shift = 0;
    if (suffix.size() == 1) {
        switch (suffix[0]) {
            case 'k': case 'K': shift = 10; break;
            case 'm': case 'M': shift = 20; break;
            case 'g': case 'G': shift = 30; break;
            case 't': case 'T': shift = 40; break;
            default: throw bad();
        }
    } else if (!suffix.empty()) {
        throw bad();
    }
    if (value > (std::numeric_limits<std::uint64_t>::max() >> shift)) throw bad();
    return std::size_t(value << shift);
}

std::vector<int> parse_devices(std::string_view text, std::string_view what) {
    std::vector<int> devices;
    if (text == "all") {
        for (int d = 0; d < Context::cuda_device_count(); ++d) devices.push_back(d);
        if (devices.empty()) throw DeviceError(std::string(what) + " = all: no CUDA device is visible");
        return devices;
    }
    std::size_t pos = 0;
    while (pos <= text.size()) {
        const std::size_t comma = std::min(text.find(',', pos), text.size());
        const std::string_view token = text.substr(pos, comma - pos);
        int d = -1;
        const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), d);
        if (token.empty() || ec != std::errc() || end != token.data() + token.size() || d < 0)
            throw InvalidInput(std::string(what) + " = '" + std::string(text) +
                               "'; expected device indices such as 0,1 or 'all'");
        if (std::find(devices.begin(), devices.end(), d) != devices.end())
            throw InvalidInput(std::string(what) + " = '" + std::string(text) + "': device " + std::to_string(d) +
                               " is named twice");
        devices.push_back(d);
        pos = comma + 1;
    }
    return devices;
}

namespace detail {

namespace {

// Without a budget, a streamed CUDA run still cuts the scene so that copies and kernels overlap:
// 32 MiB of staging per worker is ~0.6 ms of the link. Measured on 2 H100s (bench/tiles_bench.cpp,
// 2 GB i16 cube, 3 lanes): 32 MiB tiles 52.1 ms on one GPU and 46.0 on two, 64 MiB 55.8 and 49.9,
// 155 MiB 63.0 and 52.1; 16 MiB 67.2 on one GPU (3 lanes) but 39.2 on two with 4 lanes.
constexpr std::size_t kStreamTileBytes = std::size_t(32) << 20;

std::string bytes_text(std::size_t b) { return std::to_string(b) + " bytes"; }

}  // namespace

std::pair<int, int> choose_tile_size(int width, int height, int halo, std::size_t host_bpp, std::size_t device_bpp,
                                     int workers, int lanes, std::size_t device_free, const TileOptions& options,
                                     std::string_view where) {
    if (options.tile_width > 0 || options.tile_height > 0)
        return {options.tile_width > 0 ? std::min(options.tile_width, width) : width,
                options.tile_height > 0 ? std::min(options.tile_height, height) : height};
    constexpr std::size_t kUnlimited = std::numeric_limits<std::size_t>::max();
    std::size_t pixels = kUnlimited;  // the most pixels one read window may hold
    std::string limit = "";
    if (options.memory_limit > 0) {
        pixels = options.memory_limit / std::size_t(std::max(workers, 1)) / std::max<std::size_t>(host_bpp, 1);
        limit = "the host budget (--memory-limit " + bytes_text(options.memory_limit) + ")";
    }
    if (device_bpp > 0) {
        const std::size_t budget = options.device_memory_limit > 0 ? options.device_memory_limit : device_free / 10 * 8;
        const std::size_t p = budget / std::size_t(std::max(lanes, 1)) / device_bpp;
        if (p < pixels) {
            pixels = p;
            limit = options.device_memory_limit > 0
                        ? "the device budget (--device-memory-limit " + bytes_text(options.device_memory_limit) + ")"
                        : "the device's free memory (" + bytes_text(device_free) + ")";
        }
        if (options.memory_limit == 0 && options.device_memory_limit == 0)
            pixels = std::min(pixels, kStreamTileBytes / std::max<std::size_t>(host_bpp, 1));
    }
    const std::size_t scene = std::size_t(width) * std::size_t(height);
    if (pixels >= scene) return {width, height};
    const std::size_t span = 1 + 2 * std::size_t(halo);  // rows (or columns) a one-pixel core reads at most
    if (pixels / std::size_t(width) >= span) {
        const std::size_t rows = pixels / std::size_t(width) - 2 * std::size_t(halo);
        return {width, int(std::min<std::size_t>(rows, std::size_t(height)))};
    }
    const std::size_t side = std::size_t(std::sqrt(double(pixels)));
    if (side < span)
        throw InvalidInput(std::string(where) + ": " + limit + " holds " + std::to_string(pixels) +
                           " pixels per tile, fewer than one pixel with its halo of " + std::to_string(halo) +
                           " needs (" + std::to_string(span * span) + " pixels of " +
                           std::to_string(std::max(host_bpp, device_bpp)) + " bytes); raise the budget");
    const int core = int(side - 2 * std::size_t(halo));
    return {std::min(core, width), std::min(core, height)};
}

namespace {

MutableCubeView dense_host(std::byte* data, int w, int h, int bands, DType type, Layout layout) {
    return MutableCubeView::host(data, w, h, bands, type, dense_strides(w, h, bands, layout));
}

void copy_core(const CubeView& tile_out, const Tile& t, const MutableCubeView& out) {
    copy_cube_host(tile_out.window(t.x0 - t.read_x0, t.y0 - t.read_y0, t.width, t.height),
                   out.window(t.x0, t.y0, t.width, t.height));
}

std::size_t max_read_pixels(const std::vector<Tile>& tiles) {
    std::size_t m = 0;
    for (const Tile& t : tiles) m = std::max(m, std::size_t(t.read_width) * std::size_t(t.read_height));
    return m;
}

// The tile sizes of the two runners (local_tile_size is the one a caller sees).
std::pair<int, int> cpu_tile_size(const TileSource& in, const LocalTileKernel& k, const TileOptions& options,
                                  std::string_view where) {
    const std::size_t out_bpp = std::size_t(k.out_bands) * dtype_size(k.out_dtype);
    const std::size_t in_bpp = in.in_memory() ? 0 : std::size_t(in.bands) * dtype_size(in.dtype);
    return choose_tile_size(in.width, in.height, k.halo, out_bpp + in_bpp + k.host_work_bytes_per_pixel, 0, 1, 1, 0,
                            options, where);
}

std::vector<int> cuda_devices(const Context& ctx, const TileOptions& options) {
    return options.devices.empty() ? std::vector<int>{ctx.device()} : options.devices;
}

std::pair<int, int> cuda_tile_size(const TileSource& in, const LocalTileKernel& k, const TileOptions& options,
                                   std::string_view where, const std::vector<int>& devices) {
    const int lanes = std::max(1, options.lanes);
    std::size_t device_free = std::numeric_limits<std::size_t>::max();
    for (int d : devices) device_free = std::min(device_free, device_free_bytes(d));
    const std::size_t in_bpp = std::size_t(in.bands) * dtype_size(in.dtype);
    const std::size_t out_bpp = std::size_t(k.out_bands) * dtype_size(k.out_dtype);
    return choose_tile_size(in.width, in.height, k.halo, in_bpp + out_bpp, in_bpp + out_bpp + k.device_work_bytes_per_pixel,
                            int(devices.size()) * lanes, lanes, device_free, options, where);
}

// The CPU backend reads a view in place; a file's windows are read into a buffer first.
TiledRun run_cpu(const Context& ctx, const TileSource& in, const MutableCubeView& out, const LocalTileKernel& k,
                 const TileOptions& options, std::string_view where) {
    const std::size_t out_bpp = std::size_t(k.out_bands) * dtype_size(k.out_dtype);
    const std::size_t in_bpp = in.in_memory() ? 0 : std::size_t(in.bands) * dtype_size(in.dtype);
    const std::size_t work_bpp = k.host_work_bytes_per_pixel;
    const auto [tw, th] = cpu_tile_size(in, k, options, where);
    const std::vector<Tile> tiles = plan_tiles(in.width, in.height, tw, th, k.halo);
    HostBuffer buffer(max_read_pixels(tiles) * out_bpp), window(max_read_pixels(tiles) * in_bpp);
    for (std::size_t i = 0; i < tiles.size(); ++i) {
        ctx.check_cancelled(where);
        const Tile& t = tiles[i];
        if (k.wanted && !k.wanted(t)) continue;
        const MutableCubeView tile_out = k.out_bands == 0 ? MutableCubeView{}
                                                          : dense_host(buffer.data(), t.read_width, t.read_height,
                                                                       k.out_bands, k.out_dtype, Layout::BSQ);
        if (in.in_memory()) {
            k(ctx, t, in.view->window(t.read_x0, t.read_y0, t.read_width, t.read_height), tile_out);
        } else {
            const MutableCubeView w = dense_host(window.data(), t.read_width, t.read_height, in.bands, in.dtype, in.layout);
            in.read(t.read_x0, t.read_y0, t.read_width, t.read_height, w);
            k(ctx, t, w, tile_out);
        }
        if (k.out_bands > 0) copy_core(tile_out, t, out);
        if (tiles.size() > 1) ctx.progress(i + 1, tiles.size());
    }
    return {.tiles = tiles.size(), .tile_width = tw, .tile_height = th,
            .peak_bytes = buffer.size() + window.size() + max_read_pixels(tiles) * work_bpp};
}

// Pinned staging buffers kept for the process: page-locking costs about as much as copying the bytes
// over the link (cudaMallocHost of 64 MiB takes milliseconds), so a second tiled call reuses the first
// one's buffers. Never freed (as the ring of staged_copy.cpp: static destructors run after the CUDA
// runtime's teardown); at most kPoolBytes are kept idle.
constexpr std::size_t kPoolBytes = std::size_t(4) << 30;

class PinnedPool {
public:
    static PinnedPool& get() {
        static PinnedPool* pool = new PinnedPool;  // leaked on purpose, see above
        return *pool;
    }
    std::unique_ptr<PinnedBuffer> take(std::size_t bytes) {
        {
            const std::lock_guard lock(mutex_);
            for (auto it = idle_.begin(); it != idle_.end(); ++it)
                if ((*it)->size() >= bytes) {
                    std::unique_ptr<PinnedBuffer> b = std::move(*it);
                    idle_.erase(it);
                    idle_bytes_ -= b->size();
                    return b;
                }
        }
        return std::make_unique<PinnedBuffer>(std::max<std::size_t>(bytes, 1));
    }
    void give(std::unique_ptr<PinnedBuffer> b) {
        const std::lock_guard lock(mutex_);
        if (idle_bytes_ + b->size() > kPoolBytes) return;  // freed here
        idle_bytes_ += b->size();
        idle_.push_back(std::move(b));
    }

private:
    std::mutex mutex_;
    std::vector<std::unique_ptr<PinnedBuffer>> idle_;
    std::size_t idle_bytes_ = 0;
};

// A pinned buffer from the pool, given back when it goes out of scope; freed instead when an exception
// unwinds (a copy may still be queued on it; cudaFreeHost waits for the device).
class Staging {
public:
    explicit Staging(std::size_t bytes) : buffer_(PinnedPool::get().take(bytes)), exceptions_(std::uncaught_exceptions()) {}
    ~Staging() {
        if (std::uncaught_exceptions() == exceptions_) PinnedPool::get().give(std::move(buffer_));
    }
    Staging(const Staging&) = delete;
    Staging& operator=(const Staging&) = delete;
    std::byte* data() { return buffer_->data(); }

private:
    std::unique_ptr<PinnedBuffer> buffer_;
    int exceptions_;
};

// What every CUDA worker shares: the plan, the counters, the first failure.
struct Shared {
    const Context& ctx;
    const TileSource& in;
    const MutableCubeView& out;
    const LocalTileKernel& k;
    const std::vector<Tile>& tiles;
    std::size_t max_pixels;
    int threads_per_worker;
    // Page-locked caller memory is moved by the copy engines straight from or into place (a pitched
    // copy of the window): no staging copy, whose host-memory traffic is what limits the streamed
    // path on a machine with several GPUs (bench/results, 2026-11-26).
    bool direct_in = false, direct_out = false;
    std::atomic<std::size_t> next{0}, done{0};
    std::atomic<bool> stop{false};
    std::mutex mutex;
    std::exception_ptr failure;
    std::vector<TransferTotals> transfers;
};

// One tile on a worker's device: window in → kernel → core out, staged through pinned buffers
// unless the caller's memory is page-locked.
struct Lane {
    const Context& ctx;
    int device;
    std::optional<Staging> pin_in, pin_out;
    DeviceBuffer dev_in, dev_out;

    void run(const Shared& s, const Tile& t) {
        const int rw = t.read_width, rh = t.read_height, B = s.in.bands;
        const std::size_t n = std::size_t(rw) * std::size_t(rh);
        const std::size_t in_bytes = n * std::size_t(B) * dtype_size(s.in.dtype);
        const std::size_t out_bytes = n * std::size_t(s.k.out_bands) * dtype_size(s.k.out_dtype);
        const Layout staged = s.in.layout;
        const MutableCubeView d_in = MutableCubeView::device(dev_in.data(), device, rw, rh, B, s.in.dtype,
                                                             dense_strides(rw, rh, B, staged));
        const MutableCubeView d_out = s.k.out_bands == 0 ? MutableCubeView{}
                                      : MutableCubeView::device(dev_out.data(), device, rw, rh, s.k.out_bands, s.k.out_dtype,
                                                                dense_strides(rw, rh, s.k.out_bands, Layout::BSQ));
        if (s.direct_in) {
            copy_cube(ctx, s.in.view->window(t.read_x0, t.read_y0, rw, rh), d_in);
        } else {
            s.in.read(t.read_x0, t.read_y0, rw, rh, dense_host(pin_in->data(), rw, rh, B, s.in.dtype, staged));
            dev_in.upload_async(ctx, pin_in->data(), in_bytes);
        }
        s.k(ctx, t, d_in, d_out);
        if (s.k.out_bands == 0) return;  // a statistics pass: the kernel kept what it needs
        const CubeView core = CubeView(d_out).window(t.x0 - t.read_x0, t.y0 - t.read_y0, t.width, t.height);
        if (s.direct_out) {
            copy_cube(ctx, core, s.out.window(t.x0, t.y0, t.width, t.height));
        } else {
            dev_out.download_async(ctx, pin_out->data(), out_bytes);
            ctx.synchronize();
            copy_core(dense_host(pin_out->data(), rw, rh, s.k.out_bands, s.k.out_dtype, Layout::BSQ), t, s.out);
        }
    }
};

void cuda_worker(Shared& s, int device) {
    try {
        const Context wctx({.backend = Backend::Cuda, .device = device, .threads = s.threads_per_worker});
        omp_set_num_threads(s.threads_per_worker);  // this thread's OpenMP teams (the staging copies)
        const std::size_t in_bpp = std::size_t(s.in.bands) * dtype_size(s.in.dtype);
        const std::size_t out_bpp = std::size_t(s.k.out_bands) * dtype_size(s.k.out_dtype);
        // The pool keeps this worker's buffers and its kernel's scratch mapped after the pass: a family
        // that runs several passes over the tiles (k-means: one per iteration) does not map them again.
        keep_pool_memory(wctx, s.max_pixels * (in_bpp + out_bpp + s.k.device_work_bytes_per_pixel));
        Lane lane{wctx, device, {}, {}, DeviceBuffer(wctx, s.max_pixels * in_bpp), DeviceBuffer(wctx, s.max_pixels * out_bpp)};
        if (!s.direct_in) lane.pin_in.emplace(s.max_pixels * in_bpp);
        if (!s.direct_out) lane.pin_out.emplace(s.max_pixels * out_bpp);
        for (;;) {
            if (s.stop.load() || s.ctx.cancel_requested()) break;
            const std::size_t i = s.next.fetch_add(1);
            if (i >= s.tiles.size()) break;
            if (s.k.wanted && !s.k.wanted(s.tiles[i])) continue;
            lane.run(s, s.tiles[i]);
            const std::size_t done = s.done.fetch_add(1) + 1;
            if (s.tiles.size() > 1) s.ctx.progress(done, s.tiles.size());
        }
        const std::lock_guard lock(s.mutex);
        s.transfers.push_back(wctx.transfer_totals());
    } catch (...) {
        const std::lock_guard lock(s.mutex);
        if (!s.failure) s.failure = std::current_exception();
        s.stop = true;
    }
}

TiledRun run_cuda(const Context& ctx, const TileSource& in, const MutableCubeView& out, const LocalTileKernel& k,
                  const TileOptions& options, std::string_view where) {
    const std::vector<int> devices = cuda_devices(ctx, options);
    const int lanes = std::max(1, options.lanes);
    const std::size_t in_bpp = std::size_t(in.bands) * dtype_size(in.dtype);
    const std::size_t out_bpp = std::size_t(k.out_bands) * dtype_size(k.out_dtype);
    const int workers_max = int(devices.size()) * lanes;
    const auto [tw, th] = cuda_tile_size(in, k, options, where, devices);
    const std::vector<Tile> tiles = plan_tiles(in.width, in.height, tw, th, k.halo);
    const int workers = int(std::min<std::size_t>(std::size_t(workers_max), tiles.size()));
    Shared s{ctx, in, out, k, tiles, max_read_pixels(tiles), std::max(1, ctx.threads() / workers)};
    s.direct_in = in.in_memory() && is_page_locked(in.view->data());
    s.direct_out = k.out_bands > 0 && is_page_locked(out.data());
    std::vector<std::thread> threads;
    for (int w = 0; w < workers; ++w) threads.emplace_back(cuda_worker, std::ref(s), devices[std::size_t(w) % devices.size()]);
    for (std::thread& t : threads) t.join();
    for (const TransferTotals& t : s.transfers) {
        if (t.uploads) ctx.count_transfer(true, t.upload_bytes, t.upload_ms);
        if (t.downloads) ctx.count_transfer(false, t.download_bytes, t.download_ms);
    }
    if (s.failure) std::rethrow_exception(s.failure);
    ctx.check_cancelled(where);
    TiledRun run{.tiles = tiles.size(), .tile_width = tw, .tile_height = th};
    const int lanes_used = std::min(lanes, workers);
    run.peak_bytes = std::size_t(workers) * s.max_pixels * ((s.direct_in ? 0 : in_bpp) + (s.direct_out ? 0 : out_bpp));
    run.direct_input = s.direct_in;
    run.direct_output = s.direct_out;
    run.device_peak_bytes = std::size_t(lanes_used) * s.max_pixels * (in_bpp + out_bpp + k.device_work_bytes_per_pixel);
    for (int w = 0; w < workers && w < int(devices.size()); ++w) run.devices.push_back(devices[std::size_t(w)]);
    return run;
}

}  // namespace

TileSource tile_source(const CubeView& in) {
    if (in.on_device())
        throw InvalidInput("tiles: the tiled path takes host input (a cube on the device fits there already)");
    TileSource s{.width = in.width(), .height = in.height(), .bands = in.bands(), .dtype = in.dtype(),
                 .layout = in.nearest_layout(), .view = in};
    s.read = [in](int x0, int y0, int w, int h, const MutableCubeView& dst) { copy_cube_host(in.window(x0, y0, w, h), dst); };
    return s;
}

TileSource tile_source(const CubeFile& file) {
    const CubeShape& shape = file.shape();
    TileSource s{.width = shape.width, .height = shape.height, .bands = shape.bands, .dtype = shape.dtype, .layout = shape.layout};
    s.read = [&file](int x0, int y0, int w, int h, const MutableCubeView& dst) { file.read_window(x0, y0, w, h, dst); };
    return s;
}

std::pair<int, int> local_tile_size(const Context& ctx, const TileSource& in, const LocalTileKernel& kernel,
                                    const TileOptions& options, std::string_view where) {
    return ctx.is_cuda() ? cuda_tile_size(in, kernel, options, where, cuda_devices(ctx, options))
                         : cpu_tile_size(in, kernel, options, where);
}

TiledRun run_local_tiles(const Context& ctx, const TileSource& in, const MutableCubeView& out, const LocalTileKernel& k,
                         const TileOptions& options, std::string_view where) {
    if (out.on_device())
        throw InvalidInput(std::string(where) + ": the tiled path writes host output (a cube on the device fits there already)");
    if (k.out_bands == 0) {  // a statistics pass writes nothing
    } else if (out.width() != in.width || out.height() != in.height || out.bands() != k.out_bands || out.dtype() != k.out_dtype)
        throw InvalidInput(std::string(where) + ": output " + out.describe() + " does not match the input (" +
                           std::to_string(in.width) + "x" + std::to_string(in.height) + ", " + std::to_string(k.out_bands) +
                           " band(s) of " + std::string(dtype_name(k.out_dtype)) + " expected)");
    if (in.width == 0 || in.height == 0 || in.bands == 0) return {};
    if (!ctx.is_cuda() && !options.devices.empty())
        throw InvalidInput(std::string(where) + ": devices were named but the backend is the CPU");
    return ctx.is_cuda() ? run_cuda(ctx, in, out, k, options, where) : run_cpu(ctx, in, out, k, options, where);
}

}  // namespace detail
}  // namespace cubekit
