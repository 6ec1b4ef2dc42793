#pragma once
// Reliefs, markers and masks shared by the watershed tests (spec gradient-watershed.md §B5).
// watershed_test.cpp checks the CPU reference on every case against the spec's oracles;
// watershed_gpu_test.cpp checks that every CUDA schedule gives the CPU's labels and R on the same
// cases. Everything is generated from a seed (the caller prints it; CUBEKIT_TEST_SEED replays it).
//
// Sizes straddle the 32×32 and 16×16 tiles a GPU kernel is likely to use (31, 32, 33, 63, 65, ...)
// and include 1×1, 1×N and N×1; the large cases (plateaus whose geodesic distances run to
// thousands of pixels, a serpentine corridor) are where a block-asynchronous schedule differs most
// from a synchronous one.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cubekit/cube.hpp"
#include "cubekit/error.hpp"
#include "cubekit/watershed.hpp"

namespace cubekit::watershed_testing {

/// Under compute-sanitizer (NV_SANITIZER_INJECTION_* set) or CUBEKIT_TEST_QUICK=1: fewer and
/// smaller cases (the same code paths).
inline bool quick() {
    static const bool q = std::getenv("NV_SANITIZER_INJECTION_PORT_BASE") != nullptr ||
                          std::getenv("NV_SANITIZER_INJECTION_TRANSPORT_TYPE") != nullptr ||
                          std::getenv("CUBEKIT_TEST_QUICK") != nullptr;
    return q;
}

struct Size {
    int w, h, d = 1;
};

/// Odd, even, tile-straddling and degenerate 2-D sizes.
inline std::vector<Size> image_sizes() {
    std::vector<Size> s = {{1, 1}, {1, 37}, {41, 1}, {2, 2}, {7, 5}, {31, 33}, {32, 32}, {33, 31}, {64, 64}, {65, 63}};
    if (!quick()) s.insert(s.end(), {{127, 129}, {257, 255}, {300, 7}, {5, 301}});
    return s;
}

/// W×H×D heights `offset + 0..levels−1` in `dtype` (many ties: the default is u8 in 0..7).
inline Cube ties(Size s, std::uint64_t seed, int levels = 8, DType dtype = DType::U8, int offset = 0) {
    Cube c(s.w, s.h, s.d, dtype);
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int> u(0, levels - 1);
    for (int z = 0; z < s.d; ++z)
        for (int y = 0; y < s.h; ++y)
            for (int x = 0; x < s.w; ++x) c.set_value(x, y, z, double(offset + u(rng)));
    return c;
}

/// W×H×D f32 heights without ties: a random permutation of 0..n−1 plus a fraction below 1/2,
/// scaled into [−1, 1) (all distinct: n < 2^20 keeps them apart in f32).
inline Cube distinct_f32(Size s, std::uint64_t seed) {
    const std::int64_t n = std::int64_t(s.w) * s.h * s.d;
    std::vector<std::int64_t> rank(static_cast<std::size_t>(n));
    std::iota(rank.begin(), rank.end(), std::int64_t(0));
    std::mt19937_64 rng(seed);
    std::shuffle(rank.begin(), rank.end(), rng);
    std::uniform_real_distribution<double> frac(0.0, 0.5);
    Cube c(s.w, s.h, s.d, DType::F32);
    float* h = c.data<float>();
    for (std::int64_t p = 0; p < n; ++p) h[p] = float((double(rank[std::size_t(p)]) + frac(rng)) / double(n) * 2.0 - 1.0);
    return c;
}

/// Smooth hills and valleys (a few sines) plus a little noise, rounded to integers in [0, amplitude]:
/// a gradient-like relief with broad basins, ridges and small plateaus.
inline Cube smooth(Size s, std::uint64_t seed, DType dtype, double amplitude) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    double fx[3], fy[3], fz[3], ph[3];
    for (int k = 0; k < 3; ++k) {
        fx[k] = (0.5 + 3 * u(rng)) * 6.283185307179586 / std::max(8, s.w);
        fy[k] = (0.5 + 3 * u(rng)) * 6.283185307179586 / std::max(8, s.h);
        fz[k] = (0.5 + 2 * u(rng)) * 6.283185307179586 / std::max(8, s.d);
        ph[k] = 6.283185307179586 * u(rng);
    }
    Cube c(s.w, s.h, s.d, dtype);
    for (int z = 0; z < s.d; ++z)
        for (int y = 0; y < s.h; ++y)
            for (int x = 0; x < s.w; ++x) {
                double v = 0;
                for (int k = 0; k < 3; ++k) v += std::sin(fx[k] * x + fy[k] * y + fz[k] * z + ph[k]);
                v = (v + 3) / 6 * 0.95 + 0.05 * u(rng);
                c.set_value(x, y, z, std::round(v * amplitude));
            }
    return c;
}

