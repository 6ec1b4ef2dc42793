// k-means in tiles (tiles.hpp, kmeans.hpp) and over the pieces of any caller (tiled_driver.hpp): the
// whole-scene engine's passes run over the pieces with the scene's plan and merge exactly, so the
// labels, centroids, counts, palette, quantized image and iterations equal kmeans_into's bit for bit:
//   - the first pass's valid count, ranges and exact moments are sums, minima and maxima;
//   - the init sample is drawn by valid rank (the pieces' per-row valid counts give every pixel its
//     rank), gathered in rank order, and seeded by the engine on that gathered sample;
//   - every Lloyd pass adds exact integer sums and counts; a relocation takes the farthest pixels
//     of the pieces' own farthest (ties: lower raster index, the same order as the valid index);
//   - a final pass counts, the sort renumbers, and a last pass writes each tile's labels and paints.
// Only the f64 inertia (and history) is summed in another order: per piece, then the pieces in order.
#include <algorithm>
#include <cstring>
#include <chrono>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <string>
#include <utility>

#include "core/tiled_local.hpp"
#include "cubekit/error.hpp"
#include "kmeans/tiled_driver.hpp"

namespace cubekit {
namespace detail {

std::vector<double> TilePixels::doubles() const {
    return visit_dtype(dtype, [&](auto tag) {
        using T = decltype(tag);
        std::vector<double> out(values.size() / sizeof(T));
        for (std::size_t i = 0; i < out.size(); ++i) {
            T v;
            std::memcpy(&v, values.data() + i * sizeof(T), sizeof(T));
            out[i] = double(v);
        }
        return out;
    });
}

void TilePixels::set_doubles(const std::vector<double>& v, DType type) {
    dtype = type;
    visit_dtype(type, [&](auto tag) {
        using T = decltype(tag);
        values.resize(v.size() * sizeof(T));
        for (std::size_t i = 0; i < v.size(); ++i) {
            const T x = T(v[i]);
            std::memcpy(values.data() + i * sizeof(T), &x, sizeof(T));
        }
    });
}

void TilePixels::append(const TilePixels& other) {
    if (other.keys.empty()) return;
    dtype = other.dtype;
    keys.insert(keys.end(), other.keys.begin(), other.keys.end());
    values.insert(values.end(), other.values.begin(), other.values.end());
}

KmeansOptions piece_options(int k, std::vector<std::uint8_t> mask) {
    KmeansOptions o;
    o.k = k;
    o.mask = std::move(mask);
    return o;
}

KmeansPart compute_part(const KmeansTile& tile, Corner corner, const KmeansRequest& r) {
    KmeansPart part;
    part.corner = corner;
    switch (r.pass) {
        case KmeansPass::Range:
            part.row_valid = tile.row_valid();
            part.stats = tile.range();
            break;
        case KmeansPass::Moments: part.moments = tile.moments(); break;
        case KmeansPass::Sample: part.pixels = tile.sample(r.seed, r.rate, r.all, r.first_rank.at(corner)); break;
        case KmeansPass::Assign: part.sums = tile.assign(r.a); break;
        case KmeansPass::Farthest: part.pixels = tile.farthest(r.a, r.wanted); break;
        case KmeansPass::Final: part.final = tile.final_pass(r.a, r.p, MutableCubeView{}); break;
        case KmeansPass::Labels: throw InvalidInput("kmeans: the labels pass writes labels (internal)");
    }
    return part;
}

namespace {

// The engine's control flow (cpu.cpp's CpuKmeans, step by step) with every pass asked of the pieces.
template <typename D>
class PieceKmeans {
public:
    PieceKmeans(const Context& ctx, int width, int height, int bands, DType dtype, const KmeansOptions& options,
                const PassRunner& run_pass, KmeansResult& result, const SampleSeeding& kmeanspp)
        : ctx_(ctx), width_(width), height_(height), m_(bands), k_(options.k), dtype_(dtype), o_(options),
          run_pass_(run_pass), r_(result), kmeanspp_(kmeanspp) {}

