// CPU reference of k-means (spec kmeans.md §3), OpenMP. The readable specification: every step
// in the order the spec states it; the CUDA backend must reproduce its labels, counts, centroids
// and iterations bit for bit. Pixels are read through the view's strides (any layout or window,
// no copy) and the labels and the painted image are written into the caller's views.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <cmath>
#include <limits>
#include <numeric>

#include "cubekit/error.hpp"
#include "kmeans/kmeans_internal.hpp"

namespace cubekit::detail {
namespace {

using km::i128;

// Pixels are processed in fixed chunks so that the f64 inertia is summed in the same order
// whatever the number of threads (chunk partials sequentially, then the partials in order).
constexpr std::int64_t kChunk = 4096;

template <typename T, typename D>
class CpuKmeans {
public:
    CpuKmeans(const Context& ctx, const CubeView& image, const MutableCubeView& labels, const MutableCubeView& quantized,
              const KmeansOptions& options, KmeansResult& result)
        : ctx_(ctx), o_(options), r_(result), image_(image), x_(image.typed<T>()),
          labels_(labels.empty() ? StridedView<std::int32_t>{} : labels.typed<std::int32_t>()),
          quantized_(quantized), m_(image.bands()), k_(options.k), pixels_(std::int64_t(image.num_pixels())),
          nt_(ctx.threads()) {}

    void run() {
        prepare();
        const auto [c, prev] = run_restarts<D>(
            ctx_, o_, r_, [&](std::uint64_t seed) { return initial_centroids(seed); },
            [&](std::vector<D>& cent, std::vector<D>& previous, KmeansRun& run) { lloyd(cent, previous, run); },
            [&](const std::vector<D>& cent, const std::vector<D>& previous) {
                return final_pass(o_.legacy ? previous : cent, cent, /*want_labels=*/false, true);
            });
        finish(c, prev);
    }

    // ---- tile mode (kmeans_tile_cpu): the passes below over a tile, with the scene's plan ----
    using Final = RestartStats;

    // Takes the plan and the valid pixels (raster indices of this image) instead of the first pass.
    void adopt(const KmeansPlan& plan, std::vector<std::int64_t> valid_set) {
        plan_ = plan;
        valid_ = std::move(valid_set);
        // A dense BIP image finds pixel p at p·m; any other view keeps each valid pixel's offset,
        // so the hot loops divide nothing.
        dense_ = image_.is_dense(Layout::BIP);
        offsets_.clear();
        if (!dense_) {
            offsets_.resize(valid_.size());
            for (std::size_t i = 0; i < valid_.size(); ++i) offsets_[i] = raster(valid_[i]).first - x_.data;
        }
        // Small images run on one thread: a thread team costs more than it saves there.
        parallel_ = valid() >= 32768;
    }
    const std::vector<std::int64_t>& valid_pixels() const { return valid_; }
    km::Spectrum<T> valid_pixel(std::int64_t i) const { return pixel(i); }

private:

    // Valid pixel i and raster pixel p: their m samples, read where they are.
    km::Spectrum<T> pixel(std::int64_t valid_index) const {
        const std::int64_t at = offsets_.empty() ? valid_[std::size_t(valid_index)] * m_ : offsets_[std::size_t(valid_index)];
        return {x_.data + at, x_.strides.b};
    }
    km::Spectrum<T> raster(std::int64_t p) const {
        if (dense_) return {x_.data + p * m_, 1};
        return {&x_(int(p % x_.width), int(p / x_.width), 0), x_.strides.b};
    }
    // The caller's label of raster pixel p.
    std::int32_t& label_of(std::int64_t p) const {
        if (labels_.strides.x == 1 && labels_.strides.y == labels_.width) return labels_.data[p];
        return labels_(int(p % labels_.width), int(p / labels_.width), 0);
    }
    std::int64_t valid() const { return std::int64_t(valid_.size()); }
    std::int64_t chunks() const { return (valid() + kChunk - 1) / kChunk; }

