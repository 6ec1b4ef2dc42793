// RCMG, CPU reference: the specification in code (spec/gradient-watershed.md, A3).
// Pairs (i, j), i < j, in lexicographic order; D_ij = Σ_b (x_i,b − x_j,b)² with each sample
// converted to the accumulation type and the bands added in order 0..B−1 (Decision A-3);
// out-of-image window positions replicate the nearest pixel (Decision A-2).
//
// Neighbouring windows share most of their pairs: a pair of pixels (p, p + d) belongs to up to
// 9 windows, and its distance depends only on the two pixels. So the distances are computed once
// per pixel pair, for the window's displacements d (the 12 offsets between two vertices of a 3×3
// window, 6 of the cross), then every window gathers its 36 (10) from them: a third (three fifths)
// of the arithmetic of a per-window sum, with the same sums bit for bit. D(p, q) = D(q, p) exactly:
// round-to-nearest gives fl(a − b) = −fl(b − a), and the squares of the two are equal.
//
// Work items are tiles of rows × columns. A tile's rows are converted once to the accumulation
// type, band-major ([b][x], so that the sums run along x in vector registers, each lane its own
// fixed band order), kept in a ring of three rows with the distance rows of the three window rows.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include <omp.h>

#include "core/parallel.hpp"
#include "gradient/rcmg_internal.hpp"

