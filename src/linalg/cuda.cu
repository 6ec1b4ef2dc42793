// PCA, CUDA backend (spec edges.md §3.9, §4.3 "PCA on the device"). The device computes the exact
// integer sums and the scores; the host routine shared with the CPU (pca.cpp) turns the sums into
// the model, so both backends give bit-identical models and scores.
//
// Sums: X^T X over P pixels and B+1 "bands", the extra band being 1 for every pixel used and 0
// otherwise, so one pass gives Σq_i q_j (i ≤ j < B), Σq_b (column B) and P (entry B,B). It is
// tiled like a GEMM (SYRK): a block owns a 32×32 tile (ti ≤ tj) of the (B+1)×(B+1) matrix and a
// slice of pixels; chunks of pixels of both 32-band stripes go through shared memory; 4 groups of
// 64 threads each take a quarter of a chunk, a thread a 4×4 micro-tile (8 shared loads per 16
// multiply-adds). Per-thread partials in the narrowest exact type (u8: u32 __dp4a, 4 pixels per
// instruction; 16-bit: int64; 32-bit and fixed point: 128 bits) are reduced over the groups in
// shared memory and added to global signed 128-bit sums with two u64 atomics and a carry. Integer
// addition is associative, so the sums do not depend on the order of the atomics.
//
// Scores: one thread per pixel, bands in order, __dsub_rn/__dmul_rn/__dadd_rn (no contraction),
// up to 8 components per pass held in registers.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/cuda_check.hpp"
#include "core/cuda_helpers.cuh"
#include "cubekit/error.hpp"
#include "linalg/pca_internal.hpp"

