#pragma once
/// Synthetic target-detection scenes with a known answer (spec detect.md §C.3): stand-ins for the
/// seed's unpublished lab scenes, a sea with castaways, buoys and boats ("naufragos") and leaves on
/// paper ("hojas"). The same seed and options give bit-identical scenes on every run and for every
/// OpenMP thread count.
///
///     cubekit::SynthScene s = cubekit::synth_castaways(1);   // 1024×1024×64 f32 BIP
///     s.truth.at<std::uint8_t>(x, y, 0);      // 1 on castaway pixels (coverage α ≥ 0.5), else 0
///     s.objects.at<std::int32_t>(x, y, 0);    // 1..8 castaways, 9..14 buoys, 15..17 boats, 0 sea
///     s.placed[0].cx, s.placed[0].half_length, s.placed[0].x0 ...   // what was drawn where
///     // a training variant: 3 castaways, no boats, a smaller cube
///     auto t = cubekit::synth_castaways(7, {.width = 256, .height = 256, .bands = 16, .targets = 3, .boats = 0});
///
/// FORMULAS (λ in nm; U(lo, hi) = lo + (hi − lo)·u with u the next uniform of the scene RNG)
///
/// Bands: λ_c = 400 + 600·c/(m − 1), c = 0..m−1 (λ_0 = 400 when m = 1). m = 64: λ_21 = 600 nm.
/// Reflectances, with the logistic S(λ; μ, w) = 1/(1 + exp(−(λ − μ)/w)):
///
///     material   spectrum                                              at 400     600      1000 nm
///     water      0.02 + 0.06·exp(−((λ−480)/80)²)                        0.04207    0.02632  0.02
///     castaway   0.05 + 0.55·S(λ; 580, 15)          (orange)            0.05000    0.48527  0.6
///     buoy       0.05 + 0.60·S(λ; 520, 15)          (yellow)            0.05020    0.64712  0.65
///     boat       0.60 + 0.05·(λ−400)/600            (white hull)        0.6        0.61667  0.65
///     leaf       0.05 + 0.07·exp(−((λ−550)/30)²) + 0.45·S(λ; 715, 12)  0.05       0.05438  0.5
///     paper      0.80 − 0.10·(λ−400)/600                                0.8        0.76667  0.7
///
/// Background of pixel (x, y) (x the column, y the row, integers):
///     castaways: sea = water(λ)·(1 + 0.15·sin(2π(x·cos30° + y·sin30°)/37)), cos30° = √3/2, sin30° = ½;
///     leaves:    paper(λ).
///
/// Objects: a shape with centre (cx, cy), half_length a along the direction `angle` θ (radians from
/// +x towards +y), half_width b across it. A point (px, py) is inside when, with dx = px − cx,
/// dy = py − cy, u = dx·cosθ + dy·sinθ, v = −dx·sinθ + dy·cosθ:
///     castaway  ellipse (u/a)² + (v/b)² ≤ 1, a = U(6, 12), b = U(3, 6), θ = U(0, π)
///     buoy      disk dx² + dy² ≤ r², r = U(3, 5) (a = b = r, θ = 0)
///     boat      rectangle |u| ≤ a, |v| ≤ b, length 2a = U(20, 60), width 2b = U(8, 20), θ = U(0, π)
///     leaf      ellipse as above, a = U(15, 30), b = U(8, 15), θ = U(0, π); its spectrum × U(0.9, 1.1)
/// Parameters are drawn in the order written (a, b, θ, then the leaf's amplitude).
///
/// Placement: R = the circumradius (ellipse a, disk r, rectangle sqrt(a² + b²)). The centre is drawn
/// as cx = R + U(0, 1)·(W − 2R), cy = R + U(0, 1)·(H − 2R), so the circle lies inside the image; it
/// is kept when |c − c_j| ≥ R + R_j + min_gap for every object j placed before, else redrawn (the
/// shape stays), at most 10 000 times. Shapes lie inside their circles, so any two objects are at
/// least min_gap (16) px apart. Placement order = id order: targets, then buoys, then boats.
///
/// Coverage: pixel (x, y) spans [x, x+1) × [y, y+1); α = (number of the 16 points
/// (x + (i + ½)/4, y + (j + ½)/4), i, j = 0..3, inside the object)/16. Every α > 0 belongs to one
/// object (min_gap ≥ 2). Example: a buoy of r = 4 centred at (50.5, 50.5) covers pixel (53, 50)
/// with α = 1; in pixel (54, 50) its points lie 3.625, 3.875, 4.125 and 4.375 px right of the
/// centre (and ±0.125, ±0.375 px across), so the first two columns are inside: α = 8/16 = 0.5.
///
/// Value of sample (x, y, b), computed in double and rounded to f32 once:
///     α·A·object(λ_b) + (1 − α)·background(x, y, λ_b) + σ·N(x, y, b)
/// with A the amplitude (1 but for leaves), σ = noise_sigma (0.004) and N a standard normal.
/// Ground truth: target (castaway or leaf) pixels with α ≥ 0.5, i.e. 8 or more of the 16 points.
///
/// RANDOM NUMBERS. SplitMix64 (below), portable across compilers. The scene RNG is SplitMix64{seed}:
/// its first draw, n0 = next(), seeds the noise; the following draws place the objects as above.
/// The noise is the single stream SplitMix64{n0} read in BIP order, two draws per sample:
///     N(x, y, b) = SplitMix64{n0}.skip(2·((y·W + x)·m + b)).normal()
/// SplitMix64's state after k draws is n0 + k·γ, so each row starts its own copy of the stream in
/// O(1) (skip) and every thread count computes the same samples. The layout does not depend on
/// noise_sigma, so the same seed with σ = 0 gives the noise-free scene.
#include <cstdint>
#include <numbers>
#include <cmath>
#include <string_view>
#include <vector>

