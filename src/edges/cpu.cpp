// The entropy edge detector's CPU reference (spec edges.md §3): the pipeline of edges_internal.hpp
// over plain loops, OpenMP over chunks of rows (and images). The images are read where they are
// when their rows or their spectra are contiguous (a u8 BSQ, BIL or BIP cube is its own E1; other
// types are quantised once into planes of the input's pixel order), one image row at a time
// (cpu_rows.hpp): the binary maps and the per-image edge maps of a vote live only as a few row
// blocks per thread, so the default vote reads the cube twice (histograms, then the maps) and
// writes nothing but its outputs. The stages' outputs are dense BSQ planes, written straight into
// the caller's outputs when those are dense BSQ. Every stage's result is the same for any thread
// count: its integer sums (histograms, counts) are exact, and each output row has one writer.
#include <omp.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "cubekit/linalg.hpp"
#include "edges/cpu_rows.hpp"
#include "edges/edges_internal.hpp"
#include "labels/labels_internal.hpp"

namespace cubekit::detail {

namespace {

using edges::ImageRows;
using edges::Output;
using edges::Thr;

constexpr std::int64_t kParallelSamples = 32768;  // below this, one thread (no team start-up)

std::size_t round_up64(std::size_t bytes) { return (bytes + 63) / 64 * 64; }

/// n planes of W×H samples: owned (dense BSQ), a caller's dense BSQ output, or (read-only) the
/// input itself with its strides.
struct Planes {
    std::unique_ptr<std::uint8_t[]> owned;  // not zeroed: every stage writes its planes in full
    std::uint8_t* ptr = nullptr;
    const std::uint8_t* input = nullptr;
    Strides strides;
    const std::uint8_t* data() const { return input ? input : ptr; }
};

/// Runs body(y0, y1, scratch) over chunks of at least min_rows of the H rows, in parallel (dynamic
/// schedule, about four chunks per thread); each thread owns `scratch` bytes (64-byte aligned
/// pieces), allocated here, outside the region.
template <class Body>
void for_row_chunks(int threads, int H, int min_rows, std::size_t scratch, bool parallel, Body&& body) {
    const int T = parallel ? std::max(threads, 1) : 1;
    const int rows = std::max(min_rows, (H + 4 * T - 1) / (4 * T));
    const int chunks = (H + rows - 1) / rows;
    scratch = round_up64(scratch);
    std::unique_ptr<std::uint8_t[]> pool(new std::uint8_t[scratch * std::size_t(T) + 64]);
    std::uint8_t* base = pool.get() + (64 - reinterpret_cast<std::uintptr_t>(pool.get()) % 64) % 64;
#pragma omp parallel num_threads(T) if (T > 1 && chunks > 1)
    {
        std::uint8_t* mine = base + scratch * std::size_t(omp_get_thread_num());
#pragma omp for schedule(dynamic)
        for (int k = 0; k < chunks; ++k) body(k * rows, std::min(H, (k + 1) * rows), mine);
    }
}

struct CpuOps {
    const Context& ctx;
    const CubeView& cube;
    const EdgeOutputs& outputs;
    int W = 0, H = 0;
    const EdgeSceneStats* given = nullptr;  // a tile of a scene: the scene's ranges and thresholds
    std::size_t plane() const { return std::size_t(W) * std::size_t(H); }
    bool parallel(int n) const { return std::int64_t(plane()) * n >= kParallelSamples; }
    MutableCubeView dense_view(std::uint8_t* p, int n, DType t = DType::U8, Layout l = Layout::BSQ) const {
        return MutableCubeView::host(p, W, H, n, t, dense_strides(W, H, n, l));
    }
    /// The n images of `p` as row readers.
    ImageRows rows(const Planes& p, int n) const {
        const Strides& s = p.strides;
        return {p.data(), s.x, s.y, s.b, W, n, s.x != 1 && W > 1};
    }

    Planes alloc(int n, std::size_t element = 1, Layout l = Layout::BSQ) {
        Planes p;
        p.owned.reset(new std::uint8_t[plane() * std::size_t(n) * element]);
        p.ptr = p.owned.get();
        p.strides = dense_strides(W, H, n, l);
        return p;
    }
    Planes output(Output which, int n) {
        const MutableCubeView& v = edges::view_of(outputs, which);
        if (v.data() && v.is_dense(Layout::BSQ))
            return Planes{{}, reinterpret_cast<std::uint8_t*>(v.data()), nullptr, dense_strides(W, H, n, Layout::BSQ)};
        return alloc(n, which == Output::VoteCount ? sizeof(std::uint16_t) : 1);
    }
    bool wants(Output which) const { return edges::view_of(outputs, which).data() != nullptr; }
    void deliver(Planes& p, Output which) {
        const MutableCubeView& v = edges::view_of(outputs, which);
        if (!v.data() || reinterpret_cast<std::uint8_t*>(v.data()) == p.ptr) return;
        copy_cube(ctx, dense_view(p.ptr, v.bands(), v.dtype()), v);
    }

