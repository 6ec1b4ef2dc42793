// Connected-component labelling, CPU reference (spec edges.md §3.7 "E3").
// One plane at a time: a union-find over pixel indices in which the smaller root always becomes
// the parent, so a component's root is its first pixel in raster order. Pass 1 visits the
// pixels in raster order and unites each with its already-visited neighbours (W, NW, N, NE);
// pass 2 numbers a component when it reaches its root and copies the root's number to the
// other pixels (whose roots come earlier). No recursion: any image size is safe.
#include <cstdint>
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

template <bool kEqual>
void remove_small_planes(const Context& ctx, const MutableCubeView& maps, std::int64_t min_size, int connectivity) {
    const int W = maps.width(), H = maps.height();
    const std::size_t plane = std::size_t(W) * std::size_t(H);
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
