// k-means in tiles (tiles.hpp, kmeans.hpp): the whole-scene engine's passes run over the tiles of a
// scene, each tile with the scene's plan, and merged exactly, so the labels, centroids, counts,
// palette, quantized image and iterations equal kmeans_into's bit for bit:
//   - the first pass's valid count, ranges and exact moments are sums, minima and maxima;
//   - the init sample is drawn by valid rank (the tiles' per-row valid counts give every pixel its
//     rank), gathered in rank order, and seeded by the engine on that gathered sample;
//   - every Lloyd pass adds exact integer sums and counts; a relocation takes the farthest pixels
//     of the tiles' own farthest (ties: lower raster index, the same order as the valid index);
//   - the final pass writes each tile's labels; the sort renumbers them and paints.
// Only the f64 inertia (and history) is summed in another order: per tile, then the tiles in order.
#include <algorithm>
#include <map>
#include <mutex>
#include <numeric>
#include <string>
#include <utility>

#include "core/tiled_local.hpp"
#include "cubekit/error.hpp"
#include "kmeans/kmeans_internal.hpp"

namespace cubekit {
namespace {

constexpr const char* kWhere = "kmeans_tiled";
// Host scratch per pixel of a tile: its valid indices (8), the relocation's candidates (16), the
// label tile (4), the flags and the mask cut (2).
constexpr std::size_t kHostBytesPerPixel = 30;

using Corner = std::pair<int, int>;  // (y0, x0): the tiles in raster order
Corner corner(const Tile& t) { return {t.y0, t.x0}; }

template <typename D>
class TiledKmeans {
public:
    TiledKmeans(const Context& ctx, const detail::TileSource& src, const MutableCubeView& labels,
                const MutableCubeView& quantized, const KmeansOptions& options, const TileOptions& tiles,
                KmeansTiled& out)
        : ctx_(ctx), src_(src), labels_(labels), quantized_(quantized), o_(options), tiles_(tiles), out_(out),
          m_(src.bands), k_(options.k) {}

    void run() {
        KmeansResult& r = out_.result;
        prepare();
        r.valid_pixels = plan_.valid;
        const auto [c, prev] = detail::run_restarts<D>(
            ctx_, o_, r, [&](std::uint64_t seed) { return initial_centroids(seed); },
            [&](std::vector<D>& cent, std::vector<D>& previous, KmeansRun& run) { lloyd(cent, previous, run); },
            [&](const std::vector<D>& cent, const std::vector<D>& previous) {
                return final_pass(o_.legacy ? previous : cent, cent, false);
            });
        const detail::RestartStats f = final_pass(o_.legacy ? prev : c, c, true);
        const std::vector<int> new_label = detail::finish_result(r, c, f.counts, f.inertia, src_.dtype, o_.legacy);
        relabel_paint(new_label);
    }

private:
    // ---- passes ----
    // `body(tile, t, out)` on every tile (out: the tile's output when `kernel` has one), under one lock
    // for the merges. Counts the pass and folds its peaks into the run.
    template <class Body>
    void pass(detail::LocalTileKernel kernel, const MutableCubeView& output, Body&& body) {
        std::mutex mutex;
        kernel.host_work_bytes_per_pixel = kHostBytesPerPixel;
        kernel.run_tile = [&](const Context& c, const Tile& t, const CubeView& in, const MutableCubeView& o) {
            if (c.is_cuda()) throw InvalidInput("kmeans_tiled: the tiles run on the CPU backend only (internal)");
            KmeansOptions tile_options = o_;
            tile_options.mask = mask_of(t);
            const auto tile = detail::kmeans_tile_cpu(c, in, t.x0, t.y0, src_.width, tile_options, plan_);
            body(*tile, t, o, mutex);
        };
        const TiledRun run = detail::run_local_tiles(ctx_, src_, output, kernel, tiles_, kWhere);
        detail::merge_peak(out_.run, run);
        out_.run.tiles = run.tiles, out_.run.tile_width = run.tile_width, out_.run.tile_height = run.tile_height;
        ++out_.passes;
    }
    template <class Body>
    void statistics_pass(Body&& body) {
        detail::LocalTileKernel k;
        k.out_bands = 0;
        pass(k, MutableCubeView{}, [&](const detail::KmeansTile& tile, const Tile& t, const MutableCubeView&,
                                       std::mutex& mutex) { body(tile, t, mutex); });
    }