/// h = x (spec B5 oracle 2).
inline Cube ramp(Size s, DType dtype) {
    Cube c(s.w, s.h, s.d, dtype);
    for (int z = 0; z < s.d; ++z)
        for (int y = 0; y < s.h; ++y)
            for (int x = 0; x < s.w; ++x) c.set_value(x, y, z, double(x));
    return c;
}

/// h = ⌊x / step⌋ (oracle 3 with step 4).
inline Cube staircase(Size s, int step, DType dtype) {
    Cube c(s.w, s.h, s.d, dtype);
    for (int z = 0; z < s.d; ++z)
        for (int y = 0; y < s.h; ++y)
            for (int x = 0; x < s.w; ++x) c.set_value(x, y, z, double(x / step));
    return c;
}

inline Cube constant(Size s, DType dtype, double value) {
    Cube c(s.w, s.h, s.d, dtype);
    for (int z = 0; z < s.d; ++z)
        for (int y = 0; y < s.h; ++y)
            for (int x = 0; x < s.w; ++x) c.set_value(x, y, z, value);
    return c;
}

struct Point {
    int x, y, z = 0;
};
inline std::int64_t squared_distance(int x, int y, int z, Point c) {
    const std::int64_t dx = x - c.x, dy = y - c.y, dz = z - c.z;
    return dx * dx + dy * dy + dz * dz;
}

/// Two cones h(p) = min(|p − c1|², |p − c2|²) (oracle 4), in 2-D (z = 0) or 3-D.
inline Cube cones(Size s, Point c1, Point c2, DType dtype) {
    Cube c(s.w, s.h, s.d, dtype);
    for (int z = 0; z < s.d; ++z)
        for (int y = 0; y < s.h; ++y)
            for (int x = 0; x < s.w; ++x)
                c.set_value(x, y, z, double(std::min(squared_distance(x, y, z, c1), squared_distance(x, y, z, c2))));
    return c;
}

/// One huge plateau (height 200) over the whole image but a few pits (lower single pixels, one of
/// them in a corner) and a few bumps (higher blocks): geodesic distances run across the image.
inline Cube huge_plateau(Size s, std::uint64_t seed) {
    Cube c = constant(s, DType::U8, 200);
    std::mt19937_64 rng(seed);
    c.at<std::uint8_t>(s.w - 1, s.h - 1, 0) = 10;  // a pit in the far corner
    for (int k = 0; k < 3; ++k) c.at<std::uint8_t>(int(rng() % unsigned(s.w)), int(rng() % unsigned(s.h)), 0) = std::uint8_t(50 + k);
    for (int k = 0; k < 6; ++k) {  // bumps: blocks of 255 the plateau flows around
        const int x0 = int(rng() % unsigned(s.w)), y0 = int(rng() % unsigned(s.h));
        for (int y = y0; y < std::min(s.h, y0 + 40); ++y)
            for (int x = x0; x < std::min(s.w, x0 + 40); ++x) c.at<std::uint8_t>(x, y, 0) = 255;
    }
    return c;
}

/// A serpentine corridor of height 1 between walls of height 9, entered by a pit (0) at its far
/// end: the plateau distance grows along the whole corridor (~W·H/2), crossing every tile border
/// many times. `gap` rows of wall between corridor rows.
inline Cube serpentine(Size s) {
    Cube c = constant(s, DType::U8, 9);
    for (int y = 0; y < s.h; y += 2) {
        for (int x = 0; x < s.w; ++x) c.at<std::uint8_t>(x, y, 0) = 1;
        if (y + 1 < s.h) c.at<std::uint8_t>((y / 2) % 2 == 0 ? s.w - 1 : 0, y + 1, 0) = 1;  // the turn
    }
    c.at<std::uint8_t>(0, 0, 0) = 0;
    return c;
}

