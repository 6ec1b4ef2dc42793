// The classical detectors (cubekit/detect_classical.hpp): RX (global and two-window local),
// matched filter, ACE, CEM and SAM, the background statistics they share (fitted, given as a dict,
// saved and read), and the evaluation of a score map (ROC, AUC, per-blob detection). Statistics
// cross the boundary as a dict with the statistics file's names (bands, kept_bands, dropped,
// samples, ddof, mean, covariance, eigenvalues, eigenvectors).
#include <pybind11/numpy.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "cubekit/detect_classical.hpp"
#include "cubekit/error.hpp"

namespace cubekit::python {

namespace {

template <class T>
std::vector<T> numbers(py::handle a, const std::string& what) {
    const auto arr = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(a);
    if (!arr) throw InvalidInput(what + " is not an array of numbers");
    return std::vector<T>(arr.data(), arr.data() + arr.size());
}

py::dict stats_dict(const BackgroundStats& s) {
    const auto K = py::ssize_t(s.kept.size());
    py::dict d;
    d["bands"] = s.bands;
    d["kept_bands"] = array_of(std::vector<std::int64_t>(s.kept.begin(), s.kept.end()), {K});
    py::list dropped;
    for (const DroppedBand& b : s.dropped) {
        py::dict e;
        e["band"] = b.band;
        e["reason"] = b.reason;
        dropped.append(e);
    }
    d["dropped"] = dropped;
    d["samples"] = s.samples;
    d["ddof"] = s.ddof;
    d["mean"] = array_of(s.mean, {py::ssize_t(s.mean.size())});
    d["covariance"] = array_of(s.covariance, s.covariance.size() == std::size_t(K * K) ? std::vector<py::ssize_t>{K, K}
                                                                                      : std::vector<py::ssize_t>{0, 0});
    const auto E = py::ssize_t(s.eigenvalues.size());
    d["eigenvalues"] = array_of(s.eigenvalues, {E});
    d["eigenvectors"] = array_of(s.eigenvectors, s.eigenvectors.size() == std::size_t(E * E)
                                                     ? std::vector<py::ssize_t>{E, E}
                                                     : std::vector<py::ssize_t>{py::ssize_t(s.eigenvectors.size())});
    return d;
}

/// A statistics dict (the names above; eigenvalues/eigenvectors and dropped optional) as the
/// library's struct; the library checks it against the cube when it is applied.
BackgroundStats stats_from(const py::dict& d, const char* function) {
    const std::string who = std::string(function) + ": background";
    const auto need = [&](const char* key) -> py::object {
        if (!d.contains(key)) throw InvalidInput(who + " has no '" + key + "'; expected the dict of background_stats()");
        return d[key];
    };
    BackgroundStats s;
    try {
        s.bands = need("bands").cast<int>();
        s.samples = need("samples").cast<std::int64_t>();
        s.ddof = d.contains("ddof") ? d["ddof"].cast<int>() : 0;
    } catch (const py::cast_error&) {
        throw InvalidInput(who + ": bands, samples and ddof must be integers");
    }
    for (std::int64_t b : numbers<std::int64_t>(need("kept_bands"), who + ": kept_bands")) s.kept.push_back(int(b));
    s.mean = numbers<double>(need("mean"), who + ": mean");
    s.covariance = numbers<double>(need("covariance"), who + ": covariance");
    const std::size_t K = s.kept.size();
    if (s.mean.size() != K || s.covariance.size() != K * K)
        throw InvalidInput(who + ": " + std::to_string(K) + " kept_bands, " + std::to_string(s.mean.size()) +
                           " mean values and " + std::to_string(s.covariance.size()) +
                           " covariance values; expected K and K*K");
    if (d.contains("eigenvalues") && d.contains("eigenvectors") && !d["eigenvalues"].is_none()) {
        s.eigenvalues = numbers<double>(d["eigenvalues"], who + ": eigenvalues");
        s.eigenvectors = numbers<double>(d["eigenvectors"], who + ": eigenvectors");
        if (s.eigenvalues.size() != K || s.eigenvectors.size() != K * K) s.eigenvalues.clear(), s.eigenvectors.clear();
    }
    if (d.contains("dropped") && !d["dropped"].is_none())
        for (py::handle e : d["dropped"]) {
            const py::dict row = py::reinterpret_borrow<py::dict>(e);
            s.dropped.push_back({row["band"].cast<int>(), row["reason"].cast<std::string>()});
        }
    return s;
}


/// What both classical bindings parse: the options (detector set), the target spectrum or mask, the
/// given background statistics.
struct ClassicalRequest {
    std::string function;
    ClassicalOptions o;
    bool local = false;
    std::optional<ArrayView> mask;
    std::vector<double> target;
    bool given = false;  ///< background statistics given
    BackgroundStats stats;
};

ClassicalRequest classical_request(const std::string& detector, py::object target, py::object target_mask,
                                   py::object background, const py::dict& keywords) {
    ClassicalRequest r;
    r.function = detector == "mf" ? "matched_filter" : detector;
    r.o = options_from<ClassicalOptions>(keywords, r.function.c_str());
    r.o.detector = parse_enum<Detector>(detector, "detector");
    r.local = r.o.window[1] != 0;
    if (r.local && !background.is_none())
        throw InvalidInput(r.function + ": background: local RX (window) fits its own windows; give one or the other");
    if (!target_mask.is_none()) r.mask = array_view(target_mask, r.function.c_str(), "target_mask");
    if (!target.is_none()) r.target = numbers<double>(target, r.function + ": target");
    if (r.o.detector != Detector::Rx && target.is_none() && !r.mask)
        throw InvalidInput(r.function + ": target: give a spectrum (one value per band) or target_mask=");
    r.given = !background.is_none();
    if (r.given) r.stats = stats_from(py::reinterpret_borrow<py::dict>(background), r.function.c_str());
    return r;
}

/// classical(ctx, cube, out, detector, target or None, target_mask or None, background dict or
/// None, keywords, progress) -> (scores, info). The score map is `out` when given (of the input's
/// kind; filled in place where it lives on the context's side), else a new NumPy array. info: the
/// statistics used (global) or the singular-window count (local RX).
py::tuple classical_binding(PyContext& c, py::handle cube, py::object out, const std::string& detector,
                            py::object target, py::object target_mask, py::object background, const py::dict& keywords,
                            py::object progress) {
    ClassicalRequest r = classical_request(detector, target, target_mask, background, keywords);
    const std::string& function = r.function;
    const ClassicalOptions& o = r.o;
    const bool local = r.local;
    const ArrayView in = array_view(cube, function.c_str(), "cube");
    const std::optional<ArrayView>& mask = r.mask;
    std::vector<double>& t = r.target;
    const bool given = r.given;
    BackgroundStats& stats = r.stats;
    std::optional<MutableArrayView> ov;
    if (!out.is_none()) {
        ov = mutable_array_view(out, function.c_str(), "out");
        check_out(function.c_str(), *ov, in.view.width(), in.view.height(), 1, o.out_type);
    }
    LocalRxReport report;
    Cube host = c.run(std::move(progress), [&](const Context& ctx) {
        if (mask) t = target_from_mask(ctx, in.view, mask->view);
        const bool into = ov && in_context_memory(ctx, ov->view);
        if (local) {
            if (into) {
                local_rx_into(ctx, in.view, o, ov->view, &report);
                return Cube();
            }
            return local_rx(ctx, in.view, o, &report);
        }
        if (!given)
            stats = o.detector == Detector::Sam ? screen_bands(ctx, in.view, o.keep_all_bands) : fit_background(ctx, in.view, o);
        if (into) {
            apply_detector_into(ctx, in.view, stats, o, t, ov->view);
            return Cube();
        }
        return apply_detector(ctx, in.view, stats, o, t);
    });
    py::object scores;
    if (!ov) {
        scores = to_numpy(std::move(host));
    } else {
        if (!host.empty()) {
            c.run(py::none(), [&](const Context& ctx) {
                copy_cube(ctx, host, ov->view);
                ctx.synchronize();
            });
        }
        scores = out;
    }
    py::dict info;
    if (local) info["singular"] = report.singular;
    else info["stats"] = stats_dict(stats);
    if (!t.empty()) info["target"] = array_of(t, {py::ssize_t(t.size())});
    return py::make_tuple(scores, info);
}

/// classical_tiled(ctx, cube_or_path, detector, target or None, target_mask or None, background or None,
/// keywords, tiles, progress, out or None) -> (scores, info with "tiled"): as classical, within the memory budgets
/// and over the devices of `tiles`, from a NumPy array or a file read by windows (the screening, the
/// statistics and a target mask's spectrum a strip of rows at a time). The same numbers as classical.
py::tuple classical_tiled_binding(PyContext& c, py::handle cube, const std::string& detector, py::object target,
                                  py::object target_mask, py::object background, const py::dict& keywords,
                                  const py::dict& tiles, py::object progress, py::object out) {
    ClassicalRequest r = classical_request(detector, target, target_mask, background, keywords);
    const std::string& function = r.function;
    const ClassicalOptions& o = r.o;
    const bool local = r.local;
    const TileOptions t = tile_options_from(tiles);
    const TiledInput in = tiled_input(cube, function.c_str());
    const std::optional<ArrayView>& mask = r.mask;
    std::vector<double>& spectrum = r.target;
    const bool given = r.given;
    BackgroundStats& stats = r.stats;
    std::optional<MutableArrayView> ov;  // a host array (a memmap, say) filled in place
    if (!out.is_none()) {
        ov = mutable_array_view(out, function.c_str(), "out");
        check_out(function.c_str(), *ov, in.width(), in.height(), 1, o.out_type);
    }
    Cube owned = ov ? Cube() : Cube(in.width(), in.height(), 1, o.out_type);
    const MutableCubeView scores = ov ? ov->view : owned.mutable_view();
    LocalRxReport report;
    const TiledRun run = c.run(std::move(progress), [&](const Context& ctx) {
        if (mask) spectrum = in.file ? target_from_mask(ctx, *in.file, mask->view, t.memory_limit)
                                     : target_from_mask(ctx, in.array->view, mask->view);
        if (local)
            return in.file ? local_rx_tiled(ctx, *in.file, o, scores, t, &report)
                           : local_rx_tiled(ctx, in.array->view, o, scores, t, &report);
        if (!given) {
            const bool fit = o.detector != Detector::Sam;
            if (in.file) stats = fit ? fit_background(ctx, *in.file, o, nullptr, t.memory_limit)
                                     : screen_bands(ctx, *in.file, o.keep_all_bands, t.memory_limit);
            else stats = fit ? fit_background(ctx, in.array->view, o) : screen_bands(ctx, in.array->view, o.keep_all_bands);
        }
        return in.file ? apply_detector_tiled(ctx, *in.file, stats, o, spectrum, scores, t)
                       : apply_detector_tiled(ctx, in.array->view, stats, o, spectrum, scores, t);
    });
    py::dict info;
    if (local) info["singular"] = report.singular;
    else info["stats"] = stats_dict(stats);
    if (!spectrum.empty()) info["target"] = array_of(spectrum, {py::ssize_t(spectrum.size())});
    info["tiled"] = tiled_dict(run);
    return py::make_tuple(ov ? out : to_numpy(std::move(owned)), info);
}

/// background_stats(ctx, cube (an array, or a file path read a strip of rows at a time), mask or None,
/// keywords, progress, memory_limit) -> dict.
py::dict background_binding(PyContext& c, py::handle cube, py::object mask, const py::dict& keywords,
                            py::object progress, py::object memory_limit) {
    const ClassicalOptions o = options_from<ClassicalOptions>(keywords, "background_stats");
    py::dict limit;
    limit["memory_limit"] = memory_limit;  // None, a byte count or "512M", as the tiled calls take it
    const std::size_t strip_bytes = tile_options_from(limit).memory_limit;
    const TiledInput in = tiled_input(cube, "background_stats");
    std::optional<ArrayView> m;
    if (!mask.is_none()) m = array_view(mask, "background_stats", "mask");
    const BackgroundStats s = c.run(std::move(progress), [&](const Context& ctx) {
        if (in.file) return fit_background(ctx, *in.file, o, m ? &m->view : nullptr, strip_bytes);
        return fit_background(ctx, in.array->view, o, m ? &m->view : nullptr);
    });
    return stats_dict(s);
}

py::dict score_dict(const DetectionScore& r) {
    py::dict d;
    d["auc"] = r.auc;
    d["blobs"] = r.blobs.size();
    d["blobs_found"] = r.blobs_found;
    d["far"] = r.far;
    d["far_requested"] = r.far_requested;
    d["threshold"] = r.threshold;
    d["pd"] = r.pd;
    d["target_pixels"] = r.targets;
    d["background_pixels"] = r.background;
    d["nan_scores"] = r.nan_scores;
    py::list blobs;
    for (const BlobDetection& b : r.blobs) {
        py::dict e;
        e["label"] = b.label;
        e["area"] = b.area;
        e["box"] = py::make_tuple(b.x0, b.y0, b.x1, b.y1);
        e["peak"] = b.peak;
        e["found"] = b.found;
        blobs.append(e);
    }
    d["blob_list"] = blobs;
    std::vector<double> roc;
    for (const RocPoint& p : r.roc) roc.insert(roc.end(), {p.threshold, p.far, p.pd});
    d["roc"] = array_of(roc, {py::ssize_t(r.roc.size()), 3});
    return d;
}

}  // namespace

void bind_detect_classical(py::module_& m) {
    m.def("classical_declarations", &declarations<ClassicalOptions>);
    m.def("classical", &classical_binding);
    m.def("classical_tiled", &classical_tiled_binding);
    m.def("background_stats", &background_binding);
    // background_from_piece_sums(parts (pca_piece_sums tuples), bands, kept, dropped [(band, reason)], ddof)
    // -> dict: the statistics of a scene cut into pieces (cubekit.dask.background_stats).
    m.def("background_from_piece_sums", [](const py::list& parts, int bands, const std::vector<int>& kept,
                                           const std::vector<std::pair<int, std::string>>& dropped, int ddof) {
        const PcaPieceSums total = merged_pca_sums(parts, "background_stats");
        BackgroundStats screened;
        screened.bands = bands;
        screened.kept = kept;
        for (const auto& [band, reason] : dropped) screened.dropped.push_back({band, reason});
        return stats_dict(background_from_piece_sums(std::move(screened), total, ddof));
    });
    m.def("write_background_stats", [](const py::dict& stats, const std::string& path) {
        write_background_stats(stats_from(stats, "write_background_stats"), path);
    });
    m.def("read_background_stats", [](const std::string& path) { return stats_dict(read_background_stats(path)); });
    m.def("read_target_spectrum", [](const std::string& path, const std::vector<double>& wavelengths, int bands) {
        const std::vector<double> t = read_target_spectrum(path, wavelengths, bands);
        return array_of(t, {py::ssize_t(t.size())});
    });
    m.def("detect_score", [](PyContext& c, py::handle scores, py::handle mask, double far) {
        const ArrayView s = array_view(scores, "detect_score", "scores");
        const ArrayView k = array_view(mask, "detect_score", "mask");
        const DetectionScore r = c.run(py::none(), [&](const Context& ctx) { return score_detection(ctx, s.view, k.view, far); });
        return score_dict(r);
    });
}

}  // namespace cubekit::python
