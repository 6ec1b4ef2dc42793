// E6 baselines, CUDA backend (spec edges.md §3.10, §5.3). The per-pixel rules are the CPU
// reference's (baselines_internal.hpp); the kernels only map them onto threads. Every stage runs
// all bands of a chunk in one launch (grid z = band); chunks bound the scratch memory.
//
// Global reductions, chosen so both backends get the same values whatever the thread order:
//   sobel/prewitt/roberts  Σ(gx² + gy²) as exact 64-bit integer atomics;
//   log                    Σ|response| in f64 in the fixed lane order of kSumLanes (one warp per
//                          row, then one warp per band), exactly as the CPU adds;
//   canny                  the magnitude maximum (atomicMax on the f32 bits, all ≥ 0) and exact
//                          64-bin histogram counts.
// Canny hysteresis: a tile kernel grows the edge state inside 32×32 tiles until stable (shared
// memory, double-phase so no thread reads a cell while another writes it), reading the previous
// state and writing a new buffer (ping-pong); the host relaunches until a device flag says that a
// whole launch changed nothing, reading the flag every kLaunchesPerCheck launches.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/cuda_check.hpp"
#include "cubekit/buffer.hpp"
#include "cubekit/edges.hpp"
#include "edges/baselines_internal.hpp"

namespace cubekit::detail {
namespace {

constexpr int kTileX = 32;       // a warp spans a tile row
constexpr int kTileY = 8;
constexpr int kGrowTile = 32;    // hysteresis tile: 32×32 pixels, 32×8 threads, 4 rows each
constexpr int kGrowRows = kGrowTile / kTileY;
static_assert(kGrowTile == kTileX, "tile_grid spans kTileX columns per block");
constexpr int kLaunchesPerCheck = 4;
constexpr unsigned kFullMask = 0xffffffffu;
// Device bytes per chunk of bands; CUBEKIT_BASELINE_CHUNK_BYTES overrides it (tests force chunking).
constexpr std::size_t kScratchBudget = std::size_t(1) << 30;

std::size_t scratch_budget() {
    if (const char* env = std::getenv("CUBEKIT_BASELINE_CHUNK_BYTES")) {
        const unsigned long long v = std::strtoull(env, nullptr, 10);
        if (v > 0) return std::size_t(v);
    }
    return kScratchBudget;
}

struct Geometry {
    int W, H, B;    // B: bands of this chunk
    std::size_t N;  // W·H
};

dim3 tile_grid(const Geometry& g, int tile_h) {
    return dim3(unsigned((g.W + kTileX - 1) / kTileX), unsigned(std::min((g.H + tile_h - 1) / tile_h, 65535)),
                unsigned(std::min(g.B, 65535)));
}
const dim3 kTileBlock(kTileX, kTileY);

// 256 levels → v/255 in shared memory (the CPU uses the same unit_level values).
__device__ __forceinline__ void load_levels(float* level) {
    for (int i = threadIdx.y * blockDim.x + threadIdx.x; i < 256; i += blockDim.x * blockDim.y)
        level[i] = unit_level(std::uint8_t(i));
    __syncthreads();
}

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(kFullMask, v, offset);
    return v;
}

// ---- sobel / prewitt / roberts ---------------------------------------------------------------------

// m = gx² + gy² per pixel and Σm per band (exact).
__global__ void mask_magnitude_kernel(const std::uint8_t* __restrict__ q, std::int32_t* __restrict__ m,
                                      unsigned long long* __restrict__ sums, Geometry g, BaselineMethod method) {
    for (int band = blockIdx.z; band < g.B; band += gridDim.z)
        for (int ty = blockIdx.y; ty * kTileY < g.H; ty += gridDim.y) {
            const int x = blockIdx.x * kTileX + threadIdx.x, y = ty * kTileY + threadIdx.y;
            unsigned long long v = 0;
            if (x < g.W && y < g.H) {
                int gx, gy;
                mask_gradient(q + std::size_t(band) * g.N, g.W, g.H, x, y, method, gx, gy);
                const std::int32_t s = gx * gx + gy * gy;
                m[std::size_t(band) * g.N + std::size_t(y) * std::size_t(g.W) + std::size_t(x)] = s;
                v = (unsigned long long)s;
            }
            v = warp_sum(v);
            if (threadIdx.x == 0 && v != 0) atomicAdd(sums + band, v);
        }
}

__global__ void mask_edges_kernel(const std::uint8_t* __restrict__ q, const std::int32_t* __restrict__ m,
                                  const unsigned long long* __restrict__ sums, std::uint8_t* __restrict__ out, Geometry g,
                                  BaselineMethod method, bool automatic, int scale, std::int64_t fixed_cutoff, bool thin) {
    for (int band = blockIdx.z; band < g.B; band += gridDim.z) {
        const std::int64_t cutoff = automatic ? mask_auto_cutoff(sums[band], scale, g.N) : fixed_cutoff;
        const std::int32_t* mb = m + std::size_t(band) * g.N;
        for (int ty = blockIdx.y; ty * kTileY < g.H; ty += gridDim.y) {
            const int x = blockIdx.x * kTileX + threadIdx.x, y = ty * kTileY + threadIdx.y;
            if (x >= g.W || y >= g.H) continue;
            const std::size_t i = std::size_t(y) * std::size_t(g.W) + std::size_t(x);
            bool edge;
            if (thin) {
                int gx, gy;
                mask_gradient(q + std::size_t(band) * g.N, g.W, g.H, x, y, method, gx, gy);
                edge = thinned_edge(mb, g.W, g.H, x, y, gx < 0 ? -gx : gx, gy < 0 ? -gy : gy,
                                    method == BaselineMethod::Roberts, cutoff);
            } else {
                edge = std::int64_t(mb[i]) > cutoff;
            }
            out[std::size_t(band) * g.N + i] = edge ? 1 : 0;
        }
    }
}

// ---- log ----------------------------------------------------------------------------------------

__global__ void log_response_kernel(const std::uint8_t* __restrict__ q, const float* __restrict__ kernel, int R,
                                    float* __restrict__ r, Geometry g) {
    __shared__ float level[256];
    load_levels(level);
    for (int band = blockIdx.z; band < g.B; band += gridDim.z) {
        const std::uint8_t* qb = q + std::size_t(band) * g.N;
        for (int ty = blockIdx.y; ty * kTileY < g.H; ty += gridDim.y) {
            const int x = blockIdx.x * kTileX + threadIdx.x, y = ty * kTileY + threadIdx.y;
            if (x >= g.W || y >= g.H) continue;
            r[std::size_t(band) * g.N + std::size_t(y) * std::size_t(g.W) + std::size_t(x)] =
                correlate_2d(kernel, R, x, y, g.W, g.H, [&](int xx, int yy) {
                    return level[qb[std::size_t(yy) * std::size_t(g.W) + std::size_t(xx)]];
                });
        }
    }
}

// One warp per sequence: out[s] = Σ_i |values[s·length + i]| in the fixed lane order of
// kSumLanes (lane l adds elements l, l+32, ... in order; then the shuffle-down tree; lane 0).
template <typename T>
__global__ void fixed_order_abs_sums_kernel(const T* __restrict__ values, std::size_t length, std::size_t sequences,
                                            double* __restrict__ out) {
    const std::size_t warps = std::size_t(gridDim.x) * blockDim.y;
    for (std::size_t s = std::size_t(blockIdx.x) * blockDim.y + threadIdx.y; s < sequences; s += warps) {
        const T* v = values + s * length;
        double acc = 0.0;
        for (std::size_t i = threadIdx.x; i < length; i += kSumLanes) {
            const double d = double(v[i]);
            acc = acc + (d < 0 ? -d : d);
        }
        acc = warp_sum(acc);
        if (threadIdx.x == 0) out[s] = acc;
    }
}

__global__ void log_edges_kernel(const float* __restrict__ r, const double* __restrict__ band_sums,
                                 std::uint8_t* __restrict__ out, Geometry g, bool automatic, double given) {
    for (int band = blockIdx.z; band < g.B; band += gridDim.z) {
        const double thresh = automatic ? 0.75 * band_sums[band] / double(g.N) : given;
        const float* rb = r + std::size_t(band) * g.N;
        for (int ty = blockIdx.y; ty * kTileY < g.H; ty += gridDim.y) {
            const int x = blockIdx.x * kTileX + threadIdx.x, y = ty * kTileY + threadIdx.y;
            if (x >= g.W || y >= g.H) continue;
            const auto at = [&](int xx, int yy) { return rb[std::size_t(yy) * std::size_t(g.W) + std::size_t(xx)]; };
            const bool interior = x > 0 && y > 0 && x < g.W - 1 && y < g.H - 1;
            const bool edge = interior && log_zero_crossing(at(x, y), at(x, y - 1), at(x, y + 1), at(x - 1, y), at(x + 1, y), thresh);
            out[std::size_t(band) * g.N + std::size_t(y) * std::size_t(g.W) + std::size_t(x)] = edge ? 1 : 0;
        }
    }
}

// ---- canny --------------------------------------------------------------------------------------

// sv = Gaussian along y, sh = Gaussian along x (the first passes of smoothGradient).
__global__ void canny_smooth_kernel(const std::uint8_t* __restrict__ q, const float* __restrict__ gauss, int R,
                                    float* __restrict__ sv, float* __restrict__ sh, Geometry g) {
    __shared__ float level[256];
    load_levels(level);
    const std::size_t w = std::size_t(g.W);
    for (int band = blockIdx.z; band < g.B; band += gridDim.z) {
        const std::uint8_t* qb = q + std::size_t(band) * g.N;
        for (int ty = blockIdx.y; ty * kTileY < g.H; ty += gridDim.y) {
            const int x = blockIdx.x * kTileX + threadIdx.x, y = ty * kTileY + threadIdx.y;
            if (x >= g.W || y >= g.H) continue;
            const std::size_t i = std::size_t(band) * g.N + std::size_t(y) * w + std::size_t(x);
            sv[i] = convolve_1d(gauss, R, y, g.H, [&](int yy) { return level[qb[std::size_t(yy) * w + std::size_t(x)]]; });
            sh[i] = convolve_1d(gauss, R, x, g.W, [&](int xx) { return level[qb[std::size_t(y) * w + std::size_t(xx)]]; });
        }
    }
}

// gx = derivative along x of sv, gy = derivative along y of sh, their magnitude, and the band's
// maximum magnitude as f32 bits (non-negative floats order like their bit patterns).
__global__ void canny_gradient_kernel(const float* __restrict__ sv, const float* __restrict__ sh,
                                      const float* __restrict__ dgauss, int R, float* __restrict__ gx,
                                      float* __restrict__ gy, float* __restrict__ mag, unsigned* __restrict__ max_bits,
                                      Geometry g) {
    const std::size_t w = std::size_t(g.W);
    for (int band = blockIdx.z; band < g.B; band += gridDim.z) {
        const float* svb = sv + std::size_t(band) * g.N;
        const float* shb = sh + std::size_t(band) * g.N;
        for (int ty = blockIdx.y; ty * kTileY < g.H; ty += gridDim.y) {
            const int x = blockIdx.x * kTileX + threadIdx.x, y = ty * kTileY + threadIdx.y;
            unsigned bits = 0;
            if (x < g.W && y < g.H) {
                const std::size_t i = std::size_t(band) * g.N + std::size_t(y) * w + std::size_t(x);
                const float dx = convolve_1d(dgauss, R, x, g.W, [&](int xx) { return svb[std::size_t(y) * w + std::size_t(xx)]; });
                const float dy = convolve_1d(dgauss, R, y, g.H, [&](int yy) { return shb[std::size_t(yy) * w + std::size_t(x)]; });
                const float m = canny_magnitude(dx, dy);
                gx[i] = dx, gy[i] = dy, mag[i] = m;
                bits = __float_as_uint(m);
            }
            for (int offset = 16; offset > 0; offset /= 2) bits = max(bits, __shfl_down_sync(kFullMask, bits, offset));
            if (threadIdx.x == 0 && bits != 0) atomicMax(max_bits + band, bits);
        }
    }
}

// Normalises the magnitude by the band's maximum (when > 0) and counts the 64-bin histogram;
// lanes with the same bin add once (warp-aggregated atomics).
__global__ void canny_histogram_kernel(float* __restrict__ mag, const unsigned* __restrict__ max_bits,
                                       unsigned long long* __restrict__ counts, Geometry g) {
    for (int band = blockIdx.z; band < g.B; band += gridDim.z) {
        const float magmax = __uint_as_float(max_bits[band]);
        for (int ty = blockIdx.y; ty * kTileY < g.H; ty += gridDim.y) {
            const int x = blockIdx.x * kTileX + threadIdx.x, y = ty * kTileY + threadIdx.y;
            const bool inside = x < g.W && y < g.H;
            const unsigned active = __ballot_sync(kFullMask, inside);
            if (!inside) continue;
            const std::size_t i = std::size_t(band) * g.N + std::size_t(y) * std::size_t(g.W) + std::size_t(x);
            float m = mag[i];
            if (magmax > 0.0f) m = m / magmax, mag[i] = m;
            const int bin = canny_bin(m);
            const unsigned peers = __match_any_sync(active, bin);
            if (int(threadIdx.x) == __ffs(peers) - 1)
                atomicAdd(counts + std::size_t(band) * kCannyBins + bin, (unsigned long long)__popc(peers));
        }
    }
}

__global__ void canny_thresholds_kernel(const unsigned long long* __restrict__ counts, double* __restrict__ high,
                                        double* __restrict__ low, Geometry g, bool automatic, double given, double ratio) {
    const int band = blockIdx.x * blockDim.x + threadIdx.x;
    if (band >= g.B) return;
    const double h = automatic ? canny_auto_high(counts + std::size_t(band) * kCannyBins, g.W, g.H) : given;
    high[band] = h;
    low[band] = ratio * h;
}

// Non-maximum suppression: every pixel gets a state (the border none).
__global__ void canny_nms_kernel(const float* __restrict__ gx, const float* __restrict__ gy,
                                 const float* __restrict__ mag, const double* __restrict__ high,
                                 const double* __restrict__ low, std::uint8_t* __restrict__ state, Geometry g) {
    const std::size_t w = std::size_t(g.W);
    for (int band = blockIdx.z; band < g.B; band += gridDim.z) {
        const float* mb = mag + std::size_t(band) * g.N;
        for (int ty = blockIdx.y; ty * kTileY < g.H; ty += gridDim.y) {
            const int x = blockIdx.x * kTileX + threadIdx.x, y = ty * kTileY + threadIdx.y;
            if (x >= g.W || y >= g.H) continue;
            const std::size_t i = std::size_t(y) * w + std::size_t(x);
            std::uint8_t s = kCannyNone;
            if (x > 0 && y > 0 && x < g.W - 1 && y < g.H - 1) {
                const Neighbours nb{mb[i + 1], mb[i - w + 1], mb[i - w], mb[i - w - 1],
                                    mb[i - 1], mb[i + w - 1], mb[i + w], mb[i + w + 1]};
                const std::size_t k = std::size_t(band) * g.N + i;
                if (canny_local_max(gx[k], gy[k], mb[i], nb, low[band]))
                    s = double(mb[i]) > high[band] ? kCannyEdge : kCannyWeak;
            }
            state[std::size_t(band) * g.N + i] = s;
        }
    }
}

// One round of hysteresis: each 32×32 tile (with its one-pixel halo from `in`) turns weak pixels
// with an edge 8-neighbour into edges until nothing changes inside the tile, then writes its
// pixels to `out`; *changed is set when any tile changed. Halo cells are read, never written (the
// neighbouring tile owns them; the next round sees their growth).
__global__ void canny_grow_kernel(const std::uint8_t* __restrict__ in, std::uint8_t* __restrict__ out,
                                  unsigned* __restrict__ changed, Geometry g) {
    __shared__ std::uint8_t tile[kGrowTile + 2][kGrowTile + 2 + 2];
    const int tx = threadIdx.x, tid = threadIdx.y * kTileX + threadIdx.x;
    const std::size_t w = std::size_t(g.W);
    for (int band = blockIdx.z; band < g.B; band += gridDim.z)
        for (int ty = blockIdx.y; ty * kGrowTile < g.H; ty += gridDim.y) {
            const int x0 = blockIdx.x * kGrowTile - 1, y0 = ty * kGrowTile - 1;
            const std::uint8_t* ib = in + std::size_t(band) * g.N;
            __syncthreads();  // the previous tile of this block is written out
            for (int e = tid; e < (kGrowTile + 2) * (kGrowTile + 2); e += kTileX * kTileY) {
                const int lx = e % (kGrowTile + 2), ly = e / (kGrowTile + 2);
                const int gxp = x0 + lx, gyp = y0 + ly;
                const bool inside = gxp >= 0 && gyp >= 0 && gxp < g.W && gyp < g.H;
                tile[ly][lx] = inside ? ib[std::size_t(gyp) * w + std::size_t(gxp)] : kCannyNone;
            }
            __syncthreads();
            int grew_here = 0;
            for (;;) {
                bool grow[kGrowRows];
                int any = 0;
#pragma unroll
                for (int k = 0; k < kGrowRows; ++k) {
                    const int lx = tx + 1, ly = threadIdx.y + k * kTileY + 1;
                    grow[k] = false;
                    if (tile[ly][lx] == kCannyWeak)
                        for (int dy = -1; dy <= 1 && !grow[k]; ++dy)
                            for (int dx = -1; dx <= 1; ++dx)
                                if (tile[ly + dy][lx + dx] == kCannyEdge) {
                                    grow[k] = true;
                                    break;
                                }
                }
                __syncthreads();  // every cell is read before any is written
#pragma unroll
                for (int k = 0; k < kGrowRows; ++k)
                    if (grow[k]) tile[threadIdx.y + k * kTileY + 1][tx + 1] = kCannyEdge, any = 1;
                if (!__syncthreads_or(any)) break;
                grew_here = 1;
            }
#pragma unroll
            for (int k = 0; k < kGrowRows; ++k) {
                const int gxp = x0 + tx + 1, gyp = y0 + threadIdx.y + k * kTileY + 1;
                if (gxp < g.W && gyp < g.H)
                    out[std::size_t(band) * g.N + std::size_t(gyp) * w + std::size_t(gxp)] =
                        tile[threadIdx.y + k * kTileY + 1][tx + 1];
            }
            if (grew_here && tid == 0) atomicOr(changed, 1u);
        }
}

__global__ void canny_finish_kernel(const std::uint8_t* __restrict__ state, std::uint8_t* __restrict__ out, std::size_t n) {
    for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
        out[i] = state[i] == kCannyEdge ? 1 : 0;
}

// ---- host side ------------------------------------------------------------------------------------

template <typename T>
T* as(DeviceBuffer& b) { return static_cast<T*>(b.data()); }

DeviceBuffer upload_floats(const Context& ctx, const std::vector<float>& v) {
    DeviceBuffer d(ctx, v.size() * sizeof(float));
    d.upload(ctx, v.data(), v.size() * sizeof(float));
    return d;
}

void zero(const Context& ctx, void* p, std::size_t bytes) {
    CUBEKIT_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_of(ctx)));
}