namespace cubekit::detail {
namespace {

using u64 = unsigned long long;
using km::u128;

constexpr int kTile = 32;                   // bands per side of an output tile
constexpr int kWords = 64;                  // shared words per band row and chunk
constexpr int kRowStride = kWords + 1;      // padded: the micro-tiles of a warp read distinct banks
constexpr int kGroups = 4;                  // groups of 64 threads, each a quarter of a chunk's words
constexpr int kGroupWords = kWords / kGroups;
constexpr int kSyrkThreads = 64 * kGroups;  // a thread owns a 4×4 micro-tile of the 32×32 tile
constexpr int kBlocksPerSm = 4;             // slices are sized for about this many blocks per SM
constexpr std::int64_t kNoSliceLimit = std::int64_t(1) << 62;

// Per element type: the shared word (Word), the per-thread partial (Acc) and its multiply-add,
// pixels per word, and the largest slice of pixels whose partial cannot overflow Acc.
template <typename T> struct Syrk;
template <> struct Syrk<std::uint8_t> {
    using Word = unsigned;  // 4 pixels of one band, one byte each
    using Acc = unsigned;   // ≤ slice · 255² = 65536 · 65025 < 2^32 (also after the group reduction)
    static constexpr int kPixelsPerWord = 4;
    static constexpr std::int64_t kMaxSlice = 65536;
    __device__ static Acc mac(Acc acc, Word a, Word b) { return __dp4a(a, b, acc); }
};
template <typename T> struct Syrk16 {  // u16, i16: products < 2^32, P < 2^31 of them fit in int64
    using Word = int;
    using Acc = long long;
    static constexpr int kPixelsPerWord = 1;
    static constexpr std::int64_t kMaxSlice = kNoSliceLimit;
    __device__ static Acc mac(Acc acc, Word a, Word b) { return acc + (long long)a * b; }
};
template <> struct Syrk<std::uint16_t> : Syrk16<std::uint16_t> {};
template <> struct Syrk<std::int16_t> : Syrk16<std::int16_t> {};
template <> struct Syrk<std::uint32_t> {  // products < 2^64 (unsigned), sums < 2^95
    using Word = unsigned;
    using Acc = u128;
    static constexpr int kPixelsPerWord = 1;
    static constexpr std::int64_t kMaxSlice = kNoSliceLimit;
    __device__ static Acc mac(Acc acc, Word a, Word b) { return acc + u128(u64(a) * u64(b)); }
};
template <> struct Syrk<std::int32_t> {  // |products| ≤ 2^62, |sums| < 2^93
    using Word = int;
    using Acc = i128;
    static constexpr int kPixelsPerWord = 1;
    static constexpr std::int64_t kMaxSlice = kNoSliceLimit;
    __device__ static Acc mac(Acc acc, Word a, Word b) { return acc + i128((long long)a * b); }
};
template <typename T> struct SyrkFixed {  // fixed point: |q| ≤ 2^(62−⌈log2 P⌉), sums ≤ 2^124
    using Word = long long;
    using Acc = i128;
    static constexpr int kPixelsPerWord = 1;
    static constexpr std::int64_t kMaxSlice = kNoSliceLimit;
    __device__ static Acc mac(Acc acc, Word a, Word b) { return acc + i128(a) * i128(b); }
};
template <> struct Syrk<float> : SyrkFixed<float> {};
template <> struct Syrk<double> : SyrkFixed<double> {};


// Word `p` (its first pixel) of band `band` of a chunk: the sample (or its 4 bytes, u8), the
// fixed point for float input, 1 for the indicator band B, 0 beyond the pixels used and for padding
// bands. `valid` (float input only) marks the pixels whose bands are all finite.
template <typename T>
__device__ __forceinline__ typename Syrk<T>::Word load_word(const T* x, const unsigned char* valid, std::int64_t P,
                                                            int B, int band, std::int64_t p, double scale) {
    using Word = typename Syrk<T>::Word;
    if (band > B) return Word(0);
    if constexpr (std::is_same_v<T, std::uint8_t>) {
        if (band == B) {  // indicator band: one byte 1 per pixel of the cube
            unsigned w = 0;
            for (int i = 0; i < 4; ++i)
                if (p + i < P) w |= 1u << (8 * i);
            return w;
        }
        const std::uint8_t* src = x + std::int64_t(band) * P + p;
        if (p + 4 <= P && (reinterpret_cast<std::uintptr_t>(src) & 3) == 0) return *reinterpret_cast<const unsigned*>(src);
        unsigned w = 0;  // end of the cube or a band plane not 4-byte aligned (P % 4 ≠ 0)
        for (int i = 0; i < 4; ++i)
            if (p + i < P) w |= unsigned(src[i]) << (8 * i);
        return w;
    } else {
        if (p >= P) return Word(0);
        if constexpr (std::is_floating_point_v<T>) {
            if (!valid[p]) return Word(0);
            if (band == B) return Word(1);
            return Word(km::to_fixed_scaled(double(x[std::int64_t(band) * P + p]), scale));
        } else {
            if (band == B) return Word(1);
            return Word(x[std::int64_t(band) * P + p]);
        }
    }
}

template <typename T>
__global__ void __launch_bounds__(kSyrkThreads)
    syrk_kernel(const T* __restrict__ x, const unsigned char* __restrict__ valid, std::int64_t P, int B, double scale,
                int tiles, std::int64_t slice_pixels, u64* __restrict__ sums) {
    using S = Syrk<T>;
    using Word = typename S::Word;
    using Acc = typename S::Acc;
    constexpr int kChunkPixels = kWords * S::kPixelsPerWord;
    constexpr std::size_t kTileBytes = std::size_t(kTile) * kRowStride * sizeof(Word);
    static_assert(kTile * kTile * sizeof(Acc) <= 2 * kTileBytes, "the group reduction reuses the tiles");
    __shared__ __align__(16) unsigned char smem[2 * kTileBytes];
    Word* As = reinterpret_cast<Word*>(smem);
    Word* Bs = As + kTile * kRowStride;

    // Tile pair (ti ≤ tj) of this block, from the row-by-row order of the upper triangle.
    int rest = int(blockIdx.x), ti = 0;
    while (rest >= tiles - ti) rest -= tiles - ti++;
    const int tj = ti + rest;
    const bool diagonal = ti == tj;  // both stripes are the same: load one, read it twice
    const Word* Bt = diagonal ? As : Bs;

    const int t = int(threadIdx.x), group = t / 64, mi = (t % 64) / 8, mj = t % 8;
    Acc acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = Acc(0);

    const std::int64_t p_begin = std::int64_t(blockIdx.y) * slice_pixels;
    const std::int64_t p_end = min(P, p_begin + slice_pixels);
    for (std::int64_t p0 = p_begin; p0 < p_end; p0 += kChunkPixels) {
        for (int e = t; e < kTile * kWords; e += kSyrkThreads) {
            const int row = e / kWords, w = e % kWords;
            const std::int64_t p = p0 + std::int64_t(w) * S::kPixelsPerWord;
            As[row * kRowStride + w] = load_word<T>(x, valid, P, B, ti * kTile + row, p, scale);
            if (!diagonal) Bs[row * kRowStride + w] = load_word<T>(x, valid, P, B, tj * kTile + row, p, scale);
        }
        __syncthreads();
        const int w0 = group * kGroupWords;
#pragma unroll 4
        for (int w = w0; w < w0 + kGroupWords; ++w) {
            Word a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) a[i] = As[(mi * 4 + i) * kRowStride + w];
#pragma unroll
            for (int j = 0; j < 4; ++j) b[j] = Bt[(mj * 4 + j) * kRowStride + w];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] = S::mac(acc[i][j], a[i], b[j]);
        }
        __syncthreads();
    }