    /// E1: a u8 cube whose rows or spectra are contiguous is read where it is; any other is
    /// quantised (or copied) once, into planes of the input's pixel order.
    Planes quantize(Quantize mode) {
        const Strides s = cube.strides();
        const bool readable = s.x == 1 || W == 1 || s.b == 1 || cube.bands() == 1;
        if (cube.dtype() == DType::U8 && readable)
            return Planes{{}, nullptr, reinterpret_cast<const std::uint8_t*>(cube.data()), s};
        const Layout l = s.b == 1 && s.x != 1 ? Layout::BIP : Layout::BSQ;
        Planes q = alloc(cube.bands(), 1, l);
        const MutableCubeView out = dense_view(q.ptr, cube.bands(), DType::U8, l);
        if (given && cube.dtype() != DType::U8) quantize_with_ranges_cpu(ctx, cube, out, given->lo, given->hi);
        else quantize_cpu(ctx, cube, out, mode);
        return q;
    }

    Planes pca_images(int k, std::vector<double>& ratios) {
        std::vector<double> scores(plane() * std::size_t(k));
        const auto d_scores = MutableCubeView::host(scores.data(), W, H, k, DType::F64, dense_strides(W, H, k, Layout::BSQ));
        ratios = pca_into(ctx, cube, d_scores, {.components = k}).explained_variance_ratio;
        Planes q = alloc(k);
        quantize_cpu(ctx, d_scores, dense_view(q.ptr, k), Quantize::PerBand);
        return q;
    }

    std::vector<std::uint32_t> histograms(const ImageRows& im);
    std::vector<Thr> thresholds(const Planes& images, int n, double q) {
        const std::vector<std::uint32_t> hist = histograms(rows(images, n));
        std::vector<Thr> t(static_cast<std::size_t>(n));
#pragma omp parallel for schedule(dynamic) num_threads(ctx.threads()) if (n > 1)
        for (int b = 0; b < n; ++b)
            t[std::size_t(b)] = edges::thresholds_from_histogram(&hist[std::size_t(b) * 256], q);
        return t;
    }
    std::vector<Thr> thresholds_of(const std::vector<EdgeThresholds>& t) { return edges::from_public(t); }
    std::vector<Thr> threshold_mean(const std::vector<Thr>& t, int) { return edges::threshold_mean_of(t); }
    void to_host(const std::vector<Thr>& t, int n, std::vector<EdgeThresholds>& dest) { dest = edges::to_public(t.data(), n); }
    void finish() {}

    Planes band_mean(const Planes& images, int n);

    /// Runs sink(y, f, extra) for every row y, f the dense block of its binary maps (E2); each
    /// thread has `extra` bytes of scratch for the sink.
    template <class Sink>
    void binary_rows(const Planes& images, const std::vector<Thr>& t, int n, std::size_t extra, Sink&& sink) {
        const ImageRows im = rows(images, n);
        const edges::BlockThresholds bt(im, t.data());
        const std::size_t blk = round_up64(im.block());
        for_row_chunks(ctx.threads(), H, 1, blk + extra, parallel(n), [&](int y0, int y1, std::uint8_t* s) {
            for (int y = y0; y < y1; ++y) {
                edges::binarize_row(im, bt, y, s);
                sink(y, s, s + blk);
            }
        });
    }
    /// Runs sink(y, e, extra) for every row y, e the dense block of the 3×3 rule's edge maps of the
    /// 0/1 rows that load(y, dst) writes (a row block in `layout`'s order); rows 0 and H−1, and
    /// everything when W or H < 3, are 0. Each thread keeps the blocks of rows y−1..y+1 in a ring.
    template <class Load, class Sink>
    void edge_rows(const ImageRows& layout, int n, std::size_t extra, Load&& load, Sink&& sink) {
        const std::size_t size = layout.block(), blk = round_up64(size);
        const ImageRows shape = layout.block_at(nullptr);
        for_row_chunks(ctx.threads(), H, 4, 4 * blk + extra, parallel(n), [&](int y0, int y1, std::uint8_t* s) {
            std::uint8_t* e = s + 3 * blk;
            auto slot = [&](int y) { return s + std::size_t(y % 3) * blk; };
            int loaded = std::max(y0 - 1, 0) - 1;  // the last row in the ring
            for (int y = y0; y < y1; ++y) {
                if (y == 0 || y == H - 1 || W < 3) {
                    std::fill(e, e + size, std::uint8_t(0));
                } else {
                    for (; loaded < y + 1; ++loaded) load(loaded + 1, slot(loaded + 1));
                    edges::rule_block(shape, slot(y - 1), slot(y), slot(y + 1), e);
                }
                sink(y, e, e + blk);
            }
        });
    }
    template <class Sink>
    void image_edge_rows(const Planes& images, const std::vector<Thr>& t, int n, std::size_t extra, Sink&& sink) {
        const ImageRows im = rows(images, n);
        const edges::BlockThresholds bt(im, t.data());
        edge_rows(im, n, extra, [&](int y, std::uint8_t* dst) { edges::binarize_row(im, bt, y, dst); }, sink);
    }