namespace cubekit::detail {
namespace {

template <int N>
struct Pairs {
    static constexpr int count = N * (N - 1) / 2;
    int i[count], j[count];
    unsigned both[count];  // {i, j} as a bitmask of vertices
    constexpr Pairs() : i(), j(), both() {
        int p = 0;
        for (int a = 0; a < N; ++a)
            for (int b = a + 1; b < N; ++b) i[p] = a, j[p] = b, both[p] = (1u << a) | (1u << b), ++p;
    }
};

constexpr const WindowOffset* window_of(int n) { return n == 5 ? kWindow4 : kWindow8; }

// The offsets off_j − off_i of the window's pairs. Vertices are in raster order, so every one is
// "forward" (dy > 0, or dy = 0 and dx > 0). Clamping at the border shrinks an offset toward 0 in
// each coordinate, so a clamped pair is at a listed offset, its negation, or 0.
template <int N>
struct Displacements {
    static constexpr int kMax = 12;
    int count = 0;
    int dx[kMax], dy[kMax];
    int of_pair[Pairs<N>::count];  // the displacement of pair p
    int index[5][5];               // [dy + 2][dx + 2]: the displacement, or −1
    constexpr Displacements() : dx(), dy(), of_pair(), index() {
        for (auto& row : index)
            for (int& k : row) k = -1;
        constexpr Pairs<N> pairs;
        const WindowOffset* w = window_of(N);
        for (int p = 0; p < pairs.count; ++p) {
            const int ddx = w[pairs.j[p]].dx - w[pairs.i[p]].dx, ddy = w[pairs.j[p]].dy - w[pairs.i[p]].dy;
            int& k = index[ddy + 2][ddx + 2];
            if (k < 0) k = count, dx[count] = ddx, dy[count] = ddy, ++count;
            of_pair[p] = k;
        }
    }
};

// r rounds of "reject the lexicographically first maximal pair", then the maximum of the rest.
// D holds the pair distances in lexicographic order, and one more slot (scratch); NaN anywhere
// gives NaN. Without NaN, the maximum of a set is exact in any order of comparisons, so each round
// takes the maximum first (four running maxima, and a pair outside A_t reads the scratch slot,
// −inf: no long chain of dependent compares, no data-dependent branch), then the first pair that
// attains it, which is the pair a strict scan keeps.
template <int N, typename Acc>
Acc robust_max(Acc* D, int reject) {
    static constexpr Pairs<N> pairs;
    constexpr int n = pairs.count;
    bool nan = false;
    for (int p = 0; p < n; ++p) nan |= std::isnan(D[p]);
    if (nan) return std::numeric_limits<Acc>::quiet_NaN();
    D[n] = -std::numeric_limits<Acc>::infinity();  // below every distance
    auto larger = [](Acc a, Acc b) { return b > a ? b : a; };
    unsigned active = (1u << N) - 1;  // vertex set A_t as a bitmask
    auto in_set = [&](int p) { return (active & pairs.both[p]) == pairs.both[p]; };
    for (int t = 0;; ++t) {
        auto value = [&](int p) { return D[in_set(p) ? p : n]; };
        Acc m0 = D[n], m1 = D[n], m2 = D[n], m3 = D[n];
        int p = 0;
        for (; p + 4 <= n; p += 4)
            m0 = larger(m0, value(p)), m1 = larger(m1, value(p + 1)), m2 = larger(m2, value(p + 2)),
            m3 = larger(m3, value(p + 3));
        for (; p < n; ++p) m0 = larger(m0, value(p));
        const Acc best = larger(larger(m0, m1), larger(m2, m3));
        if (t == reject) return best;  // validation keeps ≥ 2 vectors, so A_t has a pair
        p = 0;
        while (!(in_set(p) && D[p] == best)) ++p;
        active &= ~pairs.both[p];
    }
}

constexpr int kTileWidth = 128;  // columns of a tile: its three converted rows stay in L2
// Columns whose sums pair_distances keeps in registers: six SSE2 registers of sums (12 f64, 24
// f32), enough independent chains to hide the additions' latency, few enough to leave registers
// for the operands (eight spilled one sum to the stack: 2026-11-26, the 2-core dev machine).
template <typename Acc>
constexpr int kBlock = 6 * 16 / int(sizeof(Acc));
constexpr int kPad = kBlock<float> + 2;  // row padding: a block's overrun (< kBlock) plus the largest |dx|

// One thread's rings for a tile of `stride` columns (tile + one column each side + kPad): three
// converted input rows (rows r..r+2 give base row r's distances), and for the three base rows of
// the window rows, the distances at each displacement and whether a pixel has a non-finite sample
// (its distance to itself, Σ (x − x)², met where the border clamps two vertices together, is then
// NaN, else 0).
template <typename Acc, int N>
struct Rings {
    static constexpr int kD = Displacements<N>().count;
    int B = 0;
    std::size_t stride = 0;
    std::vector<Acc> rows, dist;
    std::vector<std::uint8_t> nonfinite;
    Rings(int bands, std::size_t columns)
        : B(bands), stride(columns), rows(3 * std::size_t(bands) * columns), dist(3 * kD * columns),
          nonfinite(3 * columns) {}
    Acc* row(int y) { return &rows[std::size_t(y % 3) * std::size_t(B) * stride]; }
    Acc* distances(int y, int k) { return &dist[(std::size_t(y % 3) * kD + std::size_t(k)) * stride]; }
    std::uint8_t* flags(int y) { return &nonfinite[std::size_t(y % 3) * stride]; }
};

// Columns lo..lo+w−1 of row y, converted to Acc, into dst[b·stride + c].
template <typename T, typename Acc>
void convert_row(const StridedView<const T>& cube, int y, int lo, int w, std::size_t stride, Acc* dst) {
    const int B = cube.bands;
    if (cube.strides.x == 1) {
        for (int b = 0; b < B; ++b) {
            const T* src = &cube(lo, y, b);
            Acc* out = dst + std::size_t(b) * stride;
            for (int c = 0; c < w; ++c) out[c] = Acc(src[c]);
        }
        return;
    }
    // A transpose, by blocks of pixels whose samples stay in L1 while the bands are written.
    constexpr int kPixels = 16;
    const std::int64_t sx = cube.strides.x, sb = cube.strides.b;
    for (int c0 = 0; c0 < w; c0 += kPixels) {
        const int c1 = std::min(w, c0 + kPixels);
        const T* src = &cube(lo, y, 0);
        for (int b = 0; b < B; ++b) {
            Acc* out = dst + std::size_t(b) * stride;
            for (int c = c0; c < c1; ++c) out[c] = Acc(src[c * sx + b * sb]);
        }
    }
}

// flags[c] = 1 where a converted sample of pixel c of the row is not finite (x − x ≠ 0 exactly for
// ±inf and NaN), for the columns c0..c1−1.
template <typename Acc>
void nonfinite_flags(const Acc* row, int B, std::size_t stride, int c0, int c1, std::uint8_t* flags) {
    std::fill(flags + c0, flags + c1, std::uint8_t(0));
    for (int b = 0; b < B; ++b) {
        const Acc* v = row + std::size_t(b) * stride;
        for (int c = c0; c < c1; ++c) flags[c] |= std::uint8_t(v[c] - v[c] != Acc(0));
    }
}

// D at displacement (dx, dy) from every tile column c whose partner c + dx is in the tile:
// e[c] = Σ_b (a_b[c] − z_b[c + dx])², bands in order, a = row y, z = row y + dy. Each block of
// kBlock columns keeps its sums in registers over all the bands (one lane per column).
template <typename Acc>
void pair_distances(const Acc* a, const Acc* z, int B, std::size_t stride, int w, int dx, Acc* e) {
    const int c0 = std::max(0, -dx), c1 = std::min(w, w - dx);
    // Whole blocks only: the last may run past c1 into the rows' padding (kPad), where it reads
    // stale values and writes distances that nothing reads.
    constexpr int kB = kBlock<Acc>;
    for (int c = c0; c < c1; c += kB) {
        Acc acc[kB] = {};
        const Acc* av = a + c;
        const Acc* zv = z + c + dx;
        for (int b = 0; b < B; ++b, av += stride, zv += stride)
            for (int k = 0; k < kB; ++k) {
                const Acc diff = av[k] - zv[k];
                acc[k] = acc[k] + diff * diff;
            }
        std::copy_n(acc, kB, e + c);
    }
}

template <typename T, typename Acc, typename Out, int N>
struct RcmgTiles {
    static constexpr Pairs<N> pairs{};
    static constexpr Displacements<N> disp{};
    const StridedView<const T>& cube;
    const StridedView<Out>& out;
    const RcmgOptions& options;
    int W, H, B;

