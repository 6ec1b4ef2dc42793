// Connected-component labelling, CPU reference (spec edges.md §3.7 "E3").
// One plane at a time: a union-find over pixel indices in which the smaller root always becomes
// the parent, so a component's root is its first pixel in raster order. Pass 1 visits the
// pixels in raster order and unites each with its already-visited neighbours (W, NW, N, NE);
// pass 2 numbers a component when it reaches its root and copies the root's number to the
// other pixels (whose roots come earlier). No recursion: any image size is safe.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "core/parallel.hpp"
#include "labels/labels_internal.hpp"

namespace cubekit::detail {
namespace {

// Union-find over the pixels of one plane. parent[i] ≤ i always; roots satisfy parent[i] == i.
class DisjointPixels {
public:
    explicit DisjointPixels(std::size_t pixels) : parent_(pixels) {}
    void make_set(int i) { parent_[std::size_t(i)] = i; }
    int find(int i) {
        while (parent_[std::size_t(i)] != i) {  // path halving
            const int grandparent = parent_[std::size_t(parent_[std::size_t(i)])];
            parent_[std::size_t(i)] = grandparent;
            i = grandparent;
        }
        return i;
    }
    void unite(int a, int b) {
        a = find(a);
        b = find(b);
        if (a < b) parent_[std::size_t(b)] = a;
        else if (b < a) parent_[std::size_t(a)] = b;
    }

private:
    std::vector<int> parent_;
};

// One band of a strided view: sample (x, y) is origin[x·sx + y·sy].
template <typename T>
struct PlaneView {
    T* origin = nullptr;
    std::int64_t sx = 1, sy = 0;
    T& operator()(int x, int y) const { return origin[std::int64_t(x) * sx + std::int64_t(y) * sy]; }
};

template <typename T, typename View>
PlaneView<T> plane_of(const View& v, int b) {
    const auto typed = v.template typed<std::remove_const_t<T>>();
    return {&typed(0, 0, b), typed.strides.x, typed.strides.y};
}

// Labels one plane. kEqual: neighbours join only when their values are equal (else any two
// nonzero neighbours join). labels (a dense W×H plane) receives 0 or 1..n in canonical order;
// stats (optional) receives one entry per component. Returns n.
template <typename T, bool kEqual>
int label_plane(PlaneView<const T> image, int W, int H, int connectivity, std::int32_t* labels, DisjointPixels& sets,
                std::vector<ComponentInfo>* stats) {
    auto joins = [&](T a, T b) { return b != T(0) && (!kEqual || a == b); };
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
            const int i = y * W + x;
            const T v = image(x, y);
            if (v == T(0)) continue;
            sets.make_set(i);
            if (x > 0 && joins(v, image(x - 1, y))) sets.unite(i, i - 1);
            if (y == 0) continue;
            const int up = i - W;
            if (joins(v, image(x, y - 1))) sets.unite(i, up);
            if (connectivity == 8) {
                if (x > 0 && joins(v, image(x - 1, y - 1))) sets.unite(i, up - 1);
                if (x + 1 < W && joins(v, image(x + 1, y - 1))) sets.unite(i, up + 1);
            }
        }
    int count = 0;
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
            const int i = y * W + x;
            if (image(x, y) == T(0)) {
                labels[i] = 0;
                continue;
            }
            const int root = sets.find(i);
            if (root == i) {
                labels[i] = ++count;
                if (stats) stats->push_back(ComponentInfo{1, x, y, x, y});
                continue;
            }
            labels[i] = labels[root];  // the root precedes i, so it is numbered already
            if (stats) {
                ComponentInfo& c = (*stats)[std::size_t(labels[i] - 1)];
                ++c.size;
                if (x < c.x0) c.x0 = x;
                if (x > c.x1) c.x1 = x;
                c.y1 = y;  // rows arrive in order; y0 was set by the first pixel
            }
        }
    return count;
}

// A thread's scratch: the union-find, a dense label plane (used when the output plane is not
// dense, and by the removal), the statistics of one plane.
struct Scratch {
    DisjointPixels sets;
    std::vector<std::int32_t> labels;
    std::vector<ComponentInfo> stats;
    explicit Scratch(std::size_t plane) : sets(plane), labels(plane) {}
};