/// Marker labels that must survive unchanged (not renumbered): small, large, the i32 maximum.
inline const std::vector<std::int32_t>& marker_labels() {
    static const std::vector<std::int32_t> l = {7, 42, 3, 1000, 65535, 2147483647, 1};
    return l;
}

/// `count` seeds (single pixels or 2×2 blocks), labels drawn from marker_labels(); when `touching`,
/// some seeds are placed next to a seed of another label. Element type `dtype` (integer).
inline Cube random_markers(Size s, std::uint64_t seed, int count, bool touching, DType dtype = DType::I32) {
    Cube m(s.w, s.h, s.d, DType::I32);
    std::mt19937_64 rng(seed);
    const auto& labels = marker_labels();
    std::int32_t max_label = std::numeric_limits<std::int32_t>::max();
    if (dtype == DType::U8) max_label = 255;
    if (dtype == DType::U16) max_label = 65535;
    if (dtype == DType::I16) max_label = 32767;
    auto pick = [&] {
        std::int32_t l;
        do l = labels[rng() % labels.size()];
        while (l > max_label);
        return l;
    };
    for (int k = 0; k < count; ++k) {
        const int x = int(rng() % unsigned(s.w)), y = int(rng() % unsigned(s.h)), z = int(rng() % unsigned(s.d));
        const std::int32_t l = pick();
        const int size = rng() % 2 ? 2 : 1;
        for (int dy = 0; dy < size && y + dy < s.h; ++dy)
            for (int dx = 0; dx < size && x + dx < s.w; ++dx) m.at<std::int32_t>(x + dx, y + dy, z) = l;
        if (touching && x + size < s.w) {
            std::int32_t other = pick();
            if (other == l) other = l == 7 ? 42 : 7;
            m.at<std::int32_t>(x + size, y, z) = other;
        }
    }
    return dtype == DType::I32 ? std::move(m) : m.to_dtype(dtype);
}

/// A u8 mask (1 inside): random holes (discs) excluded, and a wall column x = W/2 excluded, so
/// the inside has at least two components when W ≥ 3.
inline Cube random_mask(Size s, std::uint64_t seed) {
    Cube m = constant(s, DType::U8, 1);
    std::mt19937_64 rng(seed);
    const int holes = std::max(1, s.w * s.h / 400);
    for (int k = 0; k < holes; ++k) {
        const int cx = int(rng() % unsigned(s.w)), cy = int(rng() % unsigned(s.h)), r = int(rng() % 5);
        for (int z = 0; z < s.d; ++z)
            for (int y = std::max(0, cy - r); y <= std::min(s.h - 1, cy + r); ++y)
                for (int x = std::max(0, cx - r); x <= std::min(s.w - 1, cx + r); ++x)
                    if ((x - cx) * (x - cx) + (y - cy) * (y - cy) <= r * r) m.at<std::uint8_t>(x, y, z) = 0;
    }
    if (s.w >= 3)
        for (int z = 0; z < s.d; ++z)
            for (int y = 0; y < s.h; ++y) m.at<std::uint8_t>(s.w / 2, y, z) = 0;
    return m;
}

/// One watershed call: the relief, the options and the optional markers and mask.
struct Case {
    std::string name;
    Cube height;
    WatershedOptions options;
    std::optional<Cube> markers, mask;

    /// The markers and mask as the call takes them (pointers into this case).
    WatershedInputs inputs() const {
        WatershedInputs in;
        if (markers) {
            markers_view_ = markers->view();
            in.markers = &markers_view_;
        }
        if (mask) {
            mask_view_ = mask->view();
            in.mask = &mask_view_;
        }
        return in;
    }
    mutable CubeView markers_view_, mask_view_;
};

inline Case make_case(std::string name, Cube height, int connectivity, std::optional<Cube> markers = std::nullopt,
                      std::optional<Cube> mask = std::nullopt) {
    Case c;
    c.name = std::move(name);
    c.height = std::move(height);
    c.options.connectivity = connectivity;
    c.options.volume = connectivity == 6 || connectivity == 26;
    c.markers = std::move(markers);
    c.mask = std::move(mask);
    return c;
}

inline std::string size_text(Size s) {
    return std::to_string(s.w) + "x" + std::to_string(s.h) + (s.d > 1 ? "x" + std::to_string(s.d) : "");
}

// ---- Case families (each case's name says what it is; the seed makes it) --------------------