    // Base row r's distances (rows r, r + 1, r + 2 converted) for the tile's columns.
    void distance_row(Rings<Acc, N>& g, int r, int lo, int w) const {
        // Two vertices clamp to one pixel only on the image's border: only border pixels need flags.
        if (r == 0 || r == H - 1) {
            nonfinite_flags(g.row(r), B, g.stride, 0, w, g.flags(r));
        } else {
            if (lo == 0) nonfinite_flags(g.row(r), B, g.stride, 0, 1, g.flags(r));
            if (lo + w == W) nonfinite_flags(g.row(r), B, g.stride, w - 1, w, g.flags(r));
        }
        for (int k = 0; k < disp.count; ++k)
            if (r + disp.dy[k] < H)
                pair_distances(g.row(r), g.row(r + disp.dy[k]), B, g.stride, w, disp.dx[k], g.distances(r, k));
    }

    // D of the pixels (xi, yi) and (xj, yj) (image coordinates inside the tile's rows and columns).
    Acc lookup(Rings<Acc, N>& g, int lo, int xi, int yi, int xj, int yj) const {
        const int ddx = xj - xi, ddy = yj - yi;
        if (ddx == 0 && ddy == 0)
            return g.flags(yi)[xi - lo] ? std::numeric_limits<Acc>::quiet_NaN() : Acc(0);
        const int k = disp.index[ddy + 2][ddx + 2];
        if (k >= 0) return g.distances(yi, k)[xi - lo];
        return g.distances(yj, disp.index[2 - ddy][2 - ddx])[xj - lo];
    }

    // The window of border pixel (x, y): both vertices of a pair are clamped first (Decision A-2).
    void border_window(Rings<Acc, N>& g, int lo, int x, int y, Acc* D) const {
        const WindowOffset* w = window_of(N);
        for (int p = 0; p < pairs.count; ++p) {
            const WindowOffset a = w[pairs.i[p]], b = w[pairs.j[p]];
            D[p] = lookup(g, lo, std::clamp(x + a.dx, 0, W - 1), std::clamp(y + a.dy, 0, H - 1),
                          std::clamp(x + b.dx, 0, W - 1), std::clamp(y + b.dy, 0, H - 1));
        }
    }