    std::vector<std::uint8_t> mask_of(const Tile& t) const {
        if (o_.mask.empty()) return {};
        std::vector<std::uint8_t> cut;
        cut.reserve(std::size_t(t.width) * std::size_t(t.height));
        for (int y = t.y0; y < t.y0 + t.height; ++y) {
            const auto row = o_.mask.begin() + std::ptrdiff_t(y) * src_.width + t.x0;
            cut.insert(cut.end(), row, row + t.width);
        }
        return cut;
    }

    // ---- first pass: valid pixels, ranges, exact moments (§3.3) ----
    void prepare() {
        detail::KmeansStats stats;
        stats.lo.assign(std::size_t(m_), std::numeric_limits<double>::infinity());
        stats.hi.assign(std::size_t(m_), -std::numeric_limits<double>::infinity());
        std::map<Corner, std::vector<std::int64_t>> rows;
        statistics_pass([&](const detail::KmeansTile& tile, const Tile& t, std::mutex& mutex) {
            std::vector<std::int64_t> row = tile.row_valid();
            const detail::KmeansStats part = tile.range();
            const std::lock_guard lock(mutex);
            rows[corner(t)] = std::move(row);
            stats.valid += part.valid;
            for (int b = 0; b < m_; ++b) {
                stats.lo[std::size_t(b)] = std::min(stats.lo[std::size_t(b)], part.lo[std::size_t(b)]);
                stats.hi[std::size_t(b)] = std::max(stats.hi[std::size_t(b)], part.hi[std::size_t(b)]);
            }
        });
        plan_ = detail::make_plan(o_, m_, std::int64_t(src_.width) * src_.height, dtype_is_float(src_.dtype), stats);
        detail::BandMoments moments;
        moments.sum_q.assign(std::size_t(m_), 0);
        moments.sum_q2.assign(std::size_t(m_), 0);
        statistics_pass([&](const detail::KmeansTile& tile, const Tile&, std::mutex& mutex) {
            const detail::BandMoments part = tile.moments();
            const std::lock_guard lock(mutex);
            moments.add(part.sum_q, part.sum_q2);
        });
        detail::set_tolerance(plan_, o_.tol, moments.sum_q, moments.sum_q2);
        first_ranks(rows);
    }

    // The valid rank of each tile's first valid pixel in each of its rows: rows in order, and within
    // a row the tiles from left to right.
    void first_ranks(const std::map<Corner, std::vector<std::int64_t>>& rows) {
        std::int64_t rank = 0;
        for (auto band = rows.begin(); band != rows.end();) {
            auto end = band;
            while (end != rows.end() && end->first.first == band->first.first) ++end;
            for (std::size_t y = 0; y < band->second.size(); ++y)
                for (auto t = band; t != end; ++t) {
                    first_rank_[t->first].push_back(rank);
                    rank += t->second[y];
                }
            band = end;
        }
    }

    // ---- initialisation (§3.4) ----
    std::vector<D> initial_centroids(std::uint64_t seed) {
        std::vector<double> c;
        if (o_.init == KmeansInit::Explicit || o_.init == KmeansInit::BoxDiagonal) {
            c = detail::simple_init(plan_, o_, 0, seed, {});
        } else {
            // The engine draws from its sample; an unlucky sample smaller than k is every valid pixel.
            const bool sampled = detail::sampling_active(o_, plan_.valid);
            Cube sample = gather(seed, !sampled);
            if (sampled && sample.width() < o_.k) sample = gather(seed, true);
            c = detail::kmeans_sample_init_cpu(ctx_, sample.view(), o_, plan_, seed);
        }
        return std::vector<D>(c.begin(), c.end());
    }