// Device bytes per pixel of a band while the method runs (input, scratch, output).
std::size_t bytes_per_pixel(BaselineMethod m) {
    switch (m) {
        case BaselineMethod::LoG: return 1 + 4 + 1;
        case BaselineMethod::Canny: return 1 + 5 * 4 + 2 + 1;
        default: return 1 + 4 + 1;
    }
}

struct Runner {
    const Context& ctx;
    const BaselinePlan& plan;
    int W, H;
    std::size_t N;
    int chunk;  // bands per chunk (buffers sized for it)
    const std::uint8_t* q = nullptr;  // this chunk's E1 levels, W×H×chunk BSQ
    std::uint8_t* out = nullptr;      // this chunk's edges, W×H×chunk BSQ
    DeviceBuffer scratch_a, scratch_b, scratch_c, scratch_d, scratch_e, state_a, state_b;
    DeviceBuffer sums, band_sums, row_sums, max_bits, counts, high, low, flag, taps_a, taps_b;

    void run_mask(const Geometry& g, BaselineThreshold* thresholds) {
        cudaStream_t s = stream_of(ctx);
        auto* m = as<std::int32_t>(scratch_a);
        auto* d_sums = as<unsigned long long>(sums);
        zero(ctx, d_sums, std::size_t(g.B) * sizeof(unsigned long long));
        const dim3 grid = tile_grid(g, kTileY);
        mask_magnitude_kernel<<<grid, kTileBlock, 0, s>>>(q, m, d_sums, g, plan.method);
        CUBEKIT_CHECK_LAUNCH(ctx, "mask_magnitude_kernel", grid, kTileBlock);
        mask_edges_kernel<<<grid, kTileBlock, 0, s>>>(q, m, d_sums, out, g,
                                                      plan.method, plan.automatic, plan.mask_scale, plan.fixed_cutoff,
                                                      plan.thin);
        CUBEKIT_CHECK_LAUNCH(ctx, "mask_edges_kernel", grid, kTileBlock);
        std::vector<unsigned long long> h_sums(std::size_t(g.B));
        sums.download(ctx, h_sums.data(), h_sums.size() * sizeof(unsigned long long));
        const double unit = 255.0 * double(plan.mask_divisor);
        for (int b = 0; b < g.B; ++b)
            thresholds[b].high = plan.automatic
                                     ? std::sqrt(double(plan.mask_scale) * double(h_sums[std::size_t(b)]) / double(g.N)) / unit
                                     : plan.threshold;
    }