template <typename T>
void label_all_bands(const Context& ctx, const CubeView& image, const MutableCubeView& labels, int connectivity,
                     ComponentStats& stats) {
    const int W = image.width(), H = image.height();
    const std::size_t plane = std::size_t(W) * std::size_t(H);
    const auto out = labels.typed<std::int32_t>();
    // A dense output plane is written directly; any other goes through the thread's scratch.
    const bool dense_planes = (W <= 1 || out.strides.x == 1) && (H <= 1 || out.strides.y == W);
    parallel_for(
        ctx, image.bands(), {.where = "label_components", .schedule = Schedule::Dynamic}, [&] { return Scratch(plane); },
        [&](std::int64_t b64, Scratch& s) {
            const int b = int(b64);
            std::int32_t* dst = dense_planes ? &out(0, 0, b) : s.labels.data();
            label_plane<T, true>(plane_of<const T>(image, b), W, H, connectivity, dst, s.sets, &stats[std::size_t(b)]);
            if (dense_planes) return;
            for (int y = 0; y < H; ++y)
                for (int x = 0; x < W; ++x) out(x, y, b) = dst[std::size_t(y) * std::size_t(W) + std::size_t(x)];
        });
}

// ---- Removal in one large plane, by strips of rows ------------------------------------------
// For fewer planes than threads (the edge detector's one fused map): each thread labels a strip
// of rows, then the strips are joined along their first rows, and every pixel reads its
// component's size. A root holds −(its component's size) (any other pixel its parent's index),
// so the size is complete once the last union is made. Which pixels go depends only on the
// components, not on how they were found: the result is the one-plane labelling's.
class SizedPixels {
public:
    explicit SizedPixels(std::size_t pixels) : parent_(new std::int32_t[pixels]) {}  // set per pixel
    void make_set(std::int32_t i) { parent_[i] = -1; }
    std::int32_t find(std::int32_t i) {
        while (parent_[i] >= 0) {  // path halving
            const std::int32_t p = parent_[i];
            if (parent_[p] >= 0) parent_[i] = parent_[p];
            i = p;
        }
        return i;
    }
    std::int32_t find_readonly(std::int32_t i) const {  // for threads that run at once
        while (parent_[i] >= 0) i = parent_[i];
        return i;
    }
    void unite(std::int32_t a, std::int32_t b) {
        a = find(a), b = find(b);
        if (a == b) return;
        if (b < a) std::swap(a, b);
        parent_[a] += parent_[b];
        parent_[b] = a;
    }
    std::int64_t size_of_root(std::int32_t r) const { return -std::int64_t(parent_[r]); }

private:
    std::unique_ptr<std::int32_t[]> parent_;
};

// Unites foreground pixel (x, y) with its foreground neighbours in row y − 1 (N, and NW, NE for
// 8-connectivity); kEqual: only neighbours of equal value join.
template <bool kEqual>
void unite_up(const PlaneView<std::uint8_t>& map, int W, int x, int y, int connectivity, SizedPixels& sets) {
    const std::uint8_t v = map(x, y);
    auto joins = [&](std::uint8_t b) { return b != 0 && (!kEqual || v == b); };
    const std::int32_t i = y * W + x, up = i - W;
    if (joins(map(x, y - 1))) sets.unite(i, up);
    if (connectivity != 8) return;
    if (x > 0 && joins(map(x - 1, y - 1))) sets.unite(i, up - 1);
    if (x + 1 < W && joins(map(x + 1, y - 1))) sets.unite(i, up + 1);
}