    // The init sample (or every valid pixel), n × 1 × m in rank order, in the input's type.
    Cube gather(std::uint64_t seed, bool all) {
        detail::TilePixels pixels;
        const double rate = detail::sample_rate(o_, plan_.valid);
        statistics_pass([&](const detail::KmeansTile& tile, const Tile& t, std::mutex& mutex) {
            detail::TilePixels part = tile.sample(seed, rate, all, first_rank_.at(corner(t)));
            const std::lock_guard lock(mutex);
            pixels.keys.insert(pixels.keys.end(), part.keys.begin(), part.keys.end());
            pixels.values.insert(pixels.values.end(), part.values.begin(), part.values.end());
        });
        std::vector<std::size_t> order(pixels.keys.size());
        std::iota(order.begin(), order.end(), std::size_t(0));
        std::sort(order.begin(), order.end(),
                  [&](std::size_t a, std::size_t b) { return pixels.keys[a].index < pixels.keys[b].index; });
        Cube sample(std::max(int(order.size()), 1), 1, m_, src_.dtype, Layout::BIP);
        visit_dtype(src_.dtype, [&](auto tag) {
            using T = decltype(tag);
            const StridedView<T> to = sample.mutable_view().typed<T>();
            for (std::size_t i = 0; i < order.size(); ++i)
                for (int b = 0; b < m_; ++b) to(int(i), 0, b) = T(pixels.values[order[i] * m_ + b]);
        });
        if (order.empty()) return Cube();
        return sample;
    }

    // ---- Lloyd iterations (§3.3, 3.5–3.7), as the engine runs them ----
    void lloyd(std::vector<D>& c, std::vector<D>& prev, KmeansRun& run) {
        std::vector<std::int64_t> sums(c.size()), counts(static_cast<std::size_t>(k_));
        const bool zero_empty = o_.legacy || o_.empty == EmptyPolicy::LegacyZero;
        for (int it = 1; it <= o_.max_iter; ++it) {
            ctx_.check_cancelled("kmeans");
            const double inertia = assign_accumulate(c, sums, counts);
            if (o_.history) run.history.push_back(inertia);
            if (!o_.legacy && o_.empty == EmptyPolicy::Relocate) relocate(c, sums, counts);
            prev = c;
            double shift = 0;
            for (int j = 0; j < k_; ++j)
                shift += detail::km::update_cluster(sums.data() + std::size_t(j) * m_, counts[std::size_t(j)],
                                            c.data() + std::size_t(j) * m_, m_, plan_.e, zero_empty, o_.legacy);
            run.iterations = it;
            if (!o_.legacy && shift <= plan_.tol_abs) {
                run.converged = true;
                break;
            }
        }
    }

    double assign_accumulate(const std::vector<D>& c, std::vector<std::int64_t>& sums, std::vector<std::int64_t>& counts) {
        std::fill(sums.begin(), sums.end(), 0);
        std::fill(counts.begin(), counts.end(), 0);
        const std::vector<double> cd(c.begin(), c.end());
        std::map<Corner, double> inertia;
        statistics_pass([&](const detail::KmeansTile& tile, const Tile& t, std::mutex& mutex) {
            const detail::TileSums part = tile.assign(cd);
            const std::lock_guard lock(mutex);
            for (std::size_t i = 0; i < sums.size(); ++i) sums[i] += part.sums[i];
            for (std::size_t j = 0; j < counts.size(); ++j) counts[j] += part.counts[j];
            inertia[corner(t)] = part.inertia;
        });
        return in_tile_order(inertia);
    }

