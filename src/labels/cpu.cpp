// Connected-component labelling, CPU reference (spec edges.md §3.7 "E3").
// One plane at a time: a union-find over pixel indices in which the smaller root always becomes
// the parent, so a component's root is its first pixel in raster order. Pass 1 visits the
// pixels in raster order and unites each with its already-visited neighbours (W, NW, N, NE);
// pass 2 numbers a component when it reaches its root and copies the root's number to the
// other pixels (whose roots come earlier). No recursion: any image size is safe.
#include <string>
#include <type_traits>
#include <vector>

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

// Labels one plane. kEqual: neighbours join only when their values are equal (else any two
// nonzero neighbours join). labels receives 0 or 1..n in canonical order; stats (optional)
// receives one entry per component. Returns n.
template <typename T, bool kEqual>
int label_plane(const T* image, int W, int H, int connectivity, std::int32_t* labels, DisjointPixels& sets,
                std::vector<ComponentInfo>* stats) {
    auto joins = [&](T a, T b) { return b != T(0) && (!kEqual || a == b); };
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
            const int i = y * W + x;
            const T v = image[i];
            if (v == T(0)) continue;
            sets.make_set(i);
            if (x > 0 && joins(v, image[i - 1])) sets.unite(i, i - 1);
            if (y == 0) continue;
            const int up = i - W;
            if (joins(v, image[up])) sets.unite(i, up);
            if (connectivity == 8) {
                if (x > 0 && joins(v, image[up - 1])) sets.unite(i, up - 1);
                if (x + 1 < W && joins(v, image[up + 1])) sets.unite(i, up + 1);
            }
        }
    int count = 0;
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
            const int i = y * W + x;
            if (image[i] == T(0)) {
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

template <typename T>
void label_all_bands(const Context& ctx, const Cube& image, int connectivity, Components& out) {
    const int W = image.width(), H = image.height(), B = image.bands();
    const std::size_t plane = std::size_t(W) * std::size_t(H);
    const T* data = image.data<T>();
    std::int32_t* labels = out.labels.data<std::int32_t>();
#pragma omp parallel num_threads(ctx.threads())
    {
        DisjointPixels sets(plane);
#pragma omp for schedule(dynamic)
        for (int b = 0; b < B; ++b)
            label_plane<T, true>(data + std::size_t(b) * plane, W, H, connectivity, labels + std::size_t(b) * plane,
                                 sets, &out.per_band[std::size_t(b)]);
    }
}

}  // namespace

Components label_components_cpu(const Context& ctx, const Cube& image, int connectivity) {
    check_label_geometry("label_components", image.width(), image.height(), image.bands(), connectivity);
    ctx.check_cancelled("label_components");
    Components out;
    out.labels = Cube(image.width(), image.height(), image.bands(), DType::I32, Layout::BSQ);
    out.per_band.resize(std::size_t(image.bands()));
    visit_dtype(image.dtype(), [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_integral_v<T>) label_all_bands<T>(ctx, image, connectivity, out);
        else throw InvalidInput("label_components: element type is " + std::string(dtype_name(image.dtype())) +
                                "; expected an integer type");
    });
    return out;
}

void remove_small_components_cpu(const Context& ctx, std::uint8_t* maps, int width, int height, int planes,
                                 std::int64_t min_size, int connectivity) {
    check_label_geometry("remove_small_components", width, height, planes, connectivity);
    if (min_size <= 1 || width == 0 || height == 0 || planes == 0) return;
    const std::size_t plane = std::size_t(width) * std::size_t(height);
#pragma omp parallel num_threads(ctx.threads())
    {
        DisjointPixels sets(plane);
        std::vector<std::int32_t> labels(plane);
        std::vector<ComponentInfo> stats;
#pragma omp for schedule(dynamic)
        for (int p = 0; p < planes; ++p) {
            std::uint8_t* map = maps + std::size_t(p) * plane;
            stats.clear();
            label_plane<std::uint8_t, false>(map, width, height, connectivity, labels.data(), sets, &stats);
            for (std::size_t i = 0; i < plane; ++i)
                if (labels[i] != 0 && stats[std::size_t(labels[i] - 1)].size < min_size) map[i] = 0;
        }
    }
}

}  // namespace cubekit::detail