    std::size_t counts_bytes() const { return sizeof(std::uint32_t) * std::size_t(W); }
    /// The vote of the n maps' row `r` (an ImageRows: the maps, or a row block with r = 0) into
    /// row y of the vote outputs; scratch: counts_bytes().
    void vote_row(const ImageRows& maps, int r, int y, int needed, Planes& count, Planes& out, std::uint8_t* scratch) {
        auto* cnt = reinterpret_cast<std::uint32_t*>(scratch);
        edges::count_row(maps, r, cnt);
        const std::size_t o = std::size_t(y) * std::size_t(W);
        edges::vote_row(cnt, W, needed, reinterpret_cast<std::uint16_t*>(count.ptr) + o, out.ptr + o);
    }

    void binary_maps(const Planes& images, const std::vector<Thr>& t, int n, Planes& f) {
        const ImageRows im = rows(images, n);
        binary_rows(images, t, n, 0, [&](int y, const std::uint8_t* blk, std::uint8_t*) {
            edges::store_row(im.block_at(blk), blk, y, plane(), f.ptr);
        });
    }
    void edge_maps(const Planes& images, const std::vector<Thr>& t, int n, Planes& e) {
        const ImageRows im = rows(images, n);
        image_edge_rows(images, t, n, 0, [&](int y, const std::uint8_t* blk, std::uint8_t*) {
            edges::store_row(im.block_at(blk), blk, y, plane(), e.ptr);
        });
    }
    void edges_of_binary(const Planes& f, Planes& e) {
        const ImageRows im = rows(f, 1);
        edge_rows(
            im, 1, 0, [&](int y, std::uint8_t* dst) { std::copy_n(im.row(y), W, dst); },
            [&](int y, const std::uint8_t* blk, std::uint8_t*) { std::copy_n(blk, W, e.ptr + std::size_t(y) * W); });
    }

    /// Counts the set maps per pixel into `count` (u16 values) and writes count ≥ needed to `out`.
    void vote(const Planes& maps, int n, int needed, Planes& count, Planes& out) {
        const ImageRows im = rows(maps, n);
        for_row_chunks(ctx.threads(), H, 1, counts_bytes(), parallel(n), [&](int y0, int y1, std::uint8_t* s) {
            for (int y = y0; y < y1; ++y) vote_row(im, y, y, needed, count, out, s);
        });
    }
    void edge_vote(const Planes& images, const std::vector<Thr>& t, int n, int needed, Planes& count, Planes& out) {
        const ImageRows im = rows(images, n);
        image_edge_rows(images, t, n, counts_bytes(), [&](int y, const std::uint8_t* blk, std::uint8_t* s) {
            vote_row(im.block_at(blk), 0, y, needed, count, out, s);
        });
    }
    void binary_vote(const Planes& images, const std::vector<Thr>& t, int n, int needed, Planes& count, Planes& out) {
        const ImageRows im = rows(images, n);
        binary_rows(images, t, n, counts_bytes(), [&](int y, const std::uint8_t* blk, std::uint8_t* s) {
            vote_row(im.block_at(blk), 0, y, needed, count, out, s);
        });
    }

