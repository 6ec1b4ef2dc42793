// The entropy edge detector's CPU reference (spec edges.md §3): the pipeline of edges_internal.hpp
// over plain loops, OpenMP over images and rows.
#include <cstring>
#include <vector>

#include "cubekit/linalg.hpp"
#include "edges/edges_internal.hpp"
#include "labels/labels_internal.hpp"

namespace cubekit::detail {

namespace {

using Bytes = std::vector<std::uint8_t>;
using edges::Thr;

struct CpuOps {
    const Context& ctx;
    const Cube& cube;
    int W = 0, H = 0;
    std::size_t plane() const { return std::size_t(W) * std::size_t(H); }

    Bytes from_cube(const Cube& q) const {
        Bytes b(q.num_bytes());
        std::memcpy(b.data(), q.bytes(), b.size());
        return b;
    }
    Bytes quantize(Quantize mode) { return from_cube(quantize_to_u8_cpu(ctx, cube, mode)); }

    Bytes pca_images(int k, std::vector<double>& ratios) {
        PcaResult p = pca(ctx, cube, {.components = k});
        ratios = p.model.explained_variance_ratio;
        return from_cube(quantize_to_u8_cpu(ctx, p.scores, Quantize::PerBand));
    }

    std::vector<Thr> thresholds(const Bytes& images, int n, double q) {
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
    std::vector<Thr> to_host(const std::vector<Thr>& t, int) { return t; }

    Bytes band_mean(const Bytes& images, int n) {
        Bytes m(plane());
        const std::int64_t P = std::int64_t(plane());
#pragma omp parallel for schedule(static) num_threads(ctx.threads()) if (P * n >= 32768)
        for (std::int64_t i = 0; i < P; ++i) {
            std::uint64_t sum = 0;
            for (int b = 0; b < n; ++b) sum += images[std::size_t(b) * plane() + std::size_t(i)];
            m[std::size_t(i)] = std::uint8_t(edges::rounded_mean(sum, std::uint32_t(n)));
        }
        return m;
    }

    Bytes binary_maps(const Bytes& images, const std::vector<Thr>& t, int n) {
        Bytes f(images.size());
        const std::int64_t total = std::int64_t(images.size());
#pragma omp parallel for schedule(static) num_threads(ctx.threads()) if (total >= 32768)
        for (std::int64_t i = 0; i < total; ++i)
            f[std::size_t(i)] = edges::binarize(images[std::size_t(i)], t[std::size_t(i / std::int64_t(plane()))]);
        (void)n;
        return f;
    }

    /// The 3×3 rule on binary planes (spec §3.6); the border stays 0.
    Bytes rule_3x3(const Bytes& f, int n) {
        Bytes e(f.size(), 0);
        if (W < 3 || H < 3) return e;
#pragma omp parallel for collapse(2) schedule(static) num_threads(ctx.threads()) if (std::int64_t(f.size()) >= 32768)
        for (int b = 0; b < n; ++b)
            for (int y = 1; y < H - 1; ++y) {
                const std::uint8_t* p = f.data() + std::size_t(b) * plane() + std::size_t(y) * std::size_t(W);
                std::uint8_t* out = e.data() + std::size_t(b) * plane() + std::size_t(y) * std::size_t(W);
                for (int x = 1; x < W - 1; ++x) {
                    const std::uint8_t c = p[x];
                    int same = 0;
                    for (int dy = -1; dy <= 1; ++dy)
                        for (int dx = -1; dx <= 1; ++dx)
                            if (dx != 0 || dy != 0) same += p[std::ptrdiff_t(dy) * W + x + dx] == c;
                    out[x] = edges::edge_from_same(same);
                }
            }
        return e;
    }
    Bytes edge_maps(const Bytes& images, const std::vector<Thr>& t, int n) { return rule_3x3(binary_maps(images, t, n), n); }
    Bytes edges_of_binary(const Bytes& f) { return rule_3x3(f, 1); }

    /// Counts the set maps per pixel into `count` (u16 values) and returns count ≥ needed.
    Bytes vote(const Bytes& maps, int n, int needed, Bytes& count) {
        Bytes out(plane());
        count.assign(plane() * sizeof(std::uint16_t), 0);
        auto* c16 = reinterpret_cast<std::uint16_t*>(count.data());
        const std::int64_t P = std::int64_t(plane());
#pragma omp parallel for schedule(static) num_threads(ctx.threads()) if (P * n >= 32768)
        for (std::int64_t i = 0; i < P; ++i) {
            int c = 0;
            for (int b = 0; b < n; ++b) c += maps[std::size_t(b) * plane() + std::size_t(i)] != 0;
            c16[i] = std::uint16_t(c);
            out[std::size_t(i)] = std::uint8_t(c >= needed);
        }
        return out;
    }
    Bytes edge_vote(const Bytes& images, const std::vector<Thr>& t, int n, int needed, Bytes& count) {
        return vote(edge_maps(images, t, n), n, needed, count);
    }
    Bytes binary_vote(const Bytes& images, const std::vector<Thr>& t, int n, int needed, Bytes& count) {
        return vote(binary_maps(images, t, n), n, needed, count);
    }

    void remove_small(Bytes& maps, int n, std::int64_t min_size, int connectivity) {
        remove_small_components_cpu(ctx, maps.data(), W, H, n, min_size, connectivity);
    }

    Cube to_cube(const Bytes& b, int n) {
        Cube c(W, H, n, DType::U8, Layout::BSQ);
        std::memcpy(c.bytes(), b.data(), b.size());
        return c;
    }
    Cube to_cube_u16(const Bytes& count) {
        Cube c(W, H, 1, DType::U16, Layout::BSQ);
        std::memcpy(c.bytes(), count.data(), count.size());
        return c;
    }
};

}  // namespace

EntropyEdgeResult entropy_edges_cpu(const Context& ctx, const Cube& cube, const EntropyEdgeOptions& options) {
    CpuOps ops{ctx, cube, cube.width(), cube.height()};
    return edges::run_pipeline(ops, cube.bands(), options);
}

}  // namespace cubekit::detail