/// Random u8 heights in 0..7 (many ties, many small plateaus), every size, 4 and 8.
inline std::vector<Case> tie_cases(std::uint64_t seed) {
    std::vector<Case> out;
    int k = 0;
    for (Size s : image_sizes())
        for (int conn : {4, 8}) {
            ++k;
            out.push_back(make_case("u8 0..7 " + size_text(s) + " c" + std::to_string(conn), ties(s, seed + 97 * k + 1), conn));
        }
    return out;
}

/// Random f32 heights without ties, every size, 4 and 8.
inline std::vector<Case> distinct_cases(std::uint64_t seed) {
    std::vector<Case> out;
    int k = 0;
    for (Size s : image_sizes())
        for (int conn : {4, 8}) {
            ++k;
            out.push_back(make_case("f32 distinct " + size_text(s) + " c" + std::to_string(conn), distinct_f32(s, seed + 97 * k + 2), conn));
        }
    return out;
}

/// Every element type: ties in each type's range (signed types with negative values), smooth
/// u16/u32/f64 reliefs, f64 with −0.0 among +0.0.
inline std::vector<Case> type_cases(std::uint64_t seed) {
    std::vector<Case> out;
    const Size s = quick() ? Size{37, 29} : Size{101, 77};
    int k = 0;
    for (int conn : {4, 8}) {
        ++k;
        const std::string c = " c" + std::to_string(conn);
        out.push_back(make_case("u16 0..15" + c, ties(s, seed + 97 * k + 3, 16, DType::U16), conn));
        out.push_back(make_case("i16 -8..7" + c, ties(s, seed + 97 * k + 4, 16, DType::I16, -8), conn));
        out.push_back(make_case("u32 0..5" + c, ties(s, seed + 97 * k + 5, 6, DType::U32), conn));
        out.push_back(make_case("i32 -3..3" + c, ties(s, seed + 97 * k + 6, 7, DType::I32, -3), conn));
        out.push_back(make_case("f64 -4..3" + c, ties(s, seed + 97 * k + 7, 8, DType::F64, -4), conn));
        out.push_back(make_case("u16 smooth" + c, smooth(s, seed + 97 * k + 8, DType::U16, 4000), conn));
        out.push_back(make_case("u8 smooth" + c, smooth(s, seed + 97 * k + 9, DType::U8, 60), conn));
        out.push_back(make_case("u32 smooth" + c, smooth(s, seed + 97 * k + 10, DType::U32, 100000), conn));
        Cube f = smooth(s, seed + 97 * k + 11, DType::F64, 50);
        for (std::size_t p = 0; p < f.num_elements(); p += 3)
            if (f.data<double>()[p] == 0) f.data<double>()[p] = -0.0;
        for (std::size_t p = 0; p < f.num_elements(); ++p) f.data<double>()[p] *= 0.125;  // exact
        out.push_back(make_case("f64 smooth with -0.0" + c, std::move(f), conn));
        Cube g = smooth(s, seed + 97 * k + 12, DType::F32, 30);
        out.push_back(make_case("f32 smooth" + c, std::move(g), conn));
    }
    return out;
}

/// Two cones (oracle 4) at several placements, i32, u32, f32, f64 and u16.
inline std::vector<Case> cone_cases() {
    std::vector<Case> out;
    struct C {
        Size s;
        Point a, b;
        DType t;
    };
    const std::vector<C> cs = {{{101, 77}, {20, 30}, {80, 40}, DType::I32},  {{101, 77}, {80, 10}, {15, 60}, DType::U32},
                               {{64, 64}, {10, 50}, {50, 10}, DType::F32},   {{65, 33}, {3, 3}, {60, 29}, DType::F64},
                               {{33, 90}, {16, 5}, {16, 85}, DType::U16},    {{128, 40}, {0, 0}, {127, 39}, DType::I32},
                               {{1, 61}, {0, 10}, {0, 50}, DType::U16},      {{61, 1}, {50, 0}, {10, 0}, DType::F64}};
    for (const C& c : cs)
        for (int conn : {4, 8})
            out.push_back(make_case("cones " + size_text(c.s) + " (" + std::to_string(c.a.x) + "," + std::to_string(c.a.y) + ")(" +
                                        std::to_string(c.b.x) + "," + std::to_string(c.b.y) + ") " + std::string(dtype_name(c.t)) +
                                        " c" + std::to_string(conn),
                                    cones(c.s, c.a, c.b, c.t), conn));
    return out;
}