    void remove_small(Planes& maps, int n, std::int64_t min_size, int connectivity) {
        remove_small_components_cpu(ctx, maps.ptr, W, H, n, min_size, connectivity);
    }
};

// Histograms -----------------------------------------------------------------------------------

// Adds rows y0..y1−1 of image b to h, through four sub-histograms: neighbouring samples are often
// equal, and four counters break the chain of increments of one counter.
void add_image_rows(const ImageRows& im, int b, int y0, int y1, std::uint32_t* h) {
    std::uint32_t sub[4][256] = {};
    const std::int64_t sx = im.pixel_major ? im.sx : 1;
    for (int y = y0; y < y1; ++y) {
        const std::uint8_t* v = im.row(y) + std::int64_t(b) * im.sb;
        int x = 0;
        for (; x + 4 <= im.W; x += 4) {
            ++sub[0][v[x * sx]];
            ++sub[1][v[(x + 1) * sx]];
            ++sub[2][v[(x + 2) * sx]];
            ++sub[3][v[(x + 3) * sx]];
        }
        for (; x < im.W; ++x) ++sub[0][v[x * sx]];
    }
    for (int g = 0; g < 256; ++g) h[g] += sub[0][g] + sub[1][g] + sub[2][g] + sub[3][g];
}

// One thread's histograms of n images whose spectra are contiguous: a pixel's n samples go to n
// different histograms. The counts go first to 16-bit counters, flushed into the 32-bit totals
// before any can overflow: half the bytes keep the counters of ~100 bands in L1. The histograms
// are kStride counters apart, not 256: 512 bytes apart, every eighth band's counter would share
// its address's low 12 bits with the others' (4K aliasing stalls the increments).
struct SpectraHistograms {
    static constexpr std::size_t kStride = 256 + 32;
    std::size_t n;
    std::uint16_t* small;  // n × kStride
    std::uint32_t* total;  // n × 256
    int pending = 0;       // pixels in `small`

