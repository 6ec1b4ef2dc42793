// The entropy edge detector's CPU reference (spec edges.md §3): the pipeline of edges_internal.hpp
// over plain loops, OpenMP over images and rows. The input is read through its strides where it
// is (a dense BSQ u8 cube is its own E1); the stages work on dense planes, written straight into
// the caller's outputs when those are dense BSQ.
#include <cstring>
#include <vector>

#include "cubekit/linalg.hpp"
#include "edges/edges_internal.hpp"
#include "labels/labels_internal.hpp"

namespace cubekit::detail {

namespace {

using edges::Output;
using edges::Thr;

/// n dense planes of W×H samples: owned, a caller's dense output, or (read-only) the input itself.
struct Planes {
    std::vector<std::uint8_t> owned;
    std::uint8_t* ptr = nullptr;
    const std::uint8_t* input = nullptr;
    const std::uint8_t* data() const { return input ? input : ptr; }
};

struct CpuOps {
    const Context& ctx;
    const CubeView& cube;
    const EdgeOutputs& outputs;
    int W = 0, H = 0;
    std::size_t plane() const { return std::size_t(W) * std::size_t(H); }
    MutableCubeView dense_view(std::uint8_t* p, int n, DType t = DType::U8) const {
        return MutableCubeView::host(p, W, H, n, t, dense_strides(W, H, n, Layout::BSQ));
    }

    Planes alloc(int n, std::size_t element = 1) {
        Planes p;
        p.owned.resize(plane() * std::size_t(n) * element);
        p.ptr = p.owned.data();
        return p;
    }
    Planes output(Output which, int n) {
        const MutableCubeView& v = edges::view_of(outputs, which);
        if (v.data() && v.is_dense(Layout::BSQ)) return Planes{{}, reinterpret_cast<std::uint8_t*>(v.data()), nullptr};
        return alloc(n, which == Output::VoteCount ? sizeof(std::uint16_t) : 1);
    }
    bool wants(Output which) const { return edges::view_of(outputs, which).data() != nullptr; }
    void deliver(Planes& p, Output which) {
        const MutableCubeView& v = edges::view_of(outputs, which);
        if (!v.data() || reinterpret_cast<std::uint8_t*>(v.data()) == p.ptr) return;
        copy_cube(ctx, dense_view(p.ptr, v.bands(), v.dtype()), v);
    }