    void run_log(const Geometry& g, BaselineThreshold* thresholds) {
        cudaStream_t s = stream_of(ctx);
        auto* r = as<float>(scratch_a);
        const dim3 grid = tile_grid(g, kTileY);
        log_response_kernel<<<grid, kTileBlock, 0, s>>>(q, as<float>(taps_a), plan.radius, r, g);
        CUBEKIT_CHECK_LAUNCH(ctx, "log_response_kernel", grid, kTileBlock);
        const std::size_t rows = std::size_t(g.B) * std::size_t(g.H);
        const dim3 warps(kSumLanes, kTileY);
        const dim3 row_grid(unsigned(std::min<std::size_t>((rows + kTileY - 1) / kTileY, 1u << 20)));
        fixed_order_abs_sums_kernel<float><<<row_grid, warps, 0, s>>>(r, std::size_t(g.W), rows, as<double>(row_sums));
        CUBEKIT_CHECK_LAUNCH(ctx, "fixed_order_abs_sums_kernel<float>", row_grid, warps);
        const dim3 band_grid(unsigned((std::size_t(g.B) + kTileY - 1) / kTileY));
        fixed_order_abs_sums_kernel<double><<<band_grid, warps, 0, s>>>(as<double>(row_sums), std::size_t(g.H),
                                                                        std::size_t(g.B), as<double>(band_sums));
        CUBEKIT_CHECK_LAUNCH(ctx, "fixed_order_abs_sums_kernel<double>", band_grid, warps);
        log_edges_kernel<<<grid, kTileBlock, 0, s>>>(r, as<double>(band_sums), out, g, plan.automatic,
                                                     plan.threshold);
        CUBEKIT_CHECK_LAUNCH(ctx, "log_edges_kernel", grid, kTileBlock);
        std::vector<double> h_sums(std::size_t(g.B));
        band_sums.download(ctx, h_sums.data(), h_sums.size() * sizeof(double));
        for (int b = 0; b < g.B; ++b)
            thresholds[b].high = plan.automatic ? 0.75 * h_sums[std::size_t(b)] / double(g.N) : plan.threshold;
    }