    void flush() {
        for (std::size_t b = 0; b < n; ++b)
            for (std::size_t g = 0; g < 256; ++g) total[b * 256 + g] += small[b * kStride + g];
        std::fill(small, small + n * kStride, std::uint16_t(0));
        pending = 0;
    }
    // Adds pixels x0..x1−1 (pixel x at row[x·sx]).
    void add(const std::uint8_t* row, std::int64_t sx, int x0, int x1) {
        const std::size_t nb = n;
        std::uint16_t* h = small;
        for (int x = x0; x < x1; ++x) {
            const std::uint8_t* v = row + std::int64_t(x) * sx;
            for (std::size_t b = 0; b < nb; ++b) ++h[b * kStride + v[b]];
        }
        pending += x1 - x0;
    }
    void add_row(const std::uint8_t* row, std::int64_t sx, int W) {
        constexpr int kMax = 65535;
        for (int x0 = 0; x0 < W;) {
            if (pending == kMax) flush();
            const int x1 = std::min(W, x0 + (kMax - pending));
            add(row, sx, x0, x1);
            x0 = x1;
        }
    }
};

// The 256-level histogram of each image (n × 256 counts). The counts are exact integers, so the
// work is split for the threads at hand: by image and row range when rows are contiguous (or the
// spectra too long for a histogram set per thread), else by row range with one set per thread.
std::vector<std::uint32_t> CpuOps::histograms(const ImageRows& im) {
    const std::size_t n = std::size_t(im.n);
    const int T = parallel(im.n) ? std::max(ctx.threads(), 1) : 1;
    std::vector<std::uint32_t> hist(n * 256, 0);
    constexpr std::size_t kThreadSetBytes = std::size_t(4) << 20;  // ~2500 bands
    const std::size_t set_bytes = n * (SpectraHistograms::kStride * 2 + 256 * 4);  // 16-bit + 32-bit counts
    if (!im.pixel_major || set_bytes > kThreadSetBytes) {
        const int parts = std::min(H, std::max(1, (8 * T + im.n - 1) / im.n));  // row ranges per image
        std::vector<std::uint32_t> part_hist(parts > 1 ? n * std::size_t(parts) * 256 : 0, 0);
#pragma omp parallel for schedule(dynamic) num_threads(T) if (T > 1)
        for (std::int64_t item = 0; item < std::int64_t(n) * parts; ++item) {
            const int b = int(item / parts), k = int(item % parts);
            std::uint32_t* h = parts > 1 ? &part_hist[std::size_t(item) * 256] : &hist[std::size_t(b) * 256];
            add_image_rows(im, b, int(std::int64_t(H) * k / parts), int(std::int64_t(H) * (k + 1) / parts), h);
        }
        if (parts > 1)
            for (std::size_t b = 0; b < n; ++b)
                for (int k = 0; k < parts; ++k)
                    for (int g = 0; g < 256; ++g) hist[b * 256 + g] += part_hist[(b * parts + k) * 256 + g];
        return hist;
    }
    // Spectra contiguous: one set of histograms per thread (each thread clears its own: the pages
    // are first touched in parallel), added up at the end.
    const std::size_t small = n * SpectraHistograms::kStride, total = n * 256;
    std::unique_ptr<std::uint16_t[]> smalls(new std::uint16_t[std::size_t(T) * small]);
    std::unique_ptr<std::uint32_t[]> totals(new std::uint32_t[std::size_t(T) * total]);
    const int chunks = std::min(H, 8 * T);
#pragma omp parallel num_threads(T) if (T > 1)
    {
        const std::size_t t = std::size_t(omp_get_thread_num());
        const int team = omp_get_num_threads();
        SpectraHistograms h{n, &smalls[t * small], &totals[t * total]};
        std::fill(h.small, h.small + small, std::uint16_t(0));
        std::fill(h.total, h.total + total, 0u);
#pragma omp for schedule(dynamic)
        for (int k = 0; k < chunks; ++k)
            for (int y = int(std::int64_t(H) * k / chunks); y < int(std::int64_t(H) * (k + 1) / chunks); ++y)
                h.add_row(im.row(y), im.sx, im.W);
        h.flush();
#pragma omp barrier
#pragma omp for schedule(static)
        for (std::int64_t i = 0; i < std::int64_t(total); ++i)
            for (int u = 0; u < team; ++u) hist[std::size_t(i)] += totals[std::size_t(u) * total + std::size_t(i)];
    }
    return hist;
}

// Band mean ------------------------------------------------------------------------------------

// sum[x] = Σ_b of the n images' samples at pixel x of row y (exact integers).
void row_sums(const ImageRows& im, int y, std::uint64_t* sum) {
    const std::uint8_t* src = im.row(y);
    const int W = im.W, n = im.n;
    if (im.pixel_major) {
        for (int x = 0; x < W; ++x) {
            const std::uint8_t* v = src + std::int64_t(x) * im.sx;
            std::uint64_t t = 0;
            for (int b = 0; b < n; ++b) t += v[b];
            sum[x] = t;
        }
        return;
    }
    std::fill(sum, sum + W, std::uint64_t(0));
    for (int b = 0; b < n; ++b) {
        const std::uint8_t* v = src + std::int64_t(b) * im.sb;
        for (int x = 0; x < W; ++x) sum[x] += v[x];
    }
}

Planes CpuOps::band_mean(const Planes& images, int n) {
    Planes m = alloc(1);
    const ImageRows im = rows(images, n);
    const std::size_t bytes = sizeof(std::uint64_t) * std::size_t(W);
    for_row_chunks(ctx.threads(), H, 1, bytes, parallel(n), [&](int y0, int y1, std::uint8_t* s) {
        auto* sum = reinterpret_cast<std::uint64_t*>(s);
        for (int y = y0; y < y1; ++y) {
            row_sums(im, y, sum);
            std::uint8_t* out = m.ptr + std::size_t(y) * std::size_t(W);
            for (int x = 0; x < W; ++x) out[x] = std::uint8_t(edges::rounded_mean(sum[x], std::uint32_t(n)));
        }
    });
    return m;
}

}  // namespace

EntropyEdgeSummary entropy_edges_cpu(const Context& ctx, const CubeView& cube, const EdgeOutputs& outputs,
                                     const EntropyEdgeOptions& options, const EdgeSceneStats* given) {
    CpuOps ops{ctx, cube, outputs, cube.width(), cube.height(), given};
    return edges::run_pipeline(ops, cube.bands(), options);
}

std::vector<std::uint32_t> tile_histograms_cpu(const Context& ctx, const CubeView& cube, const EdgeSceneStats& scene,
                                               bool with_mean) {
    const EdgeOutputs none;
    CpuOps ops{ctx, cube, none, cube.width(), cube.height(), &scene};
    const int B = cube.bands();
    const Planes images = ops.quantize(Quantize::PerBand);  // the scene's ranges
    std::vector<std::uint32_t> hist = ops.histograms(ops.rows(images, B));
    if (with_mean) {
        const Planes mean = ops.band_mean(images, B);
        const std::vector<std::uint32_t> m = ops.histograms(ops.rows(mean, 1));
        hist.insert(hist.end(), m.begin(), m.end());
    }
    return hist;
}

std::vector<EdgeThresholds> band_thresholds_cpu(const Context& ctx, const CubeView& cube, double q, Quantize mode) {
    const EdgeOutputs none;
    CpuOps ops{ctx, cube, none, cube.width(), cube.height()};
    return edges::run_thresholds(ops, cube.bands(), q, mode);
}

}  // namespace cubekit::detail
