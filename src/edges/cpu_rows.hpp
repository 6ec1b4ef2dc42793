#pragma once
// Row kernels of the entropy edge detector's CPU reference (cpu.cpp). The stages read the n images
// one image row at a time, in the layout the images already have, so a pixel-interleaved cube is
// read where it is (no transpose to planes) and each stage reads it once, in memory order:
//   ImageRows   the n images: sample (x, y, b) at base[x·sx + y·sy + b·sb], with rows contiguous
//               (sx = 1: BSQ, BIL) or spectra contiguous (sb = 1: BIP)
//   row block   row y of the n images, dense: [b][x] for the first kind, [x][b] for the second;
//               a block is an ImageRows of one row (sy = 0)
// Every kernel works on 0/1 maps in blocks; the per-sample formulas are edges_math.hpp's.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "edges/edges_math.hpp"

namespace cubekit::detail::edges {

struct ImageRows {
    const std::uint8_t* base = nullptr;
    std::int64_t sx = 1, sy = 0, sb = 0;
    int W = 0, n = 0;
    bool pixel_major = false;  ///< sb = 1: a pixel's n samples are contiguous

    std::size_t block() const { return std::size_t(W) * std::size_t(n); }
    /// Offset of the next pixel within a block.
    std::size_t step() const { return pixel_major ? std::size_t(n) : 1; }
    const std::uint8_t* row(int y) const { return base + std::int64_t(y) * sy; }
    /// The dense row block at `p`, in this layout.
    ImageRows block_at(const std::uint8_t* p) const {
        return pixel_major ? ImageRows{p, n, 0, 1, W, n, true} : ImageRows{p, 1, 0, W, W, n, false};
    }
};

/// The thresholds of the n images, laid out for the binarisation loops: per image (rows
/// contiguous), or repeated per pixel along a block (spectra contiguous), so that the loop over a
/// block is one flat loop whatever n is.
struct BlockThresholds {
    std::vector<Thr> per_image;
    std::vector<std::uint8_t> t1, t2, t3;  // [x·n + b] (pixel-major only)