/// Plateaus: the oracle staircase, wide steps, a serpentine corridor, one huge plateau. `large`
/// adds the GPU's 1000×700 staircase and 2000×1500 plateau.
inline std::vector<Case> plateau_cases(std::uint64_t seed, bool large) {
    std::vector<Case> out;
    for (int conn : {4, 8}) {
        const std::string c = " c" + std::to_string(conn);
        out.push_back(make_case("staircase x/4 23x5" + c, staircase({23, 5}, 4, DType::U8), conn));
        out.push_back(make_case("staircase x/4 1x1", staircase({1, 1}, 4, DType::U8), conn));
        out.push_back(make_case("ramp 37x3" + c, ramp({37, 3}, DType::I16), conn));
        out.push_back(make_case("constant 45x33" + c, constant({45, 33}, DType::F32, 3.5), conn));
        out.push_back(make_case("serpentine 40x31" + c, serpentine({40, 31}), conn));
        out.push_back(make_case("huge plateau 150x97" + c, huge_plateau({150, 97}, seed + conn), conn));
        if (!quick()) out.push_back(make_case("serpentine 128x127" + c, serpentine({128, 127}), conn));
        if (large && !quick()) {
            out.push_back(make_case("staircase x/4 1000x700" + c, staircase({1000, 700}, 4, DType::U8), conn));
            out.push_back(make_case("staircase x/125 1000x700" + c, staircase({1000, 700}, 125, DType::U8), conn));
            out.push_back(make_case("huge plateau 2000x1500" + c, huge_plateau({2000, 1500}, seed + 10 + conn), conn));
        }
    }
    return out;
}

/// Markers (imposition): random seeds of several labels, touching seeds, other marker types.
inline std::vector<Case> marker_cases(std::uint64_t seed) {
    std::vector<Case> out;
    int k = 0;
    const std::vector<Size> sizes = quick() ? std::vector<Size>{{33, 31}, {1, 40}} : std::vector<Size>{{33, 31}, {1, 40}, {40, 1}, {65, 63}, {200, 150}};
    for (Size s : sizes)
        for (int conn : {4, 8}) {
            ++k;
            const std::string n = " " + size_text(s) + " c" + std::to_string(conn);
            const int count = std::max(2, s.w * s.h / 150);
            out.push_back(make_case("markers u8 ties" + n, ties(s, seed + 97 * k + 13), conn, random_markers(s, seed + 97 * k + 14, count, false)));
            out.push_back(make_case("touching markers f32" + n, distinct_f32(s, seed + 97 * k + 15), conn, random_markers(s, seed + 97 * k + 16, count, true)));
            out.push_back(make_case("u16 markers smooth" + n, smooth(s, seed + 97 * k + 17, DType::U16, 500), conn,
                                    random_markers(s, seed + 97 * k + 18, count, true, DType::U16)));
            out.push_back(make_case("markers on a plateau" + n, constant(s, DType::U8, 4), conn, random_markers(s, seed + 97 * k + 19, 3, false)));
            out.push_back(make_case("markers + mask" + n, ties(s, seed + 97 * k + 20), conn, random_markers(s, seed + 97 * k + 21, count, true),
                                    random_mask(s, seed + 97 * k + 22)));
        }
    out.push_back(make_case("no marker at all", ties({20, 10}, seed + 97 * k + 23), 8, Cube(20, 10, 1, DType::I32)));
    return out;
}

/// Masks without markers.
inline std::vector<Case> mask_cases(std::uint64_t seed) {
    std::vector<Case> out;
    int k = 0;
    for (Size s : {Size{33, 31}, Size{64, 64}, Size{1, 30}, Size{129, 67}})
        for (int conn : {4, 8}) {
            ++k;
            const std::string n = " " + size_text(s) + " c" + std::to_string(conn);
            out.push_back(make_case("mask u8 ties" + n, ties(s, seed + 97 * k + 24), conn, std::nullopt, random_mask(s, seed + 97 * k + 25)));
            out.push_back(make_case("mask f32" + n, distinct_f32(s, seed + 97 * k + 26), conn, std::nullopt, random_mask(s, seed + 97 * k + 27)));
            out.push_back(make_case("mask on a constant" + n, constant(s, DType::U16, 9), conn, std::nullopt, random_mask(s, seed + 97 * k + 28)));
        }
    out.push_back(make_case("empty mask", ties({9, 8}, seed + 97 * k + 29), 8, std::nullopt, Cube(9, 8, 1, DType::U8)));
    return out;
}