    void prepare() {
        std::vector<std::int64_t> valid;
        const KmeansPlan plan = prepare_kmeans(ctx_, image_, o_, valid);
        adopt(plan, std::move(valid));
        r_.valid_pixels = this->valid();
    }

public:
    // ---- initialisation (§3.4) ----
    std::vector<D> initial_centroids(std::uint64_t seed) {
        std::vector<D> c(std::size_t(k_) * m_, D(INFINITY));
        const bool sampled = o_.init == KmeansInit::Random || o_.init == KmeansInit::KmeansPlusPlus;
        const std::vector<std::int64_t> sample = sampled ? init_sample_pixels(valid_, o_, seed, nt_) : std::vector<std::int64_t>();
        if (o_.init == KmeansInit::KmeansPlusPlus) {
            kmeanspp(seed, sample, c);
            return c;
        }
        const std::vector<double> init =
            simple_init(plan_, o_, std::int64_t(sample.size()), seed, [&](const std::vector<std::int64_t>& positions) {
                std::vector<double> v;
                for (std::int64_t s : positions) {
                    const km::Spectrum<T> x = raster(sample[std::size_t(s)]);
                    for (int b = 0; b < m_; ++b) v.push_back(double(x[b]));
                }
                return v;
            });
        for (std::size_t i = 0; i < c.size(); ++i) c[i] = D(init[i]);
        return c;
    }

    // Fixed-point values (exponent e_d) of the pixel at raster index p.
    std::vector<std::int64_t> fixed_of(std::int64_t p) const {
        std::vector<std::int64_t> q(static_cast<std::size_t>(m_));
        const km::Spectrum<T> x = raster(p);
        for (int b = 0; b < m_; ++b) q[std::size_t(b)] = km::to_fixed_scaled(double(x[b]), plan_.scale_d);
        return q;
    }

    // Greedy k-means++ on the init sample with exact integer weights (§3.4).
    void kmeanspp(std::uint64_t seed, const std::vector<std::int64_t>& sample, std::vector<D>& c) {
        const auto n = std::int64_t(sample.size());
        const int trials = kmeanspp_trials(k_);
        // The sample's fixed-point values, precomputed when they take at most 256 MB.
        const bool cached = n * m_ <= (std::int64_t(1) << 25);
        std::vector<std::int64_t> qx(cached ? std::size_t(n * m_) : 0);
        if (cached)
            for (std::int64_t i = 0; i < n; ++i) {
                const km::Spectrum<T> x = raster(sample[std::size_t(i)]);
                for (int b = 0; b < m_; ++b) qx[std::size_t(i * m_ + b)] = km::to_fixed_scaled(double(x[b]), plan_.scale_d);
            }
        auto distance = [&](std::int64_t i, const std::int64_t* qc) {
            if (!cached) return km::exact_distance(raster(sample[std::size_t(i)]), qc, m_, plan_.scale_d);
            i128 d = 0;
            for (int b = 0; b < m_; ++b) {
                const i128 diff = i128(qx[std::size_t(i * m_ + b)]) - i128(qc[b]);
                d += diff * diff;
            }
            return d;
        };
        auto set_centre = [&](int j, std::int64_t s) {
            const km::Spectrum<T> x = raster(sample[std::size_t(s)]);
            for (int b = 0; b < m_; ++b) c[std::size_t(j) * m_ + b] = D(x[b]);
        };
        const auto first = std::int64_t(km::scaled_index(km::draw53(seed, 1, 0), std::uint64_t(n)));
        set_centre(0, first);
        std::vector<i128> dist(static_cast<std::size_t>(n)), prefix(static_cast<std::size_t>(n));
        std::vector<std::int64_t> qc = fixed_of(sample[std::size_t(first)]);
#pragma omp parallel for num_threads(nt_) if(parallel_) schedule(static)
        for (std::int64_t i = 0; i < n; ++i) dist[std::size_t(i)] = distance(i, qc.data());
        std::vector<std::int64_t> cand(static_cast<std::size_t>(trials));
        std::vector<std::int64_t> qcand(std::size_t(trials) * m_);
        for (int t = 1; t < k_; ++t) {
            ctx_.check_cancelled("kmeans++");
            i128 phi = 0;
            for (std::int64_t i = 0; i < n; ++i) prefix[std::size_t(i)] = phi += dist[std::size_t(i)];
            if (phi == 0) return;  // only t distinct vectors in the sample: the rest stay unset
            for (int l = 0; l < trials; ++l) {
                const i128 thr = km::scaled_threshold(km::draw53(seed, 2, std::uint64_t(t) * trials + l), phi);
                cand[std::size_t(l)] = std::upper_bound(prefix.begin(), prefix.end(), thr) - prefix.begin();
                const auto q = fixed_of(sample[std::size_t(cand[std::size_t(l)])]);
                std::copy(q.begin(), q.end(), qcand.begin() + std::ptrdiff_t(l) * m_);
            }
            // φ_l = Σ min(D_i, d(x_i, candidate l)) for every trial in one pass.
            std::vector<i128> phi_l(static_cast<std::size_t>(trials), 0);
#pragma omp parallel num_threads(nt_) if(parallel_)
            {
                std::vector<i128> local(static_cast<std::size_t>(trials), 0);
#pragma omp for schedule(static) nowait
                for (std::int64_t i = 0; i < n; ++i)
                    for (int l = 0; l < trials; ++l)
                        local[std::size_t(l)] += std::min(dist[std::size_t(i)], distance(i, qcand.data() + std::size_t(l) * m_));
#pragma omp critical
                for (int l = 0; l < trials; ++l) phi_l[std::size_t(l)] += local[std::size_t(l)];
            }
            const int best = int(std::min_element(phi_l.begin(), phi_l.end()) - phi_l.begin());
            const std::int64_t s = cand[std::size_t(best)];
            set_centre(t, s);
            qc = fixed_of(sample[std::size_t(s)]);
#pragma omp parallel for num_threads(nt_) if(parallel_) schedule(static)
            for (std::int64_t i = 0; i < n; ++i) dist[std::size_t(i)] = std::min(dist[std::size_t(i)], distance(i, qc.data()));
        }
    }

