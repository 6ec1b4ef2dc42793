// Synthetic target-detection scenes (spec detect.md §C.3). Every formula is stated in
// include/cubekit/synth.hpp; this file follows it line by line: draw the objects, rasterise their
// 4×4-supersampled coverage, then fill the cube row by row (OpenMP), each row reading its own copy
// of the one noise stream.
#include "cubekit/synth.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <string>

#include "cubekit/error.hpp"

namespace cubekit {
namespace {

constexpr int kSuper = 4;                      // supersampling: kSuper × kSuper points per pixel
constexpr int kPoints = kSuper * kSuper;       // α = inside / kPoints
constexpr int kMaxTries = 10000;               // centre draws per object before giving up
constexpr double kPi = std::numbers::pi;
constexpr double kCos30 = 0.86602540378443864676;  // √3/2
constexpr double kSin30 = 0.5;

std::string function_name(SynthSceneKind kind) {
    return kind == SynthSceneKind::Castaways ? "synth_castaways" : "synth_leaves";
}

double logistic(double lambda, double mu, double w) { return 1.0 / (1.0 + std::exp(-(lambda - mu) / w)); }

SynthMaterial material_of(SynthObjectKind kind) {
    switch (kind) {
        case SynthObjectKind::Castaway: return SynthMaterial::Castaway;
        case SynthObjectKind::Buoy: return SynthMaterial::Buoy;
        case SynthObjectKind::Boat: return SynthMaterial::Boat;
        case SynthObjectKind::Leaf: return SynthMaterial::Leaf;
    }
    return SynthMaterial::Castaway;
}

double uniform_in(SplitMix64& rng, double lo, double hi) { return lo + (hi - lo) * rng.uniform(); }

// ---- objects: shape parameters, placement, membership ---------------------------------------------

/// The shape of one object, drawn in the order the header states (a, b, θ, amplitude).
SynthObject draw_shape(SynthObjectKind kind, int id, SplitMix64& rng) {
    SynthObject o{.kind = kind, .id = id, .target = kind == SynthObjectKind::Castaway || kind == SynthObjectKind::Leaf};
    switch (kind) {
        case SynthObjectKind::Castaway:
            o.half_length = uniform_in(rng, 6, 12);
            o.half_width = uniform_in(rng, 3, 6);
            o.angle = uniform_in(rng, 0, kPi);
            break;
        case SynthObjectKind::Buoy:
            o.half_length = o.half_width = uniform_in(rng, 3, 5);
            break;
        case SynthObjectKind::Boat:
            o.half_length = uniform_in(rng, 20, 60) / 2;
            o.half_width = uniform_in(rng, 8, 20) / 2;
            o.angle = uniform_in(rng, 0, kPi);
            break;
        case SynthObjectKind::Leaf:
            o.half_length = uniform_in(rng, 15, 30);
            o.half_width = uniform_in(rng, 8, 15);
            o.angle = uniform_in(rng, 0, kPi);
            o.amplitude = uniform_in(rng, 0.9, 1.1);
            break;
    }
    o.radius = kind == SynthObjectKind::Boat ? std::hypot(o.half_length, o.half_width) : o.half_length;
    return o;
}

/// True when (px, py) lies inside the object (closed boundary).
bool inside(const SynthObject& o, double px, double py) {
    const double dx = px - o.cx, dy = py - o.cy;
    if (o.kind == SynthObjectKind::Buoy) return dx * dx + dy * dy <= o.half_length * o.half_length;
    const double c = std::cos(o.angle), s = std::sin(o.angle);
    const double u = dx * c + dy * s, v = -dx * s + dy * c;
    if (o.kind == SynthObjectKind::Boat) return std::abs(u) <= o.half_length && std::abs(v) <= o.half_width;
    const double eu = u / o.half_length, ev = v / o.half_width;
    return eu * eu + ev * ev <= 1.0;
}

/// Half the extent of the object's axis-aligned box, along x (first) and y.
std::array<double, 2> half_extent(const SynthObject& o) {
    const double c = std::abs(std::cos(o.angle)), s = std::abs(std::sin(o.angle));
    const double a = o.half_length, b = o.half_width;
    if (o.kind == SynthObjectKind::Boat) return {a * c + b * s, a * s + b * c};
    if (o.kind == SynthObjectKind::Buoy) return {a, a};
    return {std::sqrt(a * a * c * c + b * b * s * s), std::sqrt(a * a * s * s + b * b * c * c)};
}

/// "12.3": lengths in messages.
std::string px_text(double v) {
    const std::string s = std::to_string(std::round(v * 10) / 10);
    return s.substr(0, s.find('.') + 2);
}

/// Draws the centre of `o` until its circle is min_gap clear of every object placed before.
void place(SynthObject& o, const std::vector<SynthObject>& before, SplitMix64& rng, const SynthOptions& options,
           const std::string& function) {
    const double W = options.width, H = options.height, R = o.radius;
    const std::string what = std::string(enum_name(o.kind)) + " " + std::to_string(o.id) + " (circumradius " +
                             px_text(R) + " px";
    if (2 * R > W || 2 * R > H) {
        const bool narrow = 2 * R > W;
        throw InvalidInput(function + ": " + (narrow ? "width = " : "height = ") +
                           std::to_string(narrow ? options.width : options.height) + " is too small for " + what +
                           ": at least " + std::to_string(int(std::ceil(2 * R))) + " px needed)");
    }
    for (int attempt = 0; attempt < kMaxTries; ++attempt) {
        o.cx = R + rng.uniform() * (W - 2 * R);
        o.cy = R + rng.uniform() * (H - 2 * R);
        const bool clear = std::all_of(before.begin(), before.end(), [&](const SynthObject& p) {
            return std::hypot(o.cx - p.cx, o.cy - p.cy) >= R + p.radius + options.min_gap;
        });
        if (clear) return;
    }
    throw InvalidInput(function + ": could not place " + what + ") with min_gap = " + px_text(options.min_gap) +
                       " px to the " + std::to_string(before.size()) + " objects before it in a " +
                       std::to_string(options.width) + "x" + std::to_string(options.height) + " scene after " +
                       std::to_string(kMaxTries) + " tries; use fewer objects, a larger scene or a smaller min_gap");
}

/// The objects of a scene in id order: targets, then buoys, then boats.
std::vector<SynthObject> place_objects(SynthSceneKind kind, const SynthOptions& options, SplitMix64& rng) {
    std::vector<SynthObjectKind> kinds(std::size_t(options.targets),
                                       kind == SynthSceneKind::Castaways ? SynthObjectKind::Castaway : SynthObjectKind::Leaf);
    kinds.insert(kinds.end(), std::size_t(options.buoys), SynthObjectKind::Buoy);
    kinds.insert(kinds.end(), std::size_t(options.boats), SynthObjectKind::Boat);
    std::vector<SynthObject> placed;
    placed.reserve(kinds.size());
    for (SynthObjectKind k : kinds) {
        SynthObject o = draw_shape(k, int(placed.size()) + 1, rng);
        place(o, placed, rng, options, function_name(kind));
        placed.push_back(o);
    }
    return placed;
}

// ---- coverage ---------------------------------------------------------------------------------------

/// Per pixel, raster order: the index into `placed` of the object over it (−1: none) and the number
/// of its 16 points inside that object.
struct Footprint {
    std::vector<std::int32_t> owner;
    std::vector<std::uint8_t> hits;
};

/// Rasterises every object's coverage, and fills its area and box (pixels with α ≥ 0.5).
Footprint rasterise(std::vector<SynthObject>& placed, int width, int height) {
    Footprint f{std::vector<std::int32_t>(std::size_t(width) * std::size_t(height), -1),
                std::vector<std::uint8_t>(std::size_t(width) * std::size_t(height), 0)};
    for (std::size_t i = 0; i < placed.size(); ++i) {
        SynthObject& o = placed[i];
        const auto [ex, ey] = half_extent(o);
        const int x0 = std::max(0, int(std::floor(o.cx - ex)) - 1), x1 = std::min(width - 1, int(std::floor(o.cx + ex)) + 1);
        const int y0 = std::max(0, int(std::floor(o.cy - ey)) - 1), y1 = std::min(height - 1, int(std::floor(o.cy + ey)) + 1);
        int bx0 = width, by0 = height, bx1 = -1, by1 = -1;
        for (int y = y0; y <= y1; ++y)
            for (int x = x0; x <= x1; ++x) {
                int count = 0;
                for (int j = 0; j < kSuper; ++j)
                    for (int k = 0; k < kSuper; ++k)
                        count += inside(o, x + (k + 0.5) / kSuper, y + (j + 0.5) / kSuper);
                if (count == 0) continue;
                const std::size_t p = std::size_t(y) * std::size_t(width) + std::size_t(x);
                f.owner[p] = std::int32_t(i);
                f.hits[p] = std::uint8_t(count);
                if (2 * count < kPoints) continue;
                ++o.area;
                bx0 = std::min(bx0, x), bx1 = std::max(bx1, x), by0 = std::min(by0, y), by1 = std::max(by1, y);
            }
        if (o.area > 0) o.x0 = bx0, o.y0 = by0, o.width = bx1 - bx0 + 1, o.height = by1 - by0 + 1;
    }
    return f;
}

// ---- samples ----------------------------------------------------------------------------------------

/// What fill_cube needs besides the footprint: spectra per band and the noise.
struct Spectra {
    std::vector<double> background;              // water or paper, per band
    std::vector<std::vector<double>> objects;    // amplitude × material, per object and band
    bool sea = false;                            // modulate the background by the sea's ripple
    double sigma = 0;
    std::uint64_t noise_state = 0;               // n0
};

Spectra spectra_of(SynthSceneKind kind, const std::vector<SynthObject>& placed, const std::vector<double>& lambda,
                   double sigma, std::uint64_t noise_state) {
    Spectra s{.sea = kind == SynthSceneKind::Castaways, .sigma = sigma, .noise_state = noise_state};
    const SynthMaterial ground = s.sea ? SynthMaterial::Water : SynthMaterial::Paper;
    for (double l : lambda) s.background.push_back(synth_reflectance(ground, l));
    for (const SynthObject& o : placed) {
        std::vector<double> spectrum;
        for (double l : lambda) spectrum.push_back(o.amplitude * synth_reflectance(material_of(o.kind), l));
        s.objects.push_back(std::move(spectrum));
    }
    return s;
}

/// α·object + (1 − α)·background + σ·N for every sample, rows in parallel: row y starts its copy
/// of the noise stream 2·y·W·m draws in, so the samples do not depend on the thread count.
void fill_cube(Cube& cube, const Footprint& f, const Spectra& s) {
    const int W = cube.width(), H = cube.height(), m = cube.bands();
    float* out = cube.data<float>();
#pragma omp parallel for schedule(static)
    for (int y = 0; y < H; ++y) {
        SplitMix64 noise{s.noise_state};
        noise.skip(2 * std::uint64_t(y) * std::uint64_t(W) * std::uint64_t(m));
        for (int x = 0; x < W; ++x) {
            const std::size_t p = std::size_t(y) * std::size_t(W) + std::size_t(x);
            const double ripple = s.sea ? 1.0 + 0.15 * std::sin(2.0 * kPi * (x * kCos30 + y * kSin30) / 37.0) : 1.0;
            const int owner = f.owner[p];
            const double alpha = double(f.hits[p]) / kPoints;
            float* spectrum = out + p * std::size_t(m);
            for (int b = 0; b < m; ++b) {
                const double background = s.background[std::size_t(b)] * ripple;
                const double clean = owner < 0 ? background
                                               : alpha * s.objects[std::size_t(owner)][std::size_t(b)] +
                                                     (1.0 - alpha) * background;
                spectrum[b] = float(s.sigma > 0 ? clean + s.sigma * noise.normal() : clean);
            }
        }
    }
}

/// truth, objects and coverage from the footprint.
void fill_maps(SynthScene& scene, const Footprint& f) {
    const int W = scene.options.width, H = scene.options.height;
    scene.truth = Cube(W, H, 1, DType::U8);
    scene.objects = Cube(W, H, 1, DType::I32);
    scene.coverage = Cube(W, H, 1, DType::F32);
    auto* truth = scene.truth.data<std::uint8_t>();
    auto* ids = scene.objects.data<std::int32_t>();
    auto* alpha = scene.coverage.data<float>();
    for (std::size_t p = 0; p < f.owner.size(); ++p) {
        if (f.owner[p] < 0) continue;
        const SynthObject& o = scene.placed[std::size_t(f.owner[p])];
        alpha[p] = float(f.hits[p]) / float(kPoints);
        if (2 * f.hits[p] < kPoints) continue;
        ids[p] = o.id;
        truth[p] = o.target ? 1 : 0;
    }
}

}  // namespace

// ---- public -----------------------------------------------------------------------------------------

std::vector<double> synth_wavelengths(int bands) {
    if (bands < 1) throw InvalidInput("synth_wavelengths: bands = " + std::to_string(bands) + "; expected >= 1");
    std::vector<double> lambda(std::size_t(bands), 400.0);
    for (int c = 0; c < bands && bands > 1; ++c) lambda[std::size_t(c)] = 400.0 + 600.0 * c / (bands - 1);
    return lambda;
}

double synth_reflectance(SynthMaterial material, double l) {
    switch (material) {
        case SynthMaterial::Water: return 0.02 + 0.06 * std::exp(-std::pow((l - 480.0) / 80.0, 2));
        case SynthMaterial::Castaway: return 0.05 + 0.55 * logistic(l, 580.0, 15.0);
        case SynthMaterial::Buoy: return 0.05 + 0.60 * logistic(l, 520.0, 15.0);
        case SynthMaterial::Boat: return 0.60 + 0.05 * (l - 400.0) / 600.0;
        case SynthMaterial::Leaf:
            return 0.05 + 0.07 * std::exp(-std::pow((l - 550.0) / 30.0, 2)) + 0.45 * logistic(l, 715.0, 12.0);
        case SynthMaterial::Paper: return 0.80 - 0.10 * (l - 400.0) / 600.0;
    }
    throw InvalidInput("synth_reflectance: material = " + std::to_string(int(material)) + "; expected " +
                       enum_choices_text<SynthMaterial>());
}

SynthOptions resolved_synth_options(SynthSceneKind kind, const SynthOptions& options) {
    const std::string function = function_name(kind);
    check_fields(options, function);
    const bool sea = kind == SynthSceneKind::Castaways;
    if (!sea)
        for (const auto& [name, count] : {std::pair{"buoys", options.buoys}, std::pair{"boats", options.boats}})
            if (count > 0)
                throw InvalidInput(function + ": " + name + " = " + std::to_string(count) +
                                   "; expected 0: the leaves scene has no distractors");
    SynthOptions o = options;
    const auto or_else = [](int value, int automatic, int scene) { return value == automatic ? scene : value; };
    o.width = or_else(o.width, 0, 1024);
    o.height = or_else(o.height, 0, sea ? 1024 : 256);
    o.targets = or_else(o.targets, -1, sea ? 8 : 17);
    o.buoys = or_else(o.buoys, -1, sea ? 6 : 0);
    o.boats = or_else(o.boats, -1, sea ? 3 : 0);
    return o;
}

SynthScene synth_scene(SynthSceneKind kind, std::uint64_t seed, const SynthOptions& options) {
    SynthScene scene{.kind = kind, .seed = seed, .options = resolved_synth_options(kind, options)};
    const SynthOptions& o = scene.options;
    SplitMix64 rng{seed};
    const std::uint64_t noise_state = rng.next();  // n0: the first draw seeds the noise
    scene.placed = place_objects(kind, o, rng);
    scene.wavelengths = synth_wavelengths(o.bands);
    const Footprint footprint = rasterise(scene.placed, o.width, o.height);

    scene.cube = Cube::uninitialized(o.width, o.height, o.bands, DType::F32, Layout::BIP);
    fill_cube(scene.cube, footprint, spectra_of(kind, scene.placed, scene.wavelengths, o.noise_sigma, noise_state));
    fill_maps(scene, footprint);
    Metadata& meta = scene.cube.metadata();
    meta.wavelengths = scene.wavelengths;
    meta.wavelength_units = "Nanometers";
    meta.description = "cubekit synthetic " + std::string(enum_name(kind)) + " scene, seed " + std::to_string(seed) +
                       " (spec detect.md C.3)";
    return scene;
}

SynthScene synth_castaways(std::uint64_t seed, const SynthOptions& options) {
    return synth_scene(SynthSceneKind::Castaways, seed, options);
}

SynthScene synth_leaves(std::uint64_t seed, const SynthOptions& options) {
    return synth_scene(SynthSceneKind::Leaves, seed, options);
}

}  // namespace cubekit