    std::vector<int> run(KmeansRequest& labelling) {
        prepare();
        r_.valid_pixels = plan_.valid;
        const auto [c, prev] = run_restarts<D>(
            ctx_, o_, r_, [&](std::uint64_t seed) { return initial_centroids(seed); },
            [&](std::vector<D>& cent, std::vector<D>& previous, KmeansRun& run) { lloyd(cent, previous, run); },
            [&](const std::vector<D>& cent, const std::vector<D>& previous) {
                return final_pass(o_.legacy ? previous : cent, cent);
            });
        const RestartStats f = final_pass(o_.legacy ? prev : c, c);
        labelling = request(KmeansPass::Labels);
        labelling.a = doubles(o_.legacy ? prev : c), labelling.p = doubles(c);
        labelling.new_label = finish_result(r_, c, f.counts, f.inertia, dtype_, o_.legacy);
        return labelling.new_label;
    }

private:
    static std::vector<double> doubles(const std::vector<D>& c) { return std::vector<double>(c.begin(), c.end()); }
    KmeansRequest request(KmeansPass pass) const {
        KmeansRequest r;
        r.pass = pass;
        r.plan = plan_;
        r.plan.k = k_;
        return r;
    }
    template <class Merge>
    void pass(const KmeansRequest& r, Merge&& merge) {
        run_pass_(r, [&](KmeansPart&& part) { merge(part); });
    }

    // ---- first pass: valid pixels, ranges, exact moments (§3.3) ----
    void prepare() {
        KmeansStats stats;
        stats.lo.assign(std::size_t(m_), std::numeric_limits<double>::infinity());
        stats.hi.assign(std::size_t(m_), -std::numeric_limits<double>::infinity());
        std::map<Corner, std::vector<std::int64_t>> rows;
        pass(request(KmeansPass::Range), [&](KmeansPart& part) {
            rows[part.corner] = std::move(part.row_valid);
            stats.valid += part.stats.valid;
            for (int b = 0; b < m_; ++b) {
                stats.lo[std::size_t(b)] = std::min(stats.lo[std::size_t(b)], part.stats.lo[std::size_t(b)]);
                stats.hi[std::size_t(b)] = std::max(stats.hi[std::size_t(b)], part.stats.hi[std::size_t(b)]);
            }
        });
        plan_ = make_plan(o_, m_, std::int64_t(width_) * height_, dtype_is_float(dtype_), stats);
        BandMoments moments;
        moments.sum_q.assign(std::size_t(m_), 0);
        moments.sum_q2.assign(std::size_t(m_), 0);
        pass(request(KmeansPass::Moments), [&](KmeansPart& part) { moments.add(part.moments.sum_q, part.moments.sum_q2); });
        set_tolerance(plan_, o_.tol, moments.sum_q, moments.sum_q2);
        first_ranks(rows);
    }