#include "cubekit/cube.hpp"
#include "cubekit/options.hpp"

namespace cubekit {

/// splitmix64 (Steele, Lea, Flood 2014; Vigna's reference code), the generator of spec §C.3.
///
///     SplitMix64 rng{0};
///     rng.next();      // 0xe220a8397b1dcdaf, then 0x6e789e6aa1b965f4, 0x06c45d188009454f
///     rng.uniform();   // (z >> 11)·2⁻⁵³ ∈ [0, 1)
///     rng.normal();    // sqrt(−2 ln(1 − u1))·cos(2π u2): two uniforms, the cosine branch only
struct SplitMix64 {
    static constexpr std::uint64_t kGamma = 0x9e3779b97f4a7c15ULL;  ///< the state's step per draw
    std::uint64_t state = 0;

    std::uint64_t next() {
        std::uint64_t z = (state += kGamma);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }
    /// Uniform on [0, 1): the top 53 bits of next().
    double uniform() { return double(next() >> 11) * 0x1.0p-53; }
    /// Standard normal by Box–Muller, cosine branch: u1 first, then u2 (1 − u1 > 0, so always finite).
    double normal() {
        const double u1 = uniform();
        const double u2 = uniform();
        return std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(2.0 * std::numbers::pi * u2);
    }
    /// Jumps over `draws` draws of next() (each uniform is one draw, each normal two) in O(1).
    SplitMix64& skip(std::uint64_t draws) {
        state += draws * kGamma;  // mod 2^64
        return *this;
    }
};

/// The two scenes of §C.3: "castaways" (spec synth_naufragos) and "leaves" (synth_hojas).
enum class SynthSceneKind { Castaways, Leaves };
template <>
struct EnumNames<SynthSceneKind> {
    static constexpr EnumName<SynthSceneKind> names[] = {{SynthSceneKind::Castaways, "castaways"},
                                                         {SynthSceneKind::Leaves, "leaves"}};
    static constexpr EnumName<SynthSceneKind> aliases[] = {{SynthSceneKind::Castaways, "naufragos"},
                                                           {SynthSceneKind::Leaves, "hojas"}};
};

/// The spectra of §C.3 (table above).
enum class SynthMaterial { Water, Castaway, Buoy, Boat, Leaf, Paper };
template <>
struct EnumNames<SynthMaterial> {
    static constexpr EnumName<SynthMaterial> names[] = {
        {SynthMaterial::Water, "water"}, {SynthMaterial::Castaway, "castaway"}, {SynthMaterial::Buoy, "buoy"},
        {SynthMaterial::Boat, "boat"},   {SynthMaterial::Leaf, "leaf"},         {SynthMaterial::Paper, "paper"}};
};

/// What an object is (its material is the same name).
enum class SynthObjectKind { Castaway, Buoy, Boat, Leaf };
template <>
struct EnumNames<SynthObjectKind> {
    static constexpr EnumName<SynthObjectKind> names[] = {{SynthObjectKind::Castaway, "castaway"},
                                                          {SynthObjectKind::Buoy, "buoy"},
                                                          {SynthObjectKind::Boat, "boat"},
                                                          {SynthObjectKind::Leaf, "leaf"}};
};

/// Options of synth_castaways() and synth_leaves(). The automatic values (0 sizes, −1 counts) mean
/// the scene's own: castaways 1024×1024, 8 castaways, 6 buoys, 3 boats; leaves 1024×256, 17 leaves.
struct SynthOptions {
    /// Width W in pixels; 0 = the scene's (1024).
    int width = 0;
    /// Height H in pixels; 0 = the scene's (castaways 1024, leaves 256).
    int height = 0;
    /// Bands m, spread evenly over 400..1000 nm.
    int bands = 64;
    /// Targets (castaways or leaves); −1 = the scene's (8, 17). Spec training variants: 0–12, 10–20.
    int targets = -1;
    /// Buoys (castaway scene; the leaves scene has none); −1 = 6.
    int buoys = -1;
    /// Boats (castaway scene; the leaves scene has none); −1 = 3.
    int boats = -1;
    /// σ of the Gaussian noise added to every sample (0 = a noise-free scene with the same layout).
    double noise_sigma = 0.004;
    /// Least distance between the circumscribed circles of two objects, px.
    double min_gap = 16;
};

/// The declarations of SynthOptions' fields (options.hpp).
template <class O, class V>
    requires std::same_as<std::remove_const_t<O>, SynthOptions>
void visit_fields(O& o, V&& visit) {
    visit(o.width, Field{.name = "width", .doc = "width in pixels (default: 1024)", .min = 1, .automatic = 0});
    visit(o.height, Field{.name = "height", .doc = "height in pixels (default: castaways 1024, leaves 256)", .min = 1,
                          .automatic = 0});
    visit(o.bands, Field{.name = "bands", .doc = "bands, evenly spaced over 400..1000 nm", .min = 1});
    visit(o.targets, Field{.name = "targets",
                           .doc = "castaways or leaves (default: 8 castaways, 17 leaves; training variants 0-12, 10-20)",
                           .min = 0, .automatic = -1});
    visit(o.buoys, Field{.name = "buoys", .doc = "buoys, castaway scene only (default: 6)", .min = 0, .automatic = -1});
    visit(o.boats, Field{.name = "boats", .doc = "boats, castaway scene only (default: 3)", .min = 0, .automatic = -1});
    visit(o.noise_sigma, Field{.name = "noise_sigma", .doc = "standard deviation of the noise on every sample", .min = 0});
    visit(o.min_gap, Field{.name = "min_gap",
                           .doc = "least distance between the circles around two objects, px (>= 2: no pixel mixes two)",
                           .min = 2});
}

/// One object placed in a scene (formulas above).
struct SynthObject {
    SynthObjectKind kind = SynthObjectKind::Castaway;
    int id = 0;             ///< its value in SynthScene::objects: 1..n in placement order
    bool target = false;    ///< castaway or leaf
    double cx = 0, cy = 0;  ///< centre in pixel coordinates (pixel (x, y) spans [x, x+1) × [y, y+1))
    double half_length = 0; ///< along `angle`: semi-major axis, disk radius, half the boat's length
    double half_width = 0;  ///< across: semi-minor axis, disk radius, half the boat's width
    double angle = 0;       ///< radians in [0, π), from +x towards +y (clockwise on screen)
    double amplitude = 1;   ///< factor on the material spectrum (leaves U(0.9, 1.1), else 1)
    double radius = 0;      ///< circumradius R used for placement
    std::int64_t area = 0;  ///< pixels with α ≥ 0.5 (the object's pixels in SynthScene::objects)
    /// Box of those pixels, [x0, x0 + width) × [y0, y0 + height) (all 0 when area = 0).
    int x0 = 0, y0 = 0, width = 0, height = 0;
};

/// A generated scene and its ground truth.
struct SynthScene {
    SynthSceneKind kind = SynthSceneKind::Castaways;
    Cube cube;      ///< W×H×m f32 BIP; metadata: wavelengths (nm) and a description
    Cube truth;     ///< W×H×1 u8: 1 target pixel (α ≥ 0.5), 0 else
    Cube objects;   ///< W×H×1 i32: the id of the object with α ≥ 0.5 there (targets first), 0 background
    Cube coverage;  ///< W×H×1 f32: α (a multiple of 1/16) of the object over the pixel, 0 where none
    std::vector<SynthObject> placed;  ///< by id: placed[i].id = i + 1
    std::vector<double> wavelengths;  ///< λ_c, nm
    std::uint64_t seed = 0;
    SynthOptions options;  ///< as used: sizes and counts resolved (no automatic values left)
};

/// The sea scene of spec §C.3 ("synth_naufragos"): castaways (targets), buoys and boats on a
/// rippled sea. Throws InvalidInput naming the field for bad options, a scene too small for an
/// object ("width = 20 is too small ...") or objects that do not fit at min_gap.
SynthScene synth_castaways(std::uint64_t seed, const SynthOptions& options = {});

/// The leaves scene of spec §C.3 ("synth_hojas"): leaves (targets) on paper. buoys and boats must
/// be automatic or 0 (the spec's leaves scene has no distractors).
SynthScene synth_leaves(std::uint64_t seed, const SynthOptions& options = {});

/// Either scene by kind.
SynthScene synth_scene(SynthSceneKind kind, std::uint64_t seed, const SynthOptions& options = {});

/// λ_c = 400 + 600·c/(m − 1) nm for c = 0..m−1 (400 for m = 1). Throws InvalidInput for m < 1.
std::vector<double> synth_wavelengths(int bands);

/// The reflectance of a material at λ nm (table above), e.g. castaway at 600 nm = 0.48527.
double synth_reflectance(SynthMaterial material, double wavelength_nm);

/// The options with the scene's automatic values filled in, checked (what SynthScene::options holds).
/// Throws InvalidInput "synth_<scene>: <field> = <value>; expected ...".
SynthOptions resolved_synth_options(SynthSceneKind kind, const SynthOptions& options);

}  // namespace cubekit