    // ---- Lloyd iterations (§3.3, 3.5–3.7) ----
    // One fused pass: nearest centroid, exact sums and counts, f64 inertia in fixed chunk order.
    // Runs `visit(i, local)` on every valid pixel i, in fixed chunks taken whole by the threads;
    // `local` is each thread's copy of `proto`, handed to `merge` at the end (one thread at a time).
    // Returns the f64 sum of what `visit` returns: sequential within a chunk, then the chunks in
    // order, whatever the number of threads.
    template <typename Local, typename Visit, typename Merge>
    double chunked_pass(const Local& proto, Visit&& visit, Merge&& merge) const {
        std::vector<double> partial(static_cast<std::size_t>(chunks()), 0);
#pragma omp parallel num_threads(nt_) if(parallel_)
        {
            Local local = proto;
#pragma omp for schedule(static) nowait
            for (std::int64_t ch = 0; ch < chunks(); ++ch) {
                double acc = 0;
                const std::int64_t end = std::min(valid(), (ch + 1) * kChunk);
                for (std::int64_t i = ch * kChunk; i < end; ++i) acc += visit(i, local);
                partial[std::size_t(ch)] = acc;
            }
#pragma omp critical
            merge(local);
        }
        double total = 0;
        for (double p : partial) total += p;
        return total;
    }

    // One fused pass: nearest centroid, exact sums and counts; returns the f64 inertia.
    double assign_accumulate(const std::vector<D>& c, std::vector<std::int64_t>& sums,
                             std::vector<std::int64_t>& counts) const {
        std::fill(sums.begin(), sums.end(), 0);
        std::fill(counts.begin(), counts.end(), 0);
        struct Local {
            std::vector<std::int64_t> s, n;
        };
        return chunked_pass(
            Local{sums, counts},
            [&](std::int64_t i, Local& l) {
                const km::Spectrum<T> x = pixel(i);
                D d;
                const int j = km::nearest(x, c.data(), k_, m_, d);
                ++l.n[std::size_t(j)];
                for (int b = 0; b < m_; ++b) l.s[std::size_t(j) * m_ + b] += km::sum_value(x[b], plan_.scale);
                return double(d);
            },
            [&](const Local& l) {
                for (std::size_t i = 0; i < l.s.size(); ++i) sums[i] += l.s[i];
                for (std::size_t j = 0; j < l.n.size(); ++j) counts[j] += l.n[j];
            });
    }