    void run_canny(const Geometry& g, BaselineThreshold* thresholds) {
        cudaStream_t s = stream_of(ctx);
        float *sv = as<float>(scratch_a), *sh = as<float>(scratch_b), *gx = as<float>(scratch_c),
              *gy = as<float>(scratch_d), *mag = as<float>(scratch_e);
        const dim3 grid = tile_grid(g, kTileY);
        canny_smooth_kernel<<<grid, kTileBlock, 0, s>>>(q, as<float>(taps_a), plan.radius, sv, sh, g);
        CUBEKIT_CHECK_LAUNCH(ctx, "canny_smooth_kernel", grid, kTileBlock);
        zero(ctx, max_bits.data(), std::size_t(g.B) * sizeof(unsigned));
        zero(ctx, counts.data(), std::size_t(g.B) * kCannyBins * sizeof(unsigned long long));
        canny_gradient_kernel<<<grid, kTileBlock, 0, s>>>(sv, sh, as<float>(taps_b), plan.radius, gx, gy, mag,
                                                          as<unsigned>(max_bits), g);
        CUBEKIT_CHECK_LAUNCH(ctx, "canny_gradient_kernel", grid, kTileBlock);
        canny_histogram_kernel<<<grid, kTileBlock, 0, s>>>(mag, as<unsigned>(max_bits), as<unsigned long long>(counts), g);
        CUBEKIT_CHECK_LAUNCH(ctx, "canny_histogram_kernel", grid, kTileBlock);
        const dim3 tgrid(unsigned((g.B + 127) / 128)), tblock(128);
        canny_thresholds_kernel<<<tgrid, tblock, 0, s>>>(as<unsigned long long>(counts), as<double>(high), as<double>(low),
                                                         g, plan.automatic, plan.threshold, plan.low_ratio);
        CUBEKIT_CHECK_LAUNCH(ctx, "canny_thresholds_kernel", tgrid, tblock);
        std::uint8_t* cur = as<std::uint8_t>(state_a);
        std::uint8_t* next = as<std::uint8_t>(state_b);
        canny_nms_kernel<<<grid, kTileBlock, 0, s>>>(gx, gy, mag, as<double>(high), as<double>(low), cur, g);
        CUBEKIT_CHECK_LAUNCH(ctx, "canny_nms_kernel", grid, kTileBlock);
        // Hysteresis: rounds until one whole round changes nothing (then `cur` is the fixed point).
        // Every round but the last changes at least one pixel, so this ends within N·B rounds.
        const dim3 ggrid = tile_grid(g, kGrowTile);
        unsigned h_flag = 1;
        while (h_flag != 0) {
            ctx.check_cancelled("edges-baseline");
            zero(ctx, flag.data(), sizeof(unsigned));
            for (int k = 0; k < kLaunchesPerCheck; ++k) {
                canny_grow_kernel<<<ggrid, kTileBlock, 0, s>>>(cur, next, as<unsigned>(flag), g);
                CUBEKIT_CHECK_LAUNCH(ctx, "canny_grow_kernel", ggrid, kTileBlock);
                std::swap(cur, next);
            }
            flag.download(ctx, &h_flag, sizeof(unsigned));
        }
        const std::size_t n = std::size_t(g.B) * g.N;
        const dim3 fgrid(unsigned(std::min<std::size_t>((n + 255) / 256, 1u << 20))), fblock(256);
        canny_finish_kernel<<<fgrid, fblock, 0, s>>>(cur, out, n);
        CUBEKIT_CHECK_LAUNCH(ctx, "canny_finish_kernel", fgrid, fblock);
        std::vector<double> h_high(std::size_t(g.B)), h_low(std::size_t(g.B));
        high.download(ctx, h_high.data(), h_high.size() * sizeof(double));
        low.download(ctx, h_low.data(), h_low.size() * sizeof(double));
        for (int b = 0; b < g.B; ++b) thresholds[b] = {h_high[std::size_t(b)], h_low[std::size_t(b)]};
    }
};

}  // namespace