    // The valid rank of each piece's first valid pixel in each of its rows: rows in order, and within
    // a row the pieces from left to right (pieces of one band of rows share their y0 and height).
    void first_ranks(const std::map<Corner, std::vector<std::int64_t>>& rows) {
        std::int64_t rank = 0;
        for (auto band = rows.begin(); band != rows.end();) {
            auto end = band;
            while (end != rows.end() && end->first.first == band->first.first) ++end;
            for (std::size_t y = 0; y < band->second.size(); ++y)
                for (auto t = band; t != end; ++t) {
                    if (t->second.size() != band->second.size())
                        throw InvalidInput("kmeans: pieces starting on one row must have one height (a grid of chunks)");
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
            c = simple_init(plan_, o_, 0, seed, {});
        } else {
            // The engine draws from its sample; an unlucky sample smaller than k is every valid pixel.
            const bool sampled = sampling_active(o_, plan_.valid);
            Cube sample = gather(seed, !sampled);
            if (sampled && sample.width() < o_.k) sample = gather(seed, true);
            c = o_.init == KmeansInit::KmeansPlusPlus && kmeanspp_ ? kmeanspp_(sample.view(), plan_, seed)
                                                                   : kmeans_sample_init_cpu(ctx_, sample.view(), o_, plan_, seed);
        }
        return std::vector<D>(c.begin(), c.end());
    }

    // The init sample (or every valid pixel), n × 1 × m in rank order, in the input's type.
    Cube gather(std::uint64_t seed, bool all) {
        KmeansRequest r = request(KmeansPass::Sample);
        r.seed = seed, r.rate = sample_rate(o_, plan_.valid), r.all = all, r.first_rank = first_rank_;
        // The parts are kept as they come; each pixel is then copied once, to its rank's place.
        std::vector<TilePixels> parts;
        std::size_t count = 0;
        pass(r, [&](KmeansPart& part) {
            count += part.pixels.keys.size();
            if (!part.pixels.keys.empty()) parts.push_back(std::move(part.pixels));
        });
        if (count == 0) return Cube();
        struct Source {
            std::int64_t rank;
            const std::byte* values;
        };
        const std::size_t pixel_bytes = std::size_t(m_) * dtype_size(dtype_);
        std::vector<Source> order;
        order.reserve(count);
        for (const TilePixels& p : parts)
            for (std::size_t i = 0; i < p.keys.size(); ++i) order.push_back({p.keys[i].index, p.values.data() + i * pixel_bytes});
        std::sort(order.begin(), order.end(), [](const Source& a, const Source& b) { return a.rank < b.rank; });
        Cube sample(int(count), 1, m_, dtype_, Layout::BIP);
        std::byte* to = sample.mutable_view().data();
#pragma omp parallel for num_threads(ctx_.threads()) schedule(static)
        for (std::int64_t i = 0; i < std::int64_t(count); ++i)
            std::memcpy(to + std::size_t(i) * pixel_bytes, order[std::size_t(i)].values, pixel_bytes);
        return sample;
    }

    // ---- Lloyd iterations (§3.3, 3.5–3.7), as the engine runs them ----
    void lloyd(std::vector<D>& c, std::vector<D>& prev, KmeansRun& run) {
        lloyd_loop(ctx_, o_, plan_, c, prev, run,
                   [&](const std::vector<D>& cent, std::vector<std::int64_t>& sums, std::vector<std::int64_t>& counts) {
                       return assign_accumulate(cent, sums, counts);
                   },
                   [&](const std::vector<D>& cent, std::vector<std::int64_t>& sums, std::vector<std::int64_t>& counts) {
                       relocate(cent, sums, counts);
                   });
    }

    double assign_accumulate(const std::vector<D>& c, std::vector<std::int64_t>& sums, std::vector<std::int64_t>& counts) {
        std::fill(sums.begin(), sums.end(), 0);
        std::fill(counts.begin(), counts.end(), 0);
        KmeansRequest r = request(KmeansPass::Assign);
        r.a = doubles(c);
        std::map<Corner, double> inertia;
        pass(r, [&](KmeansPart& part) {
            for (std::size_t i = 0; i < sums.size(); ++i) sums[i] += part.sums.sums[i];
            for (std::size_t j = 0; j < counts.size(); ++j) counts[j] += part.sums.counts[j];
            inertia[part.corner] = part.sums.inertia;
        });
        return in_piece_order(inertia);
    }

    // Sums a per-piece f64 in raster order of the pieces, whichever answered first.
    static double in_piece_order(const std::map<Corner, double>& parts) {
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
        KmeansRequest r = request(KmeansPass::Farthest);
        r.a = doubles(c), r.wanted = empty.size();
        TilePixels cand;
        pass(r, [&](KmeansPart& part) { cand.append(part.pixels); });
        const std::vector<double> cand_values = cand.doubles();
        std::map<std::int64_t, const double*> values;  // raster index → its samples
        for (std::size_t i = 0; i < cand.keys.size(); ++i) values[cand.keys[i].index] = cand_values.data() + i * m_;
        const std::vector<FarPixel> far = farthest(cand.keys, empty.size());
        for (std::size_t e = 0; e < far.size(); ++e)
            relocate_pixel(values.at(far[e].index), c, k_, m_, empty[e], plan_.scale, sums, counts);
    }

    // ---- final pass (§3.8): counts, f64 inertia and the exact inertia of these centroids ----
    RestartStats final_pass(const std::vector<D>& assign, const std::vector<D>& paint) {
        KmeansRequest r = request(KmeansPass::Final);
        r.a = doubles(assign), r.p = doubles(paint);
        RestartStats f;
        f.counts.assign(std::size_t(k_), 0);
        std::map<Corner, double> inertia;
        pass(r, [&](KmeansPart& part) {
            for (int j = 0; j < k_; ++j) f.counts[std::size_t(j)] += part.final.counts[std::size_t(j)];
            f.exact += part.final.exact;
            inertia[part.corner] = part.final.inertia;
        });
        f.inertia = in_piece_order(inertia);
        return f;
    }

    const Context& ctx_;
    int width_, height_, m_, k_;
    DType dtype_;
    const KmeansOptions& o_;
    const PassRunner& run_pass_;
    KmeansResult& r_;
    const SampleSeeding& kmeanspp_;
    KmeansPlan plan_;
    std::map<Corner, std::vector<std::int64_t>> first_rank_;
};

}  // namespace

std::vector<int> run_kmeans_pieces(const Context& ctx, int width, int height, int bands, DType dtype,
                                   const KmeansOptions& options, const PassRunner& run_pass, KmeansResult& result,
                                   KmeansRequest& final_request, const SampleSeeding& kmeanspp) {
    result.k = options.k, result.bands = bands, result.width = width, result.height = height, result.dtype = dtype;
    result.centroid_type = dtype == DType::F64 ? DType::F64 : DType::F32;
    if (dtype == DType::F64)
        return PieceKmeans<double>(ctx, width, height, bands, dtype, options, run_pass, result, kmeanspp).run(final_request);
    return PieceKmeans<float>(ctx, width, height, bands, dtype, options, run_pass, result, kmeanspp).run(final_request);
}

}  // namespace detail

namespace {

constexpr const char* kWhere = "kmeans_tiled";
// Host scratch per pixel of a tile: its valid indices (8), the relocation's candidates (16), the
// label tile (4), the flags and the mask cut (2).
constexpr std::size_t kHostBytesPerPixel = 30;
// Device scratch per pixel of a tile, beyond its BIP copy: flags and valid index (9), the labels (4),
// the relocation's distances (8), the sample's flags and positions (9).
constexpr std::size_t kDeviceBytesPerPixel = 30;

detail::Corner corner(const Tile& t) { return {t.y0, t.x0}; }

// k-means++ on the context's device when the sample (values and the 16-byte exact weights) fits the
// device budget; the CPU engine otherwise (the same centroids either way).
detail::SampleSeeding device_seeding(const Context& ctx, const KmeansOptions& options, const TileOptions& tiles) {
    if (!ctx.is_cuda()) return {};
    return [&ctx, &options, limit = tiles.device_memory_limit](const CubeView& sample, const detail::KmeansPlan& plan,
                                                                std::uint64_t seed) {
        const std::size_t bytes = sample.num_pixels() * (std::size_t(sample.bands()) * dtype_size(sample.dtype()) + 24);
        if (limit != 0 && bytes > limit) return detail::kmeans_sample_init_cpu(ctx, sample, options, plan, seed);
        return detail::kmeanspp_sample_init_cuda(ctx, sample, plan, seed);
    };
}

std::vector<std::uint8_t> mask_of(const std::vector<std::uint8_t>& mask, int width, const Tile& t) {
    if (mask.empty()) return {};
    std::vector<std::uint8_t> cut;
    cut.reserve(std::size_t(t.width) * std::size_t(t.height));
    for (int y = t.y0; y < t.y0 + t.height; ++y) {
        const auto row = mask.begin() + std::ptrdiff_t(y) * width + t.x0;
        cut.insert(cut.end(), row, row + t.width);
    }
    return cut;
}

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
    ctx.log(std::string(kWhere) + ": " + std::string(ctx.backend_name()) + ", k = " + std::to_string(options.k) + ", " +
            std::to_string(src.width) + "x" + std::to_string(src.height) + "x" + std::to_string(src.bands));
    // Every pass reads the same tiles (the sample ranks and the inertia's order are per tile).
    detail::LocalTileKernel k;
    k.out_dtype = src.dtype;
    k.out_bands = src.bands;
    // The tiles are sized once for every pass: the labels pass writes 4 bytes a pixel, more than the
    // painted tile of a 1- to 3-byte pixel (u8 RGB went 1.6 % over a host budget).
    const std::size_t pixel_bytes = std::size_t(src.bands) * dtype_size(src.dtype);
    k.host_work_bytes_per_pixel = kHostBytesPerPixel + (pixel_bytes < 4 ? 4 - pixel_bytes : 0);
    k.device_work_bytes_per_pixel = std::size_t(src.bands) * dtype_size(src.dtype) + kDeviceBytesPerPixel;
    TileOptions fixed = tiles;
    std::tie(fixed.tile_width, fixed.tile_height) = detail::local_tile_size(ctx, src, k, tiles, kWhere);