/// `levels` quantisation and h-minima (each alone and together, with markers and a mask).
inline std::vector<Case> filter_cases(std::uint64_t seed) {
    std::vector<Case> out;
    int k = 0;
    const Size s = quick() ? Size{40, 33} : Size{97, 81};
    for (int conn : {4, 8}) {
        const std::string c = " c" + std::to_string(conn);
        for (std::int64_t levels : {2, 5, 64, 4096}) {
            ++k;
            Case a = make_case("levels " + std::to_string(levels) + " f32" + c, distinct_f32(s, seed + 97 * k + 30), conn);
            a.options.levels = levels;
            out.push_back(std::move(a));
        }
        Case b = make_case("levels 16 u16 smooth" + c, smooth(s, seed + 97 * k + 31, DType::U16, 3000), conn);
        b.options.levels = 16;
        out.push_back(std::move(b));
        Case e = make_case("levels 8 i16 negative" + c, ties(s, seed + 97 * k + 32, 200, DType::I16, -150), conn);
        e.options.levels = 8;
        out.push_back(std::move(e));
        for (double h : {0.5, 3.0, 40.0}) {
            ++k;
            Case d = make_case("h_min " + std::to_string(h) + " u16 smooth" + c, smooth(s, seed + 97 * k + 33, DType::U16, 300), conn);
            d.options.h_min = h;
            out.push_back(std::move(d));
        }
        Case f = make_case("h_min 0.1 f32" + c, distinct_f32(s, seed + 97 * k + 34), conn);
        f.options.h_min = 0.1;
        out.push_back(std::move(f));
        Case g = make_case("levels 32 + h_min 2 + markers + mask" + c, smooth(s, seed + 97 * k + 35, DType::F32, 100), conn,
                           random_markers(s, seed + 97 * k + 36, 12, true), random_mask(s, seed + 97 * k + 37));
        g.options.levels = 32;
        g.options.h_min = 2;
        out.push_back(std::move(g));
        Case m = make_case("levels 6 + mask" + c, distinct_f32(s, seed + 97 * k + 38), conn, std::nullopt, random_mask(s, seed + 97 * k + 39));
        m.options.levels = 6;
        out.push_back(std::move(m));
    }
    return out;
}

/// Volumes, 6 and 26: ties, distinct, smooth, 3-D cones, markers, mask, levels.
inline std::vector<Case> volume_cases(std::uint64_t seed) {
    std::vector<Case> out;
    int k = 0;
    std::vector<Size> sizes = {{1, 1, 5}, {5, 4, 3}, {17, 15, 6}, {33, 31, 4}};
    if (!quick()) sizes.push_back({64, 48, 20});
    for (Size s : sizes)
        for (int conn : {6, 26}) {
            ++k;
            const std::string n = " " + size_text(s) + " c" + std::to_string(conn);
            out.push_back(make_case("volume u8 ties" + n, ties(s, seed + 97 * k + 40), conn));
            out.push_back(make_case("volume f32 distinct" + n, distinct_f32(s, seed + 97 * k + 41), conn));
            out.push_back(make_case("volume u16 smooth" + n, smooth(s, seed + 97 * k + 42, DType::U16, 1000), conn));
            out.push_back(make_case("volume markers" + n, ties(s, seed + 97 * k + 43), conn, random_markers(s, seed + 97 * k + 44, 4, true)));
            out.push_back(make_case("volume mask" + n, ties(s, seed + 97 * k + 45), conn, std::nullopt, random_mask(s, seed + 97 * k + 46)));
            Case l = make_case("volume levels 4" + n, distinct_f32(s, seed + 97 * k + 47), conn);
            l.options.levels = 4;
            out.push_back(std::move(l));
        }
    for (int conn : {6, 26})
        out.push_back(make_case("volume cones 40x30x20 c" + std::to_string(conn), cones({40, 30, 20}, {8, 6, 4}, {30, 22, 15}, DType::I32), conn));
    return out;
}

// ---- Hand-computed cases (the answers are derived in the comments) ---------------------------