    // Reduce the groups' partials in shared memory (the tiles are free now), then flush the
    // entries i ≤ j ≤ B of the tile into the global 128-bit sums.
    __syncthreads();
    Acc* reduced = reinterpret_cast<Acc*>(smem);
    for (int g = 0; g < kGroups; ++g) {
        if (group == g)
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    Acc& r = reduced[(mi * 4 + i) * kTile + mj * 4 + j];
                    r = g == 0 ? acc[i][j] : r + acc[i][j];
                }
        __syncthreads();
    }
    const int n = B + 1;
    for (int e = t; e < kTile * kTile; e += kSyrkThreads) {
        const int i = ti * kTile + e / kTile, j = tj * kTile + e % kTile;
        const Acc v = reduced[e];
        if (i <= j && j < n && v != Acc(0)) atomic_add_i128(sums + 2 * (std::size_t(i) * n + j), i128(v));
    }
}

// Float input: marks the pixels whose bands are all finite and gathers max|x| over them (as the
// bits of a non-negative double, whose order is the integers') and their count.
template <typename T>
__global__ void __launch_bounds__(256)
    valid_pixels_kernel(const T* __restrict__ x, std::int64_t P, int B, unsigned char* __restrict__ valid,
                        u64* __restrict__ stats) {
    double local_max = 0;
    u64 local_count = 0;
    for (std::int64_t p = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < P;
         p += std::int64_t(gridDim.x) * blockDim.x) {
        bool ok = true;
        double m = 0;
        for (int b = 0; b < B; ++b) {
            const double v = double(x[std::int64_t(b) * P + p]);
            ok = ok && isfinite(v);
            if (ok) m = fmax(m, fabs(v));
        }
        valid[p] = ok ? 1 : 0;
        if (ok) local_max = fmax(local_max, m), ++local_count;
    }
    for (int offset = 16; offset > 0; offset /= 2) {
        local_max = fmax(local_max, __shfl_down_sync(0xffffffffu, local_max, offset));
        local_count += __shfl_down_sync(0xffffffffu, local_count, offset);
    }
    if ((threadIdx.x & 31) == 0) {
        if (local_max > 0) atomicMax(&stats[0], u64(__double_as_longlong(local_max)));
        if (local_count > 0) atomicAdd(&stats[1], local_count);
    }
}

// Scores of components j0 .. j0+count−1 (count ≤ KC): Y_j(p) = Σ_b (x_b(p) − mean_b)·v_j[b].
template <typename T, int KC>
__global__ void __launch_bounds__(256)
    project_kernel(const T* __restrict__ x, std::int64_t P, int B, const double* __restrict__ mean,
                   const double* __restrict__ comps, int j0, int count, double* __restrict__ out) {
    const std::int64_t p = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (p >= P) return;
    double acc[KC];
#pragma unroll
    for (int j = 0; j < KC; ++j) acc[j] = 0.0;
    bool ok = true;
    for (int b = 0; b < B; ++b) {
        const double v = double(x[std::int64_t(b) * P + p]);
        if constexpr (std::is_floating_point_v<T>) ok = ok && isfinite(v);
        const double d = __dsub_rn(v, mean[b]);
#pragma unroll
        for (int j = 0; j < KC; ++j)
            if (j < count) acc[j] = __dadd_rn(acc[j], __dmul_rn(d, comps[std::size_t(j0 + j) * B + b]));
    }
    const double nan = __longlong_as_double(0x7ff8000000000000ll);  // the host's quiet_NaN bits
#pragma unroll
    for (int j = 0; j < KC; ++j)
        if (j < count) out[std::int64_t(j0 + j) * P + p] = ok ? acc[j] : nan;
}