    // Sums a per-tile f64 in raster order of the tiles, whichever worker finished first.
    static double in_tile_order(const std::map<Corner, double>& parts) {
        double total = 0;
        for (const auto& [_, v] : parts) total += v;
        return total;
    }

    // §3.7 relocate: the e-th empty cluster takes the e-th farthest pixel of the scene.
    void relocate(const std::vector<D>& c, std::vector<std::int64_t>& sums, std::vector<std::int64_t>& counts) {
        std::vector<int> empty;
        for (int j = 0; j < k_; ++j)
            if (counts[std::size_t(j)] == 0) empty.push_back(j);
        if (empty.empty()) return;
        const std::vector<double> cd(c.begin(), c.end());
        detail::TilePixels cand;
        statistics_pass([&](const detail::KmeansTile& tile, const Tile&, std::mutex& mutex) {
            detail::TilePixels part = tile.farthest(cd, empty.size());
            const std::lock_guard lock(mutex);
            cand.keys.insert(cand.keys.end(), part.keys.begin(), part.keys.end());
            cand.values.insert(cand.values.end(), part.values.begin(), part.values.end());
        });
        std::map<std::int64_t, const double*> values;  // raster index → its samples
        for (std::size_t i = 0; i < cand.keys.size(); ++i) values[cand.keys[i].index] = cand.values.data() + i * m_;
        const std::vector<detail::FarPixel> far = detail::farthest(cand.keys, empty.size());
        for (std::size_t e = 0; e < far.size(); ++e)
            detail::relocate_pixel(values.at(far[e].index), c, k_, m_, empty[e], plan_.scale, sums, counts);
    }

    // ---- final pass (§3.8): restart statistics, or the labels written tile by tile ----
    detail::RestartStats final_pass(const std::vector<D>& assign, const std::vector<D>& paint, bool want_labels) {
        const std::vector<double> a(assign.begin(), assign.end()), p(paint.begin(), paint.end());
        detail::RestartStats f;
        f.counts.assign(std::size_t(k_), 0);
        std::map<Corner, double> inertia;
        const auto merge = [&](const detail::RestartStats& part, const Tile& t, std::mutex& mutex) {
            const std::lock_guard lock(mutex);
            for (int j = 0; j < k_; ++j) f.counts[std::size_t(j)] += part.counts[std::size_t(j)];
            f.exact += part.exact;
            inertia[corner(t)] = part.inertia;
        };
        if (!want_labels) {
            statistics_pass([&](const detail::KmeansTile& tile, const Tile& t, std::mutex& mutex) {
                merge(tile.final_pass(a, p, MutableCubeView{}), t, mutex);
            });
        } else {
            detail::LocalTileKernel k;
            k.out_dtype = DType::I32;
            k.out_bands = 1;
            pass(k, labels_, [&](const detail::KmeansTile& tile, const Tile& t, const MutableCubeView& o, std::mutex& mutex) {
                merge(tile.final_pass(a, p, o), t, mutex);
            });
        }
        f.inertia = in_tile_order(inertia);
        return f;
    }

    // Labels renumbered after the sort (in the caller's memory); the painted image in tiles.
    void relabel_paint(const std::vector<int>& new_label) {
        const std::vector<double>& palette = out_.result.palette;
        if (quantized_.empty()) {
            const auto l = labels_.typed<std::int32_t>();
#pragma omp parallel for num_threads(ctx_.threads()) schedule(static)
            for (int y = 0; y < l.height; ++y)
                for (int x = 0; x < l.width; ++x)
                    if (l(x, y, 0) >= 0) l(x, y, 0) = new_label[std::size_t(l(x, y, 0))];
            return;
        }
        detail::LocalTileKernel k;
        k.out_dtype = src_.dtype;
        k.out_bands = m_;
        pass(k, quantized_, [&](const detail::KmeansTile& tile, const Tile& t, const MutableCubeView& o, std::mutex&) {
            tile.relabel_paint(labels_.window(t.x0, t.y0, t.width, t.height), new_label, palette, o);
        });
    }