template <bool kEqual>
void remove_small_by_strips(const Context& ctx, const PlaneView<std::uint8_t>& map, int W, int H,
                            std::int64_t min_size, int connectivity) {
    SizedPixels sets(std::size_t(W) * std::size_t(H));
    const int strips = std::min(ctx.threads(), H);
    auto first_row = [&](int k) { return int(std::int64_t(H) * k / strips); };
#pragma omp parallel for schedule(static) num_threads(strips)
    for (int k = 0; k < strips; ++k)
        for (int y = first_row(k); y < first_row(k + 1); ++y)
            for (int x = 0; x < W; ++x) {
                const std::uint8_t v = map(x, y);
                if (v == 0) continue;
                const std::int32_t i = y * W + x;
                sets.make_set(i);
                if (x > 0 && map(x - 1, y) != 0 && (!kEqual || map(x - 1, y) == v)) sets.unite(i, i - 1);
                if (y > first_row(k)) unite_up<kEqual>(map, W, x, y, connectivity, sets);
            }
    for (int k = 1; k < strips; ++k)  // W·(strips − 1) pixels: serial
        for (int x = 0, y = first_row(k); x < W; ++x)
            if (map(x, y) != 0) unite_up<kEqual>(map, W, x, y, connectivity, sets);
#pragma omp parallel for schedule(static) num_threads(strips)
    for (int k = 0; k < strips; ++k)
        for (int y = first_row(k); y < first_row(k + 1); ++y)
            for (int x = 0; x < W; ++x)
                if (map(x, y) != 0 && sets.size_of_root(sets.find_readonly(y * W + x)) < min_size) map(x, y) = 0;
}

template <bool kEqual>
void remove_small_planes(const Context& ctx, const MutableCubeView& maps, std::int64_t min_size, int connectivity) {
    const int W = maps.width(), H = maps.height();
    const std::size_t plane = std::size_t(W) * std::size_t(H);
    constexpr std::size_t kStripPixels = std::size_t(1) << 16;  // below this, one thread labels a plane
    if (maps.bands() < ctx.threads() && plane >= kStripPixels && H >= 2 * ctx.threads()) {
        for (int b = 0; b < maps.bands(); ++b) {
            ctx.check_cancelled("remove_small_components");
            remove_small_by_strips<kEqual>(ctx, plane_of<std::uint8_t>(maps, b), W, H, min_size, connectivity);
        }
        return;
    }
    parallel_for(
        ctx, maps.bands(), {.where = "remove_small_components", .schedule = Schedule::Dynamic},
        [&] { return Scratch(plane); },
        [&](std::int64_t b, Scratch& s) {
            const PlaneView<std::uint8_t> map = plane_of<std::uint8_t>(maps, int(b));
            s.stats.clear();
            label_plane<std::uint8_t, kEqual>({map.origin, map.sx, map.sy}, W, H, connectivity, s.labels.data(), s.sets,
                                              &s.stats);
            for (int y = 0; y < H; ++y)
                for (int x = 0; x < W; ++x) {
                    const std::int32_t l = s.labels[std::size_t(y) * std::size_t(W) + std::size_t(x)];
                    if (l != 0 && s.stats[std::size_t(l - 1)].size < min_size) map(x, y) = 0;
                }
        });
}

}  // namespace

ComponentStats label_components_cpu(const Context& ctx, const CubeView& image, const MutableCubeView& labels,
                                    int connectivity) {
    check_label_geometry("label_components", image.width(), image.height(), image.bands(), connectivity);
    ctx.check_cancelled("label_components");
    ComponentStats stats(std::size_t(image.bands()));
    visit_dtype(image.dtype(), [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_integral_v<T>) label_all_bands<T>(ctx, image, labels, connectivity, stats);
        else throw InvalidInput("label_components: element type is " + std::string(dtype_name(image.dtype())) +
                                "; expected an integer type");
    });
    return stats;
}

void remove_small_components_cpu(const Context& ctx, const MutableCubeView& maps, std::int64_t min_size,
                                 int connectivity, bool equal_values) {
    check_label_geometry("remove_small_components", maps.width(), maps.height(), maps.bands(), connectivity);
    if (min_size <= 1 || maps.empty()) return;
    if (equal_values) remove_small_planes<true>(ctx, maps, min_size, connectivity);
    else remove_small_planes<false>(ctx, maps, min_size, connectivity);
}

void remove_small_components_cpu(const Context& ctx, std::uint8_t* maps, int width, int height, int planes,
                                 std::int64_t min_size, int connectivity) {
    check_label_geometry("remove_small_components", width, height, planes, connectivity);
    if (min_size <= 1 || width == 0 || height == 0 || planes == 0) return;
    const auto view = MutableCubeView::host(maps, width, height, planes, DType::U8,
                                            dense_strides(width, height, planes, Layout::BSQ));
    remove_small_components_cpu(ctx, view, min_size, connectivity, false);
}

}  // namespace cubekit::detail