// Float input: the valid-pixel flags (into d_valid) and the scan (pixels used, largest |x|).
template <typename T>
PcaScan scan_cuda(const Context& ctx, const CubeView& cube, DeviceBuffer& d_valid) {
    const int B = cube.bands();
    const auto P = std::int64_t(cube.num_pixels());
    const T* x = reinterpret_cast<const T*>(cube.data());
    d_valid = DeviceBuffer(ctx, std::size_t(P));
    DeviceBuffer d_stats(ctx, 2 * sizeof(u64));
    d_stats.fill_bytes(ctx, 0);
    const dim3 block(256), grid(unsigned(std::min<std::int64_t>((P + 255) / 256, std::int64_t(sm_count(ctx)) * 8)));
    valid_pixels_kernel<T><<<grid, block, 0, stream_of(ctx)>>>(x, P, B, static_cast<unsigned char*>(d_valid.data()),
                                                               static_cast<u64*>(d_stats.data()));
    CUBEKIT_CHECK_LAUNCH(ctx, "pca valid_pixels_kernel", grid, block);
    u64 stats[2] = {0, 0};
    d_stats.download(ctx, stats, sizeof(stats));
    PcaScan s;
    std::memcpy(&s.max_abs, &stats[0], sizeof(s.max_abs));
    s.count = std::int64_t(stats[1]);
    return s;
}

template <typename T>
PcaSums sums_cuda(const Context& ctx, const CubeView& cube, std::optional<int> given_exponent) {
    using S = Syrk<T>;
    const int B = cube.bands(), n = B + 1;
    const auto P = std::int64_t(cube.num_pixels());
    const T* x = reinterpret_cast<const T*>(cube.data());
    const cudaStream_t stream = stream_of(ctx);
    const int sms = sm_count(ctx);
    PcaSums s;
    s.bands = B;

    // Float input: the pixels used, then the exponent of the fixed point (host, as on the CPU).
    DeviceBuffer d_valid;
    double scale = 1;
    std::int64_t float_count = 0;
    if constexpr (std::is_floating_point_v<T>) {
        const PcaScan scan = scan_cuda<T>(ctx, cube, d_valid);
        float_count = scan.count;
        // A tile of a scene (given exponent) may hold no usable pixel: its sums are zero.
        if (!given_exponent && float_count == 0) throw InvalidInput("pca_fit: no pixel has all its bands finite; nothing to fit");
        s.exponent = given_exponent ? *given_exponent : pca_fixed_point_exponent(scan.max_abs, float_count);
        scale = std::ldexp(1.0, s.exponent);
    }

    // Grid: the upper-triangle tiles × slices of pixels, about kBlocksPerSm blocks per SM.
    constexpr std::int64_t kChunkPixels = kWords * S::kPixelsPerWord;
    const int tiles = (n + kTile - 1) / kTile;
    const std::int64_t pairs = std::int64_t(tiles) * (tiles + 1) / 2;
    const std::int64_t chunks = (P + kChunkPixels - 1) / kChunkPixels;
    const std::int64_t wanted = std::int64_t(sms) * kBlocksPerSm;
    std::int64_t slices = std::min(chunks, std::max<std::int64_t>(1, (wanted + pairs - 1) / pairs));
    std::int64_t slice_pixels = std::min((chunks + slices - 1) / slices * kChunkPixels, S::kMaxSlice);
    slices = (P + slice_pixels - 1) / slice_pixels;
    if (pairs > 0x7fffffff || slices > 65535)
        throw InvalidInput("pca_fit: " + cube.describe() + " is too large for the CUDA sums");

    const std::size_t sum_words = 2 * std::size_t(n) * std::size_t(n);
    DeviceBuffer d_sums(ctx, sum_words * sizeof(u64));
    d_sums.fill_bytes(ctx, 0);
    const dim3 block(kSyrkThreads), grid{unsigned(pairs), unsigned(slices)};
    syrk_kernel<T><<<grid, block, 0, stream>>>(x, static_cast<const unsigned char*>(d_valid.data()), P, B, scale, tiles,
                                               slice_pixels, static_cast<u64*>(d_sums.data()));
    CUBEKIT_CHECK_LAUNCH(ctx, "pca syrk_kernel", grid, block);
    std::vector<u64> h(sum_words);
    d_sums.download(ctx, h.data(), sum_words * sizeof(u64));

    auto at = [&](int i, int j) { return read_i128(&h[2 * (std::size_t(i) * n + std::size_t(j))]); };
    s.count = std::int64_t(at(B, B));
    if (std::is_floating_point_v<T> ? s.count != float_count : s.count != P)
        throw DeviceError("pca_fit: the device counted " + std::to_string(s.count) + " pixels; expected " +
                          std::to_string(std::is_floating_point_v<T> ? float_count : P));
    s.first.resize(std::size_t(B));
    s.second.assign(std::size_t(B) * std::size_t(B), 0);
    for (int i = 0; i < B; ++i) {
        s.first[std::size_t(i)] = std::int64_t(at(i, B));
        for (int j = i; j < B; ++j) s.second[std::size_t(i) * B + std::size_t(j)] = at(i, j);
    }
    return s;
}