/// A 1×N cube (W = N, H = 1) of `dtype` holding `values`.
inline Cube row_cube(const std::vector<double>& values, DType dtype = DType::F64) {
    Cube c(int(values.size()), 1, 1, dtype);
    for (std::size_t x = 0; x < values.size(); ++x) c.set_value(int(x), 0, 0, values[x]);
    return c;
}

/// A W×H cube from rows of values.
inline Cube image_cube(const std::vector<std::vector<double>>& rows, DType dtype = DType::F64) {
    Cube c(int(rows[0].size()), int(rows.size()), 1, dtype);
    for (std::size_t y = 0; y < rows.size(); ++y)
        for (std::size_t x = 0; x < rows[y].size(); ++x) c.set_value(int(x), int(y), 0, rows[y][x]);
    return c;
}

struct HandCase {
    Case c;
    std::vector<std::int32_t> labels;  // raster order
    std::int64_t regions;
};

inline std::vector<HandCase> hand_cases() {
    std::vector<HandCase> out;
    auto add = [&](Case c, std::vector<std::int32_t> labels, std::int64_t regions) { out.push_back({std::move(c), std::move(labels), regions}); };
    for (int conn : {4, 8}) {
        const std::string n = " c" + std::to_string(conn);
        // Minima at both ends of a plateau: the middle pixel (d = 2, both neighbours d = 1)
        // takes the first neighbour in order, (0, −1): left.
        add(make_case("plateau splits, odd" + n, row_cube({0, 5, 5, 5, 5, 5, 0}, DType::U8), conn), {1, 1, 1, 1, 2, 2, 2}, 2);
        add(make_case("plateau splits, even" + n, row_cube({1, 5, 5, 5, 5, 5, 5, 0}), conn), {1, 1, 1, 1, 2, 2, 2, 2}, 2);
        // h = |x − 5|, seeds 7 (x 1) and 42 (x 9): imposition fills x 2..8 to the passes out of
        // the seeds (h = 3): a plateau draining to both seeds, its middle (x 5) to the left.
        add(make_case("valley, markers 7 and 42" + n, row_cube({5, 4, 3, 2, 1, 0, 1, 2, 3, 4, 5}, DType::U8), conn,
                      row_cube({0, 7, 0, 0, 0, 0, 0, 0, 0, 42, 0}, DType::U16)),
            {7, 7, 7, 7, 7, 7, 42, 42, 42, 42, 42}, 2);
        // Touching seeds of different labels on a constant row keep their labels.
        add(make_case("touching markers" + n, row_cube({3, 3, 3, 3, 3, 3}), conn, row_cube({0, 0, 5, 9, 0, 0}, DType::I32)),
            {5, 5, 5, 9, 9, 9}, 2);
        // Negative marker values are no seeds; a mask component without a seed gets 0 (x 4 is out).
        add(make_case("negative markers, unseeded component" + n, row_cube({2, 1, 3, 2, 9, 1, 2, 0, 4}, DType::I16), conn,
                      row_cube({-3, 0, 12, -3, -3, -1, -3, -3, -3}, DType::I16), row_cube({1, 1, 1, 1, 0, 1, 1, 1, 1}, DType::U8)),
            {12, 12, 12, 12, 0, 0, 0, 0, 0}, 1);
        // A masked pixel is nobody's neighbour: 5 5 [0] 5 5 is two flat minima.
        add(make_case("mask hides a low pixel" + n, row_cube({5, 5, 0, 5, 5}), conn, std::nullopt, row_cube({1, 255, 0, 7, 1}, DType::U8)),
            {1, 1, 0, 2, 2}, 2);
        // levels range over the inside only: 0 2 1 2 0 [1000], levels 3 keeps the inside as it is.
        Case l = make_case("levels range inside the mask" + n, row_cube({0, 2, 1, 2, 0, 1000}), conn, std::nullopt,
                           row_cube({1, 1, 1, 1, 1, 0}, DType::U8));
        l.options.levels = 3;
        add(std::move(l), {1, 1, 2, 3, 3, 0}, 3);
        // levels 3 merges the minima of 0 3 1 10 20 30 40 (→ 0 0 0 1 1 2 2).
        Case m = make_case("levels merge minima" + n, row_cube({0, 3, 1, 10, 20, 30, 40}, DType::U16), conn);
        m.options.levels = 3;
        add(std::move(m), {1, 1, 1, 1, 1, 1, 1}, 1);
        // h-minima: 5 0 5 3 5 has minima of depth 5 and 2; h_min 1.5 keeps both, 3 fills the second.
        Case a = make_case("h_min keeps a deep minimum" + n, row_cube({5, 0, 5, 3, 5}, DType::U8), conn);
        a.options.h_min = 1.5;
        add(std::move(a), {1, 1, 1, 2, 2}, 2);
        Case b = make_case("h_min fills a shallow minimum" + n, row_cube({5, 0, 5, 3, 5}, DType::F32), conn);
        b.options.h_min = 3;
        add(std::move(b), {1, 1, 1, 1, 1}, 1);
        // A constant plane split by a masked column.
        Cube wall = constant({5, 3}, DType::U8, 1);
        for (int y = 0; y < 3; ++y) wall.at<std::uint8_t>(2, y, 0) = 0;
        add(make_case("mask wall splits a plateau" + n, constant({5, 3}, DType::F32, 2), conn, std::nullopt, std::move(wall)),
            {1, 1, 0, 2, 2, 1, 1, 0, 2, 2, 1, 1, 0, 2, 2}, 2);
    }
    // Columns (W = 1): the first neighbour in order is (−1, 0), up.
    Cube col(1, 7, 1, DType::U8);
    const int v[] = {0, 5, 5, 5, 5, 5, 0};
    for (int y = 0; y < 7; ++y) col.at<std::uint8_t>(0, y, 0) = std::uint8_t(v[y]);
    add(make_case("column plateau splits", col.clone(), 4), {1, 1, 1, 1, 2, 2, 2}, 2);
    add(make_case("column plateau splits c8", std::move(col), 8), {1, 1, 1, 1, 2, 2, 2}, 2);
    // A 1×1×5 volume 2 1 3 0 4: minima at z 1 and z 3; z 2 drains to its lowest neighbour, z 3.
    for (int conn : {6, 26}) {
        Cube z(1, 1, 5, DType::I32);
        const int h[] = {2, 1, 3, 0, 4};
        for (int k = 0; k < 5; ++k) z.at<std::int32_t>(0, 0, k) = h[k];
        add(make_case("z column c" + std::to_string(conn), std::move(z), conn), {1, 1, 2, 2, 2}, 2);
    }
    // 2×2 seed block of four labels in a constant 6×6 (4-conn): each quadrant drains to its corner.
    Cube seeds(6, 6, 1, DType::U16);
    seeds.at<std::uint16_t>(2, 2, 0) = 11;
    seeds.at<std::uint16_t>(3, 2, 0) = 22;
    seeds.at<std::uint16_t>(2, 3, 0) = 33;
    seeds.at<std::uint16_t>(3, 3, 0) = 44;
    std::vector<std::int32_t> quadrants;
    for (int y = 0; y < 6; ++y)
        for (int x = 0; x < 6; ++x) quadrants.push_back(y <= 2 ? (x <= 2 ? 11 : 22) : (x <= 2 ? 33 : 44));
    add(make_case("four touching seeds", constant({6, 6}, DType::U8, 0), 4, std::move(seeds)), quadrants, 4);
    return out;
}