    BlockThresholds(const ImageRows& im, const Thr* t) : per_image(t, t + im.n) {
        if (!im.pixel_major) return;
        t1.resize(im.block()), t2.resize(im.block()), t3.resize(im.block());
        for (std::size_t i = 0; i < im.block(); ++i) {
            const Thr& s = t[i % std::size_t(im.n)];
            t1[i] = s.t1, t2[i] = s.t2, t3[i] = s.t3;
        }
    }
};

/// binarize() (spec §3.5) with & and | in place of && and ||, so that loops over bytes vectorise.
inline std::uint8_t binarize_bytes(std::uint8_t v, std::uint8_t t1, std::uint8_t t2, std::uint8_t t3) {
    return std::uint8_t((std::uint8_t(t2 <= v) & std::uint8_t(v < t1)) | std::uint8_t(v >= t3));
}

// The loops below copy the sizes and strides into locals: a store through a uint8_t pointer may
// alias anything, and the compiler would reload them after every store (and not vectorise).

/// E2 (spec §3.5) of row y into a dense block.
inline void binarize_row(const ImageRows& im, const BlockThresholds& t, int y, std::uint8_t* f) {
    const std::uint8_t* src = im.row(y);
    const std::size_t W = std::size_t(im.W), n = std::size_t(im.n);
    if (!im.pixel_major) {
        const std::int64_t sb = im.sb;
        for (std::size_t b = 0; b < n; ++b) {
            const std::uint8_t* v = src + std::int64_t(b) * sb;
            const Thr tb = t.per_image[b];
            std::uint8_t* out = f + b * W;
            for (std::size_t x = 0; x < W; ++x) out[x] = binarize_bytes(v[x], tb.t1, tb.t2, tb.t3);
        }
        return;
    }
    const std::uint8_t *t1 = t.t1.data(), *t2 = t.t2.data(), *t3 = t.t3.data();
    if (im.sx == im.n) {  // the row's spectra are contiguous too: one flat loop
        const std::size_t size = W * n;
        for (std::size_t i = 0; i < size; ++i) f[i] = binarize_bytes(src[i], t1[i], t2[i], t3[i]);
        return;
    }
    const std::int64_t sx = im.sx;
    for (std::size_t x = 0; x < W; ++x) {
        const std::uint8_t* v = src + std::int64_t(x) * sx;
        std::uint8_t* out = f + x * n;
        for (std::size_t b = 0; b < n; ++b) out[b] = binarize_bytes(v[b], t1[b], t2[b], t3[b]);
    }
}

/// The 3×3 rule (spec §3.6) on the 0/1 blocks of rows y−1, y, y+1 (a, c, d) into e; pixels 0 and
/// W−1 get 0 (W ≥ 3). With 0/1 values a neighbour differs from the centre iff their xor is 1, so
/// `same` = 8 − (the xors' sum), and the loop runs over the whole block at once.
inline void rule_block(const ImageRows& blk, const std::uint8_t* a, const std::uint8_t* c, const std::uint8_t* d,
                       std::uint8_t* e) {
    const std::size_t s = blk.step(), size = blk.block();
    // Pointers to the left and right neighbours, so that every access is base[i] (vectorisable).
    const std::uint8_t *al = a - s, *ar = a + s, *cl = c - s, *cr = c + s, *dl = d - s, *dr = d + s;
    for (std::size_t i = s; i < size - s; ++i) {
        const std::uint8_t k = c[i];
        // 8-bit sums (at most 8), so that the vector loop stays in bytes.
        const std::uint8_t differ = std::uint8_t((al[i] ^ k) + (a[i] ^ k) + (ar[i] ^ k) + (cl[i] ^ k) + (cr[i] ^ k) +
                                                 (dl[i] ^ k) + (d[i] ^ k) + (dr[i] ^ k));
        e[i] = std::uint8_t(differ >= 3);  // edge_from_same(8 − differ): same ≤ 5
    }
    const std::size_t W = std::size_t(blk.W);
    if (blk.pixel_major) {
        std::memset(e, 0, s);
        std::memset(e + size - s, 0, s);
        return;
    }
    const std::size_t n = std::size_t(blk.n);
    for (std::size_t b = 0; b < n; ++b) e[b * W] = e[b * W + W - 1] = 0;
}

/// cnt[x] = how many of the n maps are set (nonzero) at pixel x of row y.
inline void count_row(const ImageRows& im, int y, std::uint32_t* cnt) {
    const std::uint8_t* src = im.row(y);
    const std::size_t W = std::size_t(im.W), n = std::size_t(im.n);
    if (im.pixel_major) {
        const std::int64_t sx = im.sx;
        for (std::size_t x = 0; x < W; ++x) {
            const std::uint8_t* v = src + std::int64_t(x) * sx;
            std::uint32_t s = 0;
            for (std::size_t b = 0; b < n; ++b) s += v[b] != 0;
            cnt[x] = s;
        }
        return;
    }
    std::fill(cnt, cnt + W, 0u);
    const std::int64_t sb = im.sb;
    for (std::size_t b = 0; b < n; ++b) {
        const std::uint8_t* v = src + std::int64_t(b) * sb;
        for (std::size_t x = 0; x < W; ++x) cnt[x] += v[x] != 0;
    }
}

/// The vote (spec §3.8) of one row from its counts: count (u16 values) and out = count ≥ needed.
inline void vote_row(const std::uint32_t* cnt, int W, int needed, std::uint16_t* count, std::uint8_t* out) {
    const std::uint32_t need = std::uint32_t(needed);
    for (int x = 0; x < W; ++x) {
        count[x] = std::uint16_t(cnt[x]);
        out[x] = std::uint8_t(cnt[x] >= need);
    }
}

/// Row y of the n dense BSQ planes at `planes` (plane size P) from a dense block.
inline void store_row(const ImageRows& blk, const std::uint8_t* block, int y, std::size_t P, std::uint8_t* planes) {
    const std::size_t W = std::size_t(blk.W), n = std::size_t(blk.n);
    std::uint8_t* dst = planes + std::size_t(y) * W;
    if (!blk.pixel_major) {
        for (std::size_t b = 0; b < n; ++b) std::memcpy(dst + b * P, block + b * W, W);
        return;
    }
    // A transpose, by tiles of pixels, so that the tile's spectra stay in L1 across the bands.
    constexpr std::size_t kTile = 64;
    for (std::size_t x0 = 0; x0 < W; x0 += kTile) {
        const std::size_t x1 = std::min(W, x0 + kTile);
        for (std::size_t b = 0; b < n; ++b)
            for (std::size_t x = x0; x < x1; ++x) dst[b * P + x] = block[x * n + b];
    }
}

}  // namespace cubekit::detail::edges