template <typename T, int KC>
void launch_project(const Context& ctx, const T* x, std::int64_t P, int B, const double* mean, const double* comps,
                    int j0, int count, double* out) {
    const dim3 block(256), grid(unsigned((P + 255) / 256));
    project_kernel<T, KC><<<grid, block, 0, stream_of(ctx)>>>(x, P, B, mean, comps, j0, count, out);
    CUBEKIT_CHECK_LAUNCH(ctx, "pca project_kernel", grid, block);
}

void check_device_cube(const Context& ctx, const CubeView& cube, const char* fn) {
    if (!ctx.is_cuda()) throw InvalidInput(std::string(fn) + ": the context runs on the CPU; device cubes need a CUDA context");
    check_pca_cube(shape_of(cube), fn);
    if (!cube.on_device() || cube.device() != ctx.device() || !cube.is_dense(Layout::BSQ))
        throw InvalidInput(std::string(fn) + ": the cube is " + cube.describe() + "; the device path wants a dense bsq "
                           "cube on device " + std::to_string(ctx.device()));
}

}  // namespace

PcaModel pca_fit_device(const Context& ctx, const CubeView& cube, int components) {
    check_device_cube(ctx, cube, "pca_fit");
    check_pca_components(components, cube.bands(), "pca_fit");
    const PcaSums sums = visit_dtype(cube.dtype(), [&](auto tag) { return sums_cuda<decltype(tag)>(ctx, cube, std::nullopt); });
    return pca_model_from_sums(sums, components);
}

PcaSums pca_sums_device(const Context& ctx, const CubeView& cube, std::optional<int> exponent) {
    check_device_cube(ctx, cube, "pca_fit");
    return visit_dtype(cube.dtype(), [&](auto tag) { return sums_cuda<decltype(tag)>(ctx, cube, exponent); });
}

PcaScan pca_scan_device(const Context& ctx, const CubeView& cube) {
    check_device_cube(ctx, cube, "pca_fit");
    return visit_dtype(cube.dtype(), [&](auto tag) {
        using T = decltype(tag);
        PcaScan s{std::int64_t(cube.num_pixels()), 0.0};
        if constexpr (std::is_floating_point_v<T>) {
            DeviceBuffer d_valid;
            s = scan_cuda<T>(ctx, cube, d_valid);
        }
        return s;
    });
}

void pca_transform_device(const Context& ctx, const CubeView& cube, const PcaModel& model, double* out) {
    check_device_cube(ctx, cube, "pca_transform");
    check_pca_model(model, cube.bands(), "pca_transform");
    const int B = model.bands, k = model.num_components();
    const auto P = std::int64_t(cube.num_pixels());
    // The model on the device: mean (B) then the components (k×B). Freed stream-ordered after the
    // kernels.
    std::vector<double> params(model.mean);
    params.insert(params.end(), model.components.begin(), model.components.end());
    DeviceBuffer d_params(ctx, params.size() * sizeof(double));
    d_params.upload(ctx, params.data(), params.size() * sizeof(double));
    const double* mean = static_cast<const double*>(d_params.data());
    const double* comps = mean + B;
    visit_dtype(cube.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* x = reinterpret_cast<const T*>(cube.data());
        for (int j0 = 0; j0 < k; j0 += 8) {
            const int count = std::min(8, k - j0);
            if (count <= 4) launch_project<T, 4>(ctx, x, P, B, mean, comps, j0, count, out);
            else launch_project<T, 8>(ctx, x, P, B, mean, comps, j0, count, out);
        }
    });
}

}  // namespace cubekit::detail