    // The `wanted` valid pixels farthest from their nearest centroid (§3.7; index: the valid index).
    std::vector<FarPixel> farthest_pixels(const std::vector<D>& c, std::size_t wanted) const {
        std::vector<FarPixel> cand(static_cast<std::size_t>(valid()));
#pragma omp parallel for num_threads(nt_) if(parallel_) schedule(static)
        for (std::int64_t i = 0; i < valid(); ++i) {
            D d;
            km::nearest(pixel(i), c.data(), k_, m_, d);
            cand[std::size_t(i)] = FarPixel{i, double(d)};
        }
        return farthest(std::move(cand), wanted);
    }

    // §3.7 relocate: the e-th empty cluster takes the e-th farthest pixel (old centroids).
    void relocate(const std::vector<D>& c, std::vector<std::int64_t>& sums, std::vector<std::int64_t>& counts) const {
        std::vector<int> empty;
        for (int j = 0; j < k_; ++j)
            if (counts[std::size_t(j)] == 0) empty.push_back(j);
        if (empty.empty()) return;
        const std::vector<FarPixel> far = farthest_pixels(c, empty.size());
        for (std::size_t e = 0; e < far.size(); ++e)
            relocate_pixel(pixel(far[e].index), c, k_, m_, empty[e], plan_.scale, sums, counts);
    }

    void lloyd(std::vector<D>& c, std::vector<D>& prev, KmeansRun& run) const {
        lloyd_loop(ctx_, o_, plan_, c, prev, run,
                   [&](const std::vector<D>& cent, std::vector<std::int64_t>& sums, std::vector<std::int64_t>& counts) {
                       return assign_accumulate(cent, sums, counts);
                   },
                   [&](const std::vector<D>& cent, std::vector<std::int64_t>& sums, std::vector<std::int64_t>& counts) {
                       relocate(cent, sums, counts);
                   });
    }

    // ---- final pass (§3.8) ----
    // Labels from `assign` (the final centroids; in legacy mode the previous ones, i.e. the last
    // assignment), inertia against `paint` (the centroids the pixels are painted with).
    Final final_pass(const std::vector<D>& assign, const std::vector<D>& paint, bool want_labels, bool want_exact) const {
        Final f;
        f.counts.assign(std::size_t(k_), 0);
        std::vector<std::int64_t> qpaint(paint.size());
        if (want_exact)
            for (std::size_t i = 0; i < paint.size(); ++i)
                qpaint[i] = std::isinf(paint[i]) ? 0 : km::to_fixed_scaled(double(paint[i]), plan_.scale_d);
        struct Local {
            std::vector<std::uint64_t> n;
            i128 exact = 0;
        };
        f.inertia = chunked_pass(
            Local{f.counts, 0},
            [&](std::int64_t i, Local& l) {
                const km::Spectrum<T> x = pixel(i);
                D d;
                const int j = km::nearest(x, assign.data(), k_, m_, d);
                if (&assign != &paint) d = km::sq_distance(x, paint.data() + std::size_t(j) * m_, m_);
                ++l.n[std::size_t(j)];
                if (want_labels) label_of(valid_[std::size_t(i)]) = j;
                if (want_exact) l.exact += km::exact_distance(x, qpaint.data() + std::size_t(j) * m_, m_, plan_.scale_d);
                return double(d);
            },
            [&](const Local& l) {
                for (int j = 0; j < k_; ++j) f.counts[std::size_t(j)] += l.n[std::size_t(j)];
                f.exact += l.exact;
            });
        return f;
    }

    // The final pass with labels: excluded pixels get −1, the others their cluster (unsorted).
    Final label_pass(const std::vector<D>& assign, const std::vector<D>& paint) const {
        if (valid() < pixels_) {
#pragma omp parallel for num_threads(nt_) if(parallel_) schedule(static)
            for (int y = 0; y < labels_.height; ++y)
                for (int x = 0; x < labels_.width; ++x) labels_(x, y, 0) = -1;
        }
        return final_pass(assign, paint, /*want_labels=*/true, false);
    }