/// The cases without markers of the ties, filter (levels, h-minima), mask and volume families, each
/// with a WatershedOptions::min_area of 2, 5, 12 or 40 in turn (the small-region merge).
inline std::vector<Case> min_area_cases(std::uint64_t seed) {
    std::vector<Case> out;
    const std::int64_t areas[] = {2, 5, 12, 40};
    std::vector<std::vector<Case>> families;
    families.push_back(tie_cases(seed));
    families.push_back(filter_cases(seed + 1));
    families.push_back(mask_cases(seed + 2));
    families.push_back(volume_cases(seed + 3));
    std::size_t k = 0;
    for (std::vector<Case>& family : families)
        for (Case& c : family) {
            if (c.markers) continue;
            c.options.min_area = areas[k++ % 4];
            c.name += " min_area " + std::to_string(c.options.min_area);
            out.push_back(std::move(c));
        }
    return out;
}

/// The message of the InvalidInput that f() throws, or a note saying what happened instead.
template <class F>
std::string invalid_input_message(F&& f) {
    try {
        f();
    } catch (const InvalidInput& e) {
        return e.what();
    } catch (const std::exception& e) {
        return std::string("<not InvalidInput: ") + e.what() + ">";
    }
    return "<no exception>";
}

}  // namespace cubekit::watershed_testing