namespace {

// The scratch buffers of `method` for `chunk` bands of N pixels.
void allocate_scratch(Runner& r, std::size_t cb) {
    const Context& ctx = r.ctx;
    const std::size_t N = r.N;
    switch (r.plan.method) {
        case BaselineMethod::Sobel:
        case BaselineMethod::Prewitt:
        case BaselineMethod::Roberts:
            r.scratch_a = DeviceBuffer(ctx, cb * N * sizeof(std::int32_t));
            r.sums = DeviceBuffer(ctx, cb * sizeof(unsigned long long));
            break;
        case BaselineMethod::LoG:
            r.scratch_a = DeviceBuffer(ctx, cb * N * sizeof(float));
            r.row_sums = DeviceBuffer(ctx, cb * std::size_t(r.H) * sizeof(double));
            r.band_sums = DeviceBuffer(ctx, cb * sizeof(double));
            r.taps_a = upload_floats(ctx, r.plan.log_kernel);
            break;
        case BaselineMethod::Canny:
            for (DeviceBuffer* b : {&r.scratch_a, &r.scratch_b, &r.scratch_c, &r.scratch_d, &r.scratch_e})
                *b = DeviceBuffer(ctx, cb * N * sizeof(float));
            r.state_a = DeviceBuffer(ctx, cb * N);
            r.state_b = DeviceBuffer(ctx, cb * N);
            r.max_bits = DeviceBuffer(ctx, cb * sizeof(unsigned));
            r.counts = DeviceBuffer(ctx, cb * kCannyBins * sizeof(unsigned long long));
            r.high = DeviceBuffer(ctx, cb * sizeof(double));
            r.low = DeviceBuffer(ctx, cb * sizeof(double));
            r.flag = DeviceBuffer(ctx, sizeof(unsigned));
            r.taps_a = upload_floats(ctx, r.plan.gauss);
            r.taps_b = upload_floats(ctx, r.plan.dgauss);
            break;
    }
}

}  // namespace

