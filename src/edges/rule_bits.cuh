#pragma once
// The 3×3 edge rule of the entropy detector (spec edges.md §3.6) on bit masks, for the CUDA backend
// (cuda.cu).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "edges/edges_math.hpp"

namespace cubekit::detail::edges {

// ---- The 3×3 rule on bit masks: a warp per 30×30 output tile -------------------------------------
// Lane l holds the binarised row y0 + l of the tile's 32×32 window (columns x0 .. x0 + 31, one bit
// each) as a 32-bit mask: coalesced byte loads give each lane a column, a bit-matrix transpose the rows; its neighbours' rows come by
// shuffles and the columns by shifts, and "at least 3 of the 8 neighbours differ from the centre"
// (same ≤ 5, spec §3.6) is a bit-sliced count, 32 pixels at a time. The window overlaps its
// neighbours by one pixel each side; the outputs are rows and columns 1..30. A thread does no
// per-byte index arithmetic and the maps go out as coalesced bytes.
constexpr int kBitOut = 30;     // output pixels a tile spans in x and in y
constexpr int kBitWarps = 8;    // tiles (warps) a block

/// Bits set where at least 3 of the 8 masks have that bit set.
__device__ __forceinline__ unsigned at_least_three(unsigned d0, unsigned d1, unsigned d2, unsigned d3, unsigned d4,
                                                   unsigned d5, unsigned d6, unsigned d7) {
    // Full adders to ones (s1) and twos (c_a, c_b, c_c, c1): the count is s1 + 2·(twos).
    const unsigned x01 = d0 ^ d1, s_a = x01 ^ d2, c_a = (d0 & d1) | (d2 & x01);
    const unsigned x34 = d3 ^ d4, s_b = x34 ^ d5, c_b = (d3 & d4) | (d5 & x34);
    const unsigned s_c = d6 ^ d7, c_c = d6 & d7;
    const unsigned xab = s_a ^ s_b, s1 = xab ^ s_c, c1 = (s_a & s_b) | (s_c & xab);
    const unsigned twos_ge1 = c_a | c_b | c_c | c1;
    const unsigned twos_ge2 = ((c_a | c_b) & (c_c | c1)) | (c_a & c_b) | (c_c & c1);
    return twos_ge2 | (twos_ge1 & s1);
}

/// The warp's 32×32 bit matrix transposed: lane i holds row i (bit j = column j) before, column i
/// after. Five butterfly rounds, each swapping the off-diagonal blocks of half the size.
__device__ __forceinline__ unsigned transpose32(unsigned w, int lane) {
#pragma unroll
    for (int s = 16; s >= 1; s >>= 1) {
        // mask: bits j with (j & s) != 0, e.g. 0xffff0000 for s = 16, 0xaaaaaaaa for s = 1.
        const unsigned mask = s == 16 ? 0xffff0000u : s == 8 ? 0xff00ff00u : s == 4 ? 0xf0f0f0f0u : s == 2 ? 0xccccccccu : 0xaaaaaaaau;
        const unsigned other = __shfl_xor_sync(0xffffffffu, w, s);
        w = (lane & s) ? (w & mask) | ((other >> s) & ~mask) : (w & ~mask) | ((other << s) & mask);
    }
    return w;
}

/// The edge bits of one image over a warp's 32×32 window whose column x0 + lane this lane reads
/// from p (pointing at row y0; rows j_lo .. j_hi − 1 of the window lie in the image): lane l returns
/// row y0 + l, bit i = column x0 + i, 0 outside the interior 1 ≤ x ≤ W − 2, 1 ≤ y ≤ H − 2.
__device__ __forceinline__ unsigned window_edges(const std::uint8_t* p, int W, int H, const Thr th, int x, int y0,
                                                 int j_lo, int j_hi, int lane) {
    const bool column_in = x >= 0 && x < W;
    // This lane's column of the window, binarised: bit j = row y0 + j (32 independent loads, all in
    // flight at once).
    unsigned bits = 0;
#pragma unroll
    for (int j = 0; j < 32; ++j)
        if (column_in && j >= j_lo && j < j_hi) bits |= unsigned(binarize(p[std::ptrdiff_t(j) * W], th)) << j;
    // This lane's row of the window, bit i = column x0 + i (0 outside the image).
    const unsigned row = transpose32(bits, lane);
    const unsigned up = __shfl_up_sync(0xffffffffu, row, 1), down = __shfl_down_sync(0xffffffffu, row, 1);
    // Bit i of (v << 1) is bit i − 1 of v: the left neighbour; of (v >> 1) the right one.
    unsigned edge = at_least_three(row ^ up, row ^ down, row ^ (row << 1), row ^ (row >> 1), row ^ (up << 1),
                                   row ^ (up >> 1), row ^ (down << 1), row ^ (down >> 1));
    // Only interior pixels (1 ≤ x ≤ W − 2, 1 ≤ y ≤ H − 2) can be edges.
    const unsigned interior_columns = __ballot_sync(0xffffffffu, x >= 1 && x <= W - 2);
    const int y_mine = y0 + lane;
    if (!(y_mine >= 1 && y_mine <= H - 2)) edge = 0;
    return edge & interior_columns;
}

/// grid (⌈tiles / kBitWarps⌉, n): image b's edge map, tile by tile.
__global__ void __launch_bounds__(32 * kBitWarps) edge_maps_bits_kernel(const std::uint8_t* __restrict__ images, int W, int H,
                                                                        int tiles_x, int tiles, const Thr* __restrict__ t,
                                                                        std::uint8_t* __restrict__ out) {
    const int lane = threadIdx.x & 31, tile = blockIdx.x * kBitWarps + (threadIdx.x >> 5);
    if (tile >= tiles) return;  // the whole warp
    const std::size_t plane = std::size_t(W) * H, b = blockIdx.y;
    const int x0 = (tile % tiles_x) * kBitOut - 1, y0 = (tile / tiles_x) * kBitOut - 1;  // window's first column, row
    const int x = x0 + lane;
    const int j_lo = y0 < 0 ? -y0 : 0, j_hi = H - y0 < 32 ? H - y0 : 32;
    const std::ptrdiff_t at = std::ptrdiff_t(y0) * W + x;  // this lane's column, window row 0
    const Thr th = t[b];  // a copy: read once, not after every load
    const unsigned edge = window_edges(images + b * plane + at, W, H, th, x, y0, j_lo, j_hi, lane);
    const unsigned column = transpose32(edge, lane);  // bit j: row y0 + j of this lane's column
    const bool writes_column = lane >= 1 && lane <= kBitOut && x < W;
    std::uint8_t* q = out + b * plane + at;
#pragma unroll
    for (int j = 1; j <= kBitOut; ++j)
        if (writes_column && j < j_hi) q[std::ptrdiff_t(j) * W] = std::uint8_t((column >> j) & 1u);
}

constexpr int kVoteGroup = 8;  // images a warp votes over: its counts fit 4 bit slices and a byte

/// grid (⌈tiles / kBitWarps⌉, ⌈n / kVoteGroup⌉): how many images of group g have an edge at each
/// pixel, a byte plane per group at partial + g·plane. The counts of a row are kept in bit slices
/// (count at column i = Σ_k bit i of c[k] · 2^k), one ripple increment per image for 32 pixels.
__global__ void __launch_bounds__(32 * kBitWarps) edge_vote_group_kernel(const std::uint8_t* __restrict__ images, int W, int H,
                                                                         int n, int tiles_x, int tiles, const Thr* __restrict__ t,
                                                                         std::uint8_t* __restrict__ partial) {
    const int lane = threadIdx.x & 31, tile = blockIdx.x * kBitWarps + (threadIdx.x >> 5);
    if (tile >= tiles) return;  // the whole warp
    const std::size_t plane = std::size_t(W) * H;
    const int first = blockIdx.y * kVoteGroup, last = n < first + kVoteGroup ? n : first + kVoteGroup;
    const int x0 = (tile % tiles_x) * kBitOut - 1, y0 = (tile / tiles_x) * kBitOut - 1;
    const int x = x0 + lane;
    const int j_lo = y0 < 0 ? -y0 : 0, j_hi = H - y0 < 32 ? H - y0 : 32;
    const std::ptrdiff_t at = std::ptrdiff_t(y0) * W + x;
    unsigned c[4] = {};
    for (int b = first; b < last; ++b) {
        const Thr th = t[b];
        unsigned carry = window_edges(images + std::size_t(b) * plane + at, W, H, th, x, y0, j_lo, j_hi, lane);
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const unsigned next = c[k] & carry;
            c[k] ^= carry;
            carry = next;
        }
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) c[k] = transpose32(c[k], lane);  // bit j: row y0 + j of this lane's column
    const bool writes_column = lane >= 1 && lane <= kBitOut && x < W;
    std::uint8_t* q = partial + std::size_t(blockIdx.y) * plane + at;
#pragma unroll
    for (int j = 1; j <= kBitOut; ++j)
        if (writes_column && j < j_hi)
            q[std::ptrdiff_t(j) * W] = std::uint8_t(((c[0] >> j) & 1u) | (((c[1] >> j) & 1u) << 1) | (((c[2] >> j) & 1u) << 2) |
                                                    (((c[3] >> j) & 1u) << 3));
}

/// Per pixel: the groups' counts added (count) and the vote (out = count ≥ needed).
__global__ void edge_vote_sum_kernel(const std::uint8_t* __restrict__ partial, std::size_t plane, int groups, int needed,
                                     std::uint16_t* __restrict__ count, std::uint8_t* __restrict__ out) {
    for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < plane; i += std::size_t(gridDim.x) * blockDim.x) {
        int votes = 0;
        for (int g = 0; g < groups; ++g) votes += partial[std::size_t(g) * plane + i];
        count[i] = std::uint16_t(votes);
        out[i] = std::uint8_t(votes >= needed);
    }
}

}  // namespace cubekit::detail::edges