    KmeansTiled out;
    detail::KmeansPlan plan;  // the scene's, as the current pass asks (incomplete in the first)
    const auto tile_of = [&](const Context& c, const Tile& t, const CubeView& in) {
        const KmeansOptions o = detail::piece_options(options.k, mask_of(options.mask, src.width, t));
        return c.is_cuda() ? detail::kmeans_tile_cuda(c, in, t.x0, t.y0, src.width, o, plan)
                           : detail::kmeans_tile_cpu(c, in, t.x0, t.y0, src.width, o, plan);
    };
    // A pass: run_local_tiles over the tiles, `body(tile, t, out)` on each, the merges under one lock.
    const auto run_tiles = [&](detail::LocalTileKernel kernel, const MutableCubeView& output, auto&& body) {
        std::mutex mutex;
        kernel.run_tile = [&](const Context& c, const Tile& t, const CubeView& in, const MutableCubeView& o) {
            body(*tile_of(c, t, in), t, o, mutex);
        };
        const TiledRun run = detail::run_local_tiles(ctx, src, output, kernel, fixed, kWhere);
        detail::merge_peak(out.run, run);
        out.run.tiles = run.tiles, out.run.tile_width = run.tile_width, out.run.tile_height = run.tile_height;
        ++out.passes;
    };
    const detail::PassRunner run_pass = [&](const detail::KmeansRequest& r,
                                            const std::function<void(detail::KmeansPart&&)>& merge) {
        static constexpr const char* kPassNames[] = {"range", "moments", "sample", "assign", "farthest", "final", "labels"};
        const auto t0 = std::chrono::steady_clock::now();
        plan = r.plan;
        detail::LocalTileKernel statistics = k;
        statistics.out_bands = 0;
        run_tiles(statistics, MutableCubeView{}, [&](const detail::KmeansTile& tile, const Tile& t, const MutableCubeView&,
                                                     std::mutex& mutex) {
            detail::KmeansPart part = detail::compute_part(tile, corner(t), r);
            const std::lock_guard lock(mutex);
            merge(std::move(part));
        });
        const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - t0;
        ctx.log(std::string(kWhere) + ": pass " + std::to_string(out.passes) + " (" + kPassNames[int(r.pass)] +
                "): " + std::to_string(took.count()) + " ms");
    };
    detail::KmeansRequest labelling;
    const std::vector<int> new_label = detail::run_kmeans_pieces(ctx, src.width, src.height, src.bands, src.dtype, options,
                                                                 run_pass, out.result, labelling, device_seeding(ctx, options, tiles));
    // The labels, sorted, tile by tile; then the painting, which reads the labels back.
    plan = labelling.plan;
    detail::LocalTileKernel label_kernel = k;
    label_kernel.out_dtype = DType::I32;
    label_kernel.out_bands = 1;
    run_tiles(label_kernel, labels, [&](const detail::KmeansTile& tile, const Tile&, const MutableCubeView& o, std::mutex&) {
        tile.final_pass(labelling.a, labelling.p, o);
        tile.relabel_paint(o, new_label, {}, MutableCubeView{});
    });
    if (!quantized.empty()) {
        std::vector<int> same(new_label.size());
        std::iota(same.begin(), same.end(), 0);
        run_tiles(k, quantized, [&](const detail::KmeansTile& tile, const Tile& t, const MutableCubeView& o, std::mutex&) {
            tile.relabel_paint(labels.window(t.x0, t.y0, t.width, t.height), same, out.result.palette, o);
        });
    }
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