// Chunk by chunk of bands: E1 of the chunk into q (quantize_to_u8_into, which reads a dense BSQ
// chunk on this device where it is and uploads or reorders anything else once; skipped for dense
// u8 BSQ samples on this device, which are the levels), the method's kernels, the edges written in
// place into a dense BSQ output or staged and copied into any other.
void baseline_cuda(const Context& ctx, const CubeView& cube, const BaselinePlan& plan, const MutableCubeView& edges,
                   std::vector<BaselineThreshold>& thresholds) {
    CUBEKIT_CUDA_CHECK(cudaSetDevice(ctx.device()));
    const int W = cube.width(), H = cube.height(), B = cube.bands();
    const std::size_t N = cube.num_pixels();
    thresholds.assign(std::size_t(B), {});
    const bool in_place = cube.on_device() && cube.device() == ctx.device() && cube.is_dense(Layout::BSQ);
    const bool direct_out = edges.is_dense(Layout::BSQ);
    // A chunk E1 cannot read in place is first copied to the device as dense BSQ.
    const std::size_t per_band = N * (bytes_per_pixel(plan.method) + (in_place ? 0 : dtype_size(cube.dtype())));
    const int chunk = int(std::clamp<std::size_t>(scratch_budget() / per_band, 1, std::size_t(B)));
    const std::size_t cb = std::size_t(chunk);
    Runner r{ctx, plan, W, H, N, chunk};
    allocate_scratch(r, cb);
    DeviceBuffer q_buf, out_buf;
    if (!direct_out) out_buf = DeviceBuffer(ctx, cb * N);
    for (int b0 = 0; b0 < B; b0 += chunk) {
        ctx.check_cancelled("edges-baseline");
        const int nb = std::min(chunk, B - b0);
        const Geometry g{W, H, nb, N};
        const CubeView part = cube.band_range(b0, nb);
        if (in_place && part.dtype() == DType::U8) {
            r.q = reinterpret_cast<const std::uint8_t*>(part.data());
        } else {
            if (q_buf.empty()) q_buf = DeviceBuffer(ctx, cb * N);
            quantize_to_u8_into(ctx, part,
                                MutableCubeView::device(q_buf.data(), ctx.device(), W, H, nb, DType::U8,
                                                        dense_strides(W, H, nb, Layout::BSQ)),
                                Quantize::PerBand);
            r.q = static_cast<const std::uint8_t*>(q_buf.data());
        }
        if (direct_out) {
            r.out = reinterpret_cast<std::uint8_t*>(edges.data()) + std::size_t(b0) * N;
        } else {
            out_buf.fill_bytes(ctx, 0xFF);  // every kernel path writes every pixel; a miss shows as 255 in tests
            r.out = static_cast<std::uint8_t*>(out_buf.data());
        }
        BaselineThreshold* t = thresholds.data() + b0;
        switch (plan.method) {
            case BaselineMethod::Sobel:
            case BaselineMethod::Prewitt:
            case BaselineMethod::Roberts: r.run_mask(g, t); break;
            case BaselineMethod::LoG: r.run_log(g, t); break;
            case BaselineMethod::Canny: r.run_canny(g, t); break;
        }
        if (!direct_out)
            copy_cube(ctx, CubeView::device(out_buf.data(), ctx.device(), W, H, nb, DType::U8,
                                            dense_strides(W, H, nb, Layout::BSQ)),
                      edges.band_range(b0, nb));
        ctx.progress(std::size_t(b0 + nb), std::size_t(B));
    }
}

}  // namespace cubekit::detail