    void finish(const std::vector<D>& c, const std::vector<D>& prev) {
        const Final f = label_pass(o_.legacy ? prev : c, c);
        relabel_paint(finish_result(r_, c, f.counts, f.inertia, image_.dtype(), o_.legacy), r_.palette);
    }

    // Labels renumbered after the sort; the painted image takes the palette, excluded pixels
    // their own samples.
    void relabel_paint(const std::vector<int>& new_label, const std::vector<double>& palette) const {
        std::vector<T> pal(palette.size());
        for (std::size_t i = 0; i < pal.size(); ++i) pal[i] = T(palette[i]);
        const bool paint = !quantized_.empty();
        const StridedView<T> q = paint ? quantized_.typed<T>() : StridedView<T>{};
#pragma omp parallel for num_threads(nt_) if(parallel_) schedule(static)
        for (int y = 0; y < labels_.height; ++y)
            for (int x = 0; x < labels_.width; ++x) {
                std::int32_t& l = labels_(x, y, 0);
                if (l >= 0) l = new_label[std::size_t(l)];
                if (!paint) continue;
                for (int b = 0; b < m_; ++b) q(x, y, b) = l >= 0 ? pal[std::size_t(l) * m_ + b] : x_(x, y, b);
            }
    }

private:
    const Context& ctx_;
    const KmeansOptions& o_;
    KmeansResult& r_;
    CubeView image_;
    StridedView<const T> x_;
    StridedView<std::int32_t> labels_;
    MutableCubeView quantized_;
    int m_, k_;
    std::int64_t pixels_;
    int nt_;
    bool parallel_ = true;
    bool dense_ = true;  // the image is dense BIP: raster pixel p starts at p·m
    std::vector<std::int64_t> valid_;    // raster index of each valid pixel
    std::vector<std::int64_t> offsets_;  // element offset of each valid pixel (views other than dense BIP)
    KmeansPlan plan_;
};

// A tile of a scene run in tiles (tiled.cpp): the engine above over the tile's core, with the
// scene's plan; its valid pixels are found once, when the tile is made.
template <typename T, typename D>
class CpuTile final : public KmeansTile {
public:
    CpuTile(const Context& ctx, const CubeView& window, int x0, int y0, int scene_width, const KmeansOptions& options,
            const KmeansPlan& plan)
        : ctx_(ctx), window_(window), x0_(x0), y0_(y0), scene_width_(scene_width), o_(options), plan_(plan),
          engine_(ctx, window_, {}, {}, o_, unused_) {
        engine_.adopt(plan, valid_pixels(ctx, window, options.mask));
    }

    std::vector<std::int64_t> row_valid() const override {
        std::vector<std::int64_t> rows(static_cast<std::size_t>(window_.height()), 0);
        for (const std::int64_t p : valid()) ++rows[std::size_t(p / window_.width())];
        return rows;
    }
    KmeansStats range() const override { return band_range(ctx_, window_, valid()); }
    BandMoments moments() const override { return band_moments(ctx_, window_, valid(), plan_.scale); }

    TilePixels sample(std::uint64_t seed, double rate, bool all, const std::vector<std::int64_t>& first_rank) const override {
        TilePixels out;
        std::int64_t row = -1, rank = 0;
        for (std::size_t i = 0; i < valid().size(); ++i) {
            const std::int64_t r = valid()[i] / window_.width();
            rank = r == row ? rank + 1 : first_rank[std::size_t(r)];
            row = r;
            if (all || km::in_sample(seed, rank, rate)) add(out, rank, 0, std::int64_t(i));
        }
        return out;
    }

    TileSums assign(const std::vector<double>& c) const override {
        TileSums s;
        s.sums.assign(c.size(), 0);
        s.counts.assign(std::size_t(o_.k), 0);
        s.inertia = engine_.assign_accumulate(centroids(c), s.sums, s.counts);
        return s;
    }

    TilePixels farthest(const std::vector<double>& c, std::size_t wanted) const override {
        TilePixels out;
        for (const FarPixel& f : engine_.farthest_pixels(centroids(c), wanted)) {
            const std::int64_t p = valid()[std::size_t(f.index)];
            const std::int64_t x = x0_ + p % window_.width(), y = y0_ + p / window_.width();
            add(out, y * scene_width_ + x, f.distance, f.index);
        }
        return out;
    }