    Planes quantize(Quantize mode) {
        if (cube.dtype() == DType::U8 && cube.is_dense(Layout::BSQ))
            return Planes{{}, nullptr, reinterpret_cast<const std::uint8_t*>(cube.data())};
        Planes q = alloc(cube.bands());
        quantize_cpu(ctx, cube, dense_view(q.ptr, cube.bands()), mode);
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

    std::vector<Thr> thresholds(const Planes& images, int n, double q) {
        std::vector<Thr> t(static_cast<std::size_t>(n));
#pragma omp parallel for schedule(dynamic) num_threads(ctx.threads())
        for (int b = 0; b < n; ++b) {
            std::uint32_t hist[256] = {};
            const std::uint8_t* v = images.data() + std::size_t(b) * plane();
            for (std::size_t i = 0; i < plane(); ++i) ++hist[v[i]];
            t[std::size_t(b)] = edges::thresholds_from_histogram(hist, q);
        }
        return t;
    }
    std::vector<Thr> threshold_mean(const std::vector<Thr>& t, int) { return edges::threshold_mean_of(t); }
    void to_host(const std::vector<Thr>& t, int n, std::vector<EdgeThresholds>& dest) { dest = edges::to_public(t.data(), n); }
    void finish() {}

    Planes band_mean(const Planes& images, int n) {
        Planes m = alloc(1);
        const std::int64_t P = std::int64_t(plane());
        const std::uint8_t* in = images.data();
#pragma omp parallel for schedule(static) num_threads(ctx.threads()) if (P * n >= 32768)
        for (std::int64_t i = 0; i < P; ++i) {
            std::uint64_t sum = 0;
            for (int b = 0; b < n; ++b) sum += in[std::size_t(b) * plane() + std::size_t(i)];
            m.ptr[i] = std::uint8_t(edges::rounded_mean(sum, std::uint32_t(n)));
        }
        return m;
    }

    void binary_maps(const Planes& images, const std::vector<Thr>& t, int n, Planes& f) {
        const std::int64_t total = std::int64_t(plane()) * n;
        const std::uint8_t* in = images.data();
#pragma omp parallel for schedule(static) num_threads(ctx.threads()) if (total >= 32768)
        for (std::int64_t i = 0; i < total; ++i)
            f.ptr[i] = edges::binarize(in[i], t[std::size_t(i / std::int64_t(plane()))]);
    }

    /// The 3×3 rule on binary planes (spec §3.6); the border stays 0.
    void rule_3x3(const std::uint8_t* f, int n, std::uint8_t* e) {
        std::memset(e, 0, plane() * std::size_t(n));
        if (W < 3 || H < 3) return;
#pragma omp parallel for collapse(2) schedule(static) num_threads(ctx.threads()) if (std::int64_t(plane()) * n >= 32768)
        for (int b = 0; b < n; ++b)
            for (int y = 1; y < H - 1; ++y) {
                const std::uint8_t* p = f + std::size_t(b) * plane() + std::size_t(y) * std::size_t(W);
                std::uint8_t* out = e + std::size_t(b) * plane() + std::size_t(y) * std::size_t(W);
                for (int x = 1; x < W - 1; ++x) {
                    const std::uint8_t c = p[x];
                    int same = 0;
                    for (int dy = -1; dy <= 1; ++dy)
                        for (int dx = -1; dx <= 1; ++dx)
                            if (dx != 0 || dy != 0) same += p[std::ptrdiff_t(dy) * W + x + dx] == c;
                    out[x] = edges::edge_from_same(same);
                }
            }
    }
    void edge_maps(const Planes& images, const std::vector<Thr>& t, int n, Planes& e) {
        Planes f = alloc(n);
        binary_maps(images, t, n, f);
        rule_3x3(f.ptr, n, e.ptr);
    }
    void edges_of_binary(const Planes& f, Planes& e) { rule_3x3(f.data(), 1, e.ptr); }

    /// Counts the set maps per pixel into `count` (u16 values) and writes count ≥ needed to `out`.
    void vote(const Planes& maps, int n, int needed, Planes& count, Planes& out) {
        auto* c16 = reinterpret_cast<std::uint16_t*>(count.ptr);
        const std::uint8_t* m = maps.data();
        const std::int64_t P = std::int64_t(plane());
#pragma omp parallel for schedule(static) num_threads(ctx.threads()) if (P * n >= 32768)
        for (std::int64_t i = 0; i < P; ++i) {
            int c = 0;
            for (int b = 0; b < n; ++b) c += m[std::size_t(b) * plane() + std::size_t(i)] != 0;
            c16[i] = std::uint16_t(c);
            out.ptr[i] = std::uint8_t(c >= needed);
        }
    }
    void edge_vote(const Planes& images, const std::vector<Thr>& t, int n, int needed, Planes& count, Planes& out) {
        Planes e = alloc(n);
        edge_maps(images, t, n, e);
        vote(e, n, needed, count, out);
    }
    void binary_vote(const Planes& images, const std::vector<Thr>& t, int n, int needed, Planes& count, Planes& out) {
        Planes f = alloc(n);
        binary_maps(images, t, n, f);
        vote(f, n, needed, count, out);
    }

    void remove_small(Planes& maps, int n, std::int64_t min_size, int connectivity) {
        remove_small_components_cpu(ctx, maps.ptr, W, H, n, min_size, connectivity);
    }
};

}  // namespace

EntropyEdgeSummary entropy_edges_cpu(const Context& ctx, const CubeView& cube, const EdgeOutputs& outputs,
                                     const EntropyEdgeOptions& options) {
    CpuOps ops{ctx, cube, outputs, cube.width(), cube.height()};
    return edges::run_pipeline(ops, cube.bands(), options);
}

std::vector<EdgeThresholds> band_thresholds_cpu(const Context& ctx, const CubeView& cube, double q, Quantize mode) {
    const EdgeOutputs none;
    CpuOps ops{ctx, cube, none, cube.width(), cube.height()};
    return edges::run_thresholds(ops, cube.bands(), q, mode);
}

}  // namespace cubekit::detail