    // Output row y, columns x0..x1−1 (the ring holds the distances of base rows y − 1..y + 1).
    // An interior pixel reads pair p at its vertex i: at[p][x].
    void output_row(Rings<Acc, N>& g, int lo, int y, int x0, int x1) const {
        const Acc* at[pairs.count] = {};
        const bool inner_row = y > 0 && y < H - 1;
        if (inner_row)
            for (int p = 0; p < pairs.count; ++p) {
                const WindowOffset o = window_of(N)[pairs.i[p]];
                at[p] = g.distances(y + o.dy, disp.of_pair[p]) + (o.dx - lo);
            }
        for (int x = x0; x < x1; ++x) {
            Acc D[pairs.count + 1];  // + robust_max's scratch slot
            if (inner_row && x > 0 && x < W - 1)
                for (int p = 0; p < pairs.count; ++p) D[p] = at[p][x];
            else
                border_window(g, lo, x, y, D);
            const Acc m = robust_max<N>(D, options.reject);
            // The square root is taken once, in f64, then rounded to the output type (A3).
            const double v = options.squared ? double(m) : std::sqrt(double(m));
            out(x, y, 0) = Out(v);
        }
    }

    // Output rows y0..y1−1, columns x0..x1−1.
    void tile(Rings<Acc, N>& g, int y0, int y1, int x0, int x1) const {
        const int lo = std::max(x0 - 1, 0), w = std::min(x1 + 1, W) - lo;
        int converted = std::max(y0 - 1, 0) - 1, computed = converted;  // the last row of each ring
        for (int y = y0; y < y1; ++y) {
            for (const int need = std::min(y + 1, H - 1); computed < need;) {
                for (const int last = std::min(computed + 3, H - 1); converted < last;) {
                    ++converted;
                    convert_row(cube, converted, lo, w, g.stride, g.row(converted));
                }
                distance_row(g, ++computed, lo, w);
            }
            output_row(g, lo, y, x0, x1);
        }
    }

    void run(const Context& ctx) const {
        const int threads = std::max(ctx.threads(), 1);
        const int tiles_x = (W + kTileWidth - 1) / kTileWidth, tile_w = (W + tiles_x - 1) / tiles_x;
        // Enough items for the threads (about 4 each), with chunks of rows long enough that the two
        // base rows a chunk shares with the next (computed by both) stay a small part of the work.
        const int chunks = std::clamp((4 * threads + tiles_x - 1) / tiles_x, 1, std::max(1, H / 16));
        const int rows = (H + chunks - 1) / chunks, tiles_y = (H + rows - 1) / rows;
        const std::int64_t items = std::int64_t(tiles_x) * tiles_y;
        // Progress in rows (0..H), from OpenMP's master thread only (parallel_for's rule).
        std::atomic<std::int64_t> done{0};
        std::int64_t reported = 0;
        parallel_for(
            ctx, items, {.where = "rcmg", .schedule = Schedule::Dynamic},
            [&] { return Rings<Acc, N>(B, std::size_t(tile_w + 2 + kPad)); },
            [&](std::int64_t item, Rings<Acc, N>& g) {
                const int ty = int(item / tiles_x), tx = int(item % tiles_x);
                tile(g, ty * rows, std::min(H, (ty + 1) * rows), tx * tile_w, std::min(W, (tx + 1) * tile_w));
                const std::int64_t now = done.fetch_add(1) + 1;
                const std::int64_t row_count = now * H / items;
                if (omp_get_thread_num() == 0 && row_count > reported && row_count < H) {
                    reported = row_count;
                    ctx.progress(std::size_t(row_count), std::size_t(H));
                }
            });
        ctx.progress(std::size_t(H), std::size_t(H));
    }
};

template <typename T, typename Acc, typename Out>
void rcmg_typed(const Context& ctx, const CubeView& cube, const MutableCubeView& out, const RcmgOptions& options) {
    const auto in = cube.typed<T>();
    const auto o = out.typed<Out>();
    if (options.connectivity == 4) RcmgTiles<T, Acc, Out, 5>{in, o, options, in.width, in.height, in.bands}.run(ctx);
    else RcmgTiles<T, Acc, Out, 9>{in, o, options, in.width, in.height, in.bands}.run(ctx);
}

}  // namespace

void rcmg_cpu(const Context& ctx, const CubeView& cube, const MutableCubeView& out, const RcmgOptions& options) {
    visit_dtype(cube.dtype(), [&](auto tag) {
        using T = decltype(tag);
        if (options.precision == Precision::F64) {
            if (options.out_type == DType::F64) rcmg_typed<T, double, double>(ctx, cube, out, options);
            else rcmg_typed<T, double, float>(ctx, cube, out, options);
        } else {
            rcmg_typed<T, float, float>(ctx, cube, out, options);
        }
    });
}

}  // namespace cubekit::detail