    RestartStats final_pass(const std::vector<double>& assign, const std::vector<double>& paint,
                            const MutableCubeView& labels) const override {
        // The engine tells "assign and paint are the same centroids" by identity, not by value.
        const std::vector<D> a = centroids(assign);
        const std::vector<D> p = assign == paint ? std::vector<D>() : centroids(paint);
        const std::vector<D>& pc = assign == paint ? a : p;
        if (labels.empty()) return engine_.final_pass(a, pc, /*want_labels=*/false, /*want_exact=*/true);
        CpuKmeans<T, D> e(ctx_, window_, labels, {}, o_, unused_);
        e.adopt(plan_, valid());
        return e.label_pass(a, pc);
    }

    void relabel_paint(const MutableCubeView& labels, const std::vector<int>& new_label, const std::vector<double>& palette,
                       const MutableCubeView& quantized) const override {
        CpuKmeans<T, D>(ctx_, window_, labels, quantized, o_, unused_).relabel_paint(new_label, palette);
    }

private:
    const std::vector<std::int64_t>& valid() const { return engine_.valid_pixels(); }
    static std::vector<D> centroids(const std::vector<double>& c) { return std::vector<D>(c.begin(), c.end()); }
    // Appends a pixel (the engine's valid index i) under `key` with its m values.
    void add(TilePixels& out, std::int64_t key, double distance, std::int64_t i) const {
        out.keys.push_back(FarPixel{key, distance});
        out.dtype = window_.dtype();
        const km::Spectrum<T> x = engine_.valid_pixel(i);
        const std::size_t at = out.values.size();
        out.values.resize(at + std::size_t(window_.bands()) * sizeof(T));
        for (int b = 0; b < window_.bands(); ++b) {
            const T v = x[b];
            std::memcpy(out.values.data() + at + std::size_t(b) * sizeof(T), &v, sizeof(T));
        }
    }

    const Context& ctx_;
    CubeView window_;
    int x0_, y0_, scene_width_;
    KmeansOptions o_;  // the scene's, with the mask cut to the tile
    KmeansPlan plan_;
    mutable KmeansResult unused_;  // the engine's result, which tile passes do not fill
    CpuKmeans<T, D> engine_;
};

}  // namespace

void kmeans_cpu(const Context& ctx, const CubeView& image, const MutableCubeView& labels,
                const MutableCubeView& quantized, const KmeansOptions& options, KmeansResult& result) {
    visit_kmeans_types(image.dtype(), [&](auto t, auto d) {
        CpuKmeans<decltype(t), decltype(d)>(ctx, image, labels, quantized, options, result).run();
    });
}

std::unique_ptr<KmeansTile> kmeans_tile_cpu(const Context& ctx, const CubeView& window, int x0, int y0, int scene_width,
                                            const KmeansOptions& options, const KmeansPlan& plan) {
    std::unique_ptr<KmeansTile> tile;
    visit_kmeans_types(window.dtype(), [&](auto t, auto d) {
        tile = std::make_unique<CpuTile<decltype(t), decltype(d)>>(ctx, window, x0, y0, scene_width, options, plan);
    });
    return tile;
}

std::vector<double> kmeans_sample_init_cpu(const Context& ctx, const CubeView& sample, const KmeansOptions& options,
                                           const KmeansPlan& plan, std::uint64_t seed) {
    // The sample is already drawn: the engine takes every pixel of it, in order.
    KmeansOptions o = options;
    o.mask.clear();
    o.init_sample = 0;
    std::vector<double> c;
    visit_kmeans_types(sample.dtype(), [&](auto t, auto d) {
        KmeansResult unused;
        CpuKmeans<decltype(t), decltype(d)> engine(ctx, sample, {}, {}, o, unused);
        std::vector<std::int64_t> all(sample.num_pixels());
        std::iota(all.begin(), all.end(), std::int64_t(0));
        engine.adopt(plan, std::move(all));
        const auto init = engine.initial_centroids(seed);
        c.assign(init.begin(), init.end());
    });
    return c;
}

}  // namespace cubekit::detail