    const Context& ctx_;
    const detail::TileSource& src_;
    MutableCubeView labels_, quantized_;
    const KmeansOptions& o_;
    TileOptions tiles_;
    KmeansTiled& out_;
    int m_, k_;
    detail::KmeansPlan plan_;
    std::map<Corner, std::vector<std::int64_t>> first_rank_;
};

void check_host_output(const MutableCubeView& v, const char* name, const detail::TileSource& s, int bands, DType dtype) {
    if (v.on_device())
        throw InvalidInput(std::string(kWhere) + ": " + name + " is in device memory; the tiled call writes host memory");
    if (v.width() != s.width || v.height() != s.height || v.bands() != bands || v.dtype() != dtype)
        throw InvalidInput(std::string(kWhere) + ": " + name + " is " + v.describe() + "; expected " +
                           std::to_string(s.width) + "x" + std::to_string(s.height) + "x" + std::to_string(bands) + " " +
                           std::string(dtype_name(dtype)));
}

KmeansTiled kmeans_source(const Context& ctx, const detail::TileSource& src, const MutableCubeView& labels,
                          const KmeansOptions& options, const TileOptions& tiles, const MutableCubeView& quantized) {
    check_kmeans_arguments(CubeShape{src.width, src.height, src.bands, src.dtype, src.layout}, options);
    check_host_output(labels, "labels", src, 1, DType::I32);
    if (!quantized.empty()) check_host_output(quantized, "quantized", src, src.bands, src.dtype);
    if (ctx.is_cuda())
        throw InvalidInput(std::string(kWhere) + ": k-means in tiles runs on the CPU backend only for now; "
                           "use a CPU context (the CLI: --backend cpu)");
    ctx.log(std::string(kWhere) + ": " + std::string(ctx.backend_name()) + ", k = " + std::to_string(options.k) + ", " +
            std::to_string(src.width) + "x" + std::to_string(src.height) + "x" + std::to_string(src.bands));
    // Every pass reads the same tiles (the sample ranks and the inertia's order are per tile).
    detail::LocalTileKernel sizing;
    sizing.out_dtype = src.dtype;
    sizing.out_bands = src.bands;
    sizing.host_work_bytes_per_pixel = kHostBytesPerPixel;
    TileOptions fixed = tiles;
    std::tie(fixed.tile_width, fixed.tile_height) = detail::local_tile_size(ctx, src, sizing, tiles, kWhere);

    KmeansTiled out;
    KmeansResult& r = out.result;
    r.k = options.k, r.bands = src.bands, r.width = src.width, r.height = src.height, r.dtype = src.dtype;
    r.centroid_type = src.dtype == DType::F64 ? DType::F64 : DType::F32;
    if (src.dtype == DType::F64) TiledKmeans<double>(ctx, src, labels, quantized, options, fixed, out).run();
    else TiledKmeans<float>(ctx, src, labels, quantized, options, fixed, out).run();
    return out;
}

}  // namespace

KmeansTiled kmeans_tiled(const Context& ctx, const CubeView& image, const MutableCubeView& labels,
                         const KmeansOptions& options, const TileOptions& tiles, const MutableCubeView& quantized) {
    if (image.on_device()) throw InvalidInput(std::string(kWhere) + ": the image is in device memory; the tiled call reads host memory or a file");
    return kmeans_source(ctx, detail::tile_source(image), labels, options, tiles, quantized);
}

KmeansTiled kmeans_tiled(const Context& ctx, const CubeFile& file, const MutableCubeView& labels,
                         const KmeansOptions& options, const TileOptions& tiles, const MutableCubeView& quantized) {
    return kmeans_source(ctx, detail::tile_source(file), labels, options, tiles, quantized);
}

}  // namespace cubekit
