#pragma once
// Weighted k-means over the distinct colours of a u8 image of at most 3 bands (spec kmeans.md
// §4.2, "optional for photos"), included by cuda.cu after lloyd_kernels.cuh. A photo holds far
// fewer distinct colours than pixels (the 4K benchmark photo: 829,582 in 8.3 M), so each Lloyd
// pass and the final pass run over the colours, each weighted by its pixel count, and one pass
// over the pixels paints the result.
//
// Why the result is the CPU's bit for bit: pixels of one colour have the same distances, hence
// the same label (ties: lowest index, as everywhere); the sums are exact integers, so w·x added
// once equals x added w times; the counts likewise; the exact fixed-point inertia is w times the
// colour's exact distance. Only the reported f64 inertia (w·d summed in another order) differs,
// within the 1e-9 the contract allows. The relocation (§3.7) still ranks the pixels themselves
// (cuda.cu's relocate_empty reads the image), so its ties by raster index are untouched.
#include "kmeans/lloyd_kernels.cuh"

namespace cubekit::detail {
namespace {

constexpr int kColourBandsMax = 3;  // 8 bits a band: 2^24 bins at most

// The colours of a pass: each one's samples packed 8 bits a band (band b in bits 8b..8b+7),
// in ascending order of their bins, and their pixel counts.
struct Colours {
    const unsigned* packed;
    const unsigned* weights;
    std::int64_t count;
};

// 8-bit x with two zero bits after each bit (x's bit i at bit 3i), or one zero bit (bit 2i).
__device__ __forceinline__ unsigned spread3(unsigned x) {
    x = (x | (x << 8)) & 0x0000F00Fu;
    x = (x | (x << 4)) & 0x000C30C3u;
    return (x | (x << 2)) & 0x00249249u;
}
__device__ __forceinline__ unsigned spread2(unsigned x) {
    x = (x | (x << 4)) & 0x0F0Fu;
    x = (x | (x << 2)) & 0x3333u;
    return (x | (x << 1)) & 0x5555u;
}

// A pixel's histogram bin: its bands' bits interleaved (Morton order), so that similar colours,
// which neighbouring pixels of a photo have, share cache lines of the 2^(8m)-bin table. Measured
// on the H100 (2026-11-27, 4K photo): the count took 172 µs with the bands' bytes side by side.
__device__ __forceinline__ unsigned colour_bin(const std::uint8_t* x, int m) {
    if (m == 3) return spread3(x[0]) | (spread3(x[1]) << 1) | (spread3(x[2]) << 2);
    if (m == 2) return spread2(x[0]) | (spread2(x[1]) << 1);
    return x[0];
}

// The packed samples of the colour in `bin` (colour_bin's inverse, once per colour).
__device__ unsigned colour_of_bin(unsigned bin, int m) {
    unsigned packed = 0;
    for (int i = 0; i < 8; ++i)
        for (int b = 0; b < m; ++b) packed |= ((bin >> (i * m + b)) & 1u) << (8 * b + i);
    return packed;
}

// Pixel counts per bin: lanes holding the same colour add once, through their leader (a uniform
// sky would otherwise queue every pixel on one address).
__global__ void count_colours(Pixels<std::uint8_t> px, std::int64_t n, int m, unsigned* bins) {
    const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
    for (std::int64_t base = std::int64_t(blockIdx.x) * blockDim.x; base < n; base += stride) {
        const std::int64_t i = base + threadIdx.x;
        const bool ok = i < n;
        const unsigned bin = ok ? colour_bin(px(i), m) : 0xFFFFFFFFu;  // (a real bin has ≤ 24 bits)
        const unsigned group = __match_any_sync(0xffffffffu, bin);
        if (ok && (threadIdx.x & 31) == __ffs(group) - 1) atomicAdd(&bins[bin], unsigned(__popc(group)));
    }
}

struct NonEmptyBin {
    const unsigned* bins;
    __device__ bool operator()(unsigned bin) const { return bins[bin] != 0; }
};

// For the selected (non-empty) bins: each colour's packed samples and pixel count.
__global__ void describe_colours(const unsigned* selected, std::int64_t count, int m, const unsigned* bins,
                                 unsigned* packed, unsigned* weights) {
    const std::int64_t u = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (u >= count) return;
    packed[u] = colour_of_bin(selected[u], m);
    weights[u] = bins[selected[u]];
}

template <typename D, int M>
__device__ __forceinline__ void decode_colour(unsigned packed, std::uint8_t (&x)[M], D (&xd)[M]) {
#pragma unroll
    for (int b = 0; b < M; ++b) {
        x[b] = std::uint8_t(packed >> (8 * b));
        xd[b] = D(x[b]);
    }
}

// One weighted Lloyd pass (§3.5 over the colours): the same nearest-centroid search, sums, counts
// and inertia partials as assign_accumulate, each colour counted w times.
template <typename D, int M, bool Shared>
__global__ void __launch_bounds__(kBlock) assign_colours(Colours colours, int k, const D* __restrict__ cent_g,
                                                         u64* sums_g, u64* counts_g, double* inertia_partial,
                                                         const Status* status) {
    if (status->done || status->stalled) return;
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ double scratch[kBlock];
    const auto [cent, sums] = pass_setup<std::uint8_t, D, Shared>(smem, cent_g, k, M, sums_g, counts_g, 1.0, true);
    double acc = 0;
    const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
    for (std::int64_t base = std::int64_t(blockIdx.x) * blockDim.x; base < colours.count; base += stride) {
        const std::int64_t u = base + threadIdx.x;
        const bool ok = u < colours.count;
        std::uint8_t x[M];
        D xd[M];
        decode_colour(ok ? colours.packed[u] : 0u, x, xd);
        const unsigned w = ok ? colours.weights[u] : 0u;
        D best = 0;
        const int label = ok ? km::nearest(xd, cent, k, M, best) : -1;
        if (ok) acc += double(w) * double(best);
        sums.add_weighted(label, w, [&](int b) { return x[b]; });
    }
    const double total = block_sum(acc, scratch);
    if (threadIdx.x == 0) inertia_partial[blockIdx.x] = total;
    sums.flush(k);
}

// The final pass over the colours (§3.8, as final_assign): counts, f64 inertia partials, the exact
// fixed-point inertia (qpaint ≠ nullptr) and each colour's label (colour_label ≠ nullptr).
template <typename D, int M>
__global__ void __launch_bounds__(kBlock) final_colours(Colours colours, int k, const D* cent, const std::int64_t* qpaint,
                                                        double scale_d, int* colour_label, u64* counts,
                                                        double* inertia_partial, u64* exact, bool shared_counts) {
    __shared__ double scratch[kBlock];
    extern __shared__ __align__(16) unsigned char smem[];
    auto* s_counts = reinterpret_cast<unsigned*>(smem);  // a block counts at most n < 2^31 pixels
    if (shared_counts)
        for (int t = threadIdx.x; t < k; t += blockDim.x) s_counts[t] = 0;
    __syncthreads();
    double acc = 0;
    i128 ex = 0;
    for (std::int64_t u = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; u < colours.count;
         u += std::int64_t(gridDim.x) * blockDim.x) {
        std::uint8_t x[M];
        D xd[M];
        decode_colour(colours.packed[u], x, xd);
        const unsigned w = colours.weights[u];
        D d;
        const int j = km::nearest(xd, cent, k, M, d);
        acc += double(w) * double(d);
        if (shared_counts) atomicAdd(&s_counts[j], w);
        else atomicAdd(&counts[j], u64(w));
        if (colour_label) colour_label[u] = j;
        if (qpaint) ex += i128(w) * km::exact_distance(x, qpaint + std::size_t(j) * M, M, scale_d);
    }
    const double total = block_sum(acc, scratch);
    if (threadIdx.x == 0) inertia_partial[blockIdx.x] = total;
    if (shared_counts)
        for (int t = threadIdx.x; t < k; t += blockDim.x)
            if (s_counts[t] != 0) atomicAdd(&counts[t], u64(s_counts[t]));
    if (qpaint && ex != 0) atomic_add_i128(exact, ex);
}

// bins[bin of colour u] = its label: the histogram's bins become the bin → label table.
__global__ void scatter_colour_labels(const unsigned* selected, std::int64_t count, const int* colour_label,
                                      unsigned* bins) {
    const std::int64_t u = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (u < count) bins[selected[u]] = unsigned(colour_label[u]);
}

// relabel_paint for the colour path: each valid pixel's label comes from its colour's entry of
// the bin → label table, then the sort's renumbering; the painting is relabel_paint's.
__global__ void relabel_paint_colours(LabelsOut labels, std::int64_t pixels, const std::uint8_t* flags,
                                      const unsigned* bin_label, const int* new_label, const std::uint8_t* palette,
                                      const std::uint8_t* x, int m, PaintOut<std::uint8_t> quantized) {
    const std::int64_t p = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (p >= pixels) return;
    const bool valid = !flags || flags[p];
    const int r = valid ? new_label[bin_label[colour_bin(x + p * m, m)]] : -1;
    labels[p] = r;
    if (!quantized.data) return;
    const std::uint8_t* from = r >= 0 ? palette + std::size_t(r) * m : x + p * m;
    for (int b = 0; b < m; ++b) quantized(p, b) = from[b];
}

}  // namespace
}  // namespace cubekit::detail
