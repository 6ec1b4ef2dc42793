// CUDA Zernike moments (spec zernike.md §4.7). Per batch of images:
//   1. geometry: (X, Y, t) of every point of the layout (a representative on the 8-fold path, a
//      pixel otherwise), shared by all images;
//   2. fold: each image's values at every point, folded over the 8 mirrors (8 doubles per
//      representative, 1 per pixel), converted to double on load; the samples are read through
//      the input view's strides, so a window or a BIP cube on the device is read where it is
//      (the fold gathers mirror pixels anyway; the moments kernel, not the fold, sets the time);
//   3. moments: one fused kernel for everything requested. Block (x, task, image): a grid-stride
//      loop over the image's points; the task's ≤ kMaxSlots moments are generated on the fly
//      (Kintner chains, explicit sums or the scaled q-recursion, with (X − jY)^m) and accumulated
//      in registers; then a fixed-order block reduction writes one partial per block;
//   4. finalise: the partials of each moment added in block order, scaled by (n + 1)/denominator
//      and written into the caller's output (any strides).
// The per-point arithmetic is zernike_math.hpp, shared with the CPU reference; the block count
// per image depends only on the point count, so results are deterministic and a batch gives each
// image exactly what it gets alone.
#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>
#include <string>
#include <type_traits>

#include "core/cuda_check.hpp"
#include "zernike/moments_kernels.cuh"
#include "zernike/zernike_internal.hpp"

namespace cubekit::zernike {

namespace {

constexpr int kPointsPerThread = 16;  // points per thread before another block is added (8..96 measured: 16 best)
constexpr int kMinPointsPerThread = 8;
constexpr int kFillBlocks = 1600;  // ≈ 4 waves of 3 blocks on 132 SMs
constexpr int kMaxBlocksPerImage = 1024;
constexpr int kMaxGridY = 65535;

__device__ int row_of(const std::int64_t* offsets, int rows, std::int64_t p) {
    int lo = 0, hi = rows - 1;  // offsets[lo] ≤ p < offsets[hi + 1]
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (offsets[mid] <= p) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

// The point of index p: its centred (u, v) or, for Custom, its (x, y), and (X, Y, t).
__device__ int2 point_at(const PointRow* rows, const std::int64_t* offsets, int nrows, std::int64_t p, bool custom,
                         const CentredGeometry& g, double cx, double cy, double rho, double& X, double& Y, double& t) {
    const int r = row_of(offsets, nrows, p);
    const PointRow row = rows[r];
    const int j = int(p - offsets[r]);
    if (custom) {
        custom_point(cx, cy, rho, row.first + j, row.v, X, Y, t);
        return make_int2(row.first + j, row.v);
    }
    centred_point(g, row.first + 2 * j, row.v, X, Y, t);
    return make_int2(row.first + 2 * j, row.v);
}

// Folds every point of `chunk` images (the bands of `images`, read through its strides: any
// layout or window): folded[(b * 8 + k) * P + p] (symmetric) or folded[b * P + p] (plain); with
// `write_geometry`, also writes the geometry of every point.
template <typename E, bool Sym>
__global__ void fold_kernel(StridedView<const E> images, const PointRow* rows, const std::int64_t* offsets, int nrows,
                            bool custom, CentredGeometry g, double cx, double cy, double rho, std::int64_t P, int chunk,
                            double* folded, bool write_geometry, Geometry geo) {
    const int W = images.width, H = images.height;
    for (std::int64_t q = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; q < P * chunk;
         q += std::int64_t(gridDim.x) * blockDim.x) {
        const int b = int(q / P);
        const std::int64_t p = q - std::int64_t(b) * P;
        double X, Y, t;
        const int2 a = point_at(rows, offsets, nrows, p, custom, g, cx, cy, rho, X, Y, t);
        if (write_geometry && b == 0) {
            geo.X[p] = X;
            geo.Y[p] = Y;
            geo.t[p] = t;
            geo.at[p] = a;
        }
        auto f = [&](int u, int v) { return double(images((u + W - 1) / 2, (H - 1 - v) / 2, b)); };
        if constexpr (Sym) {
            const Folded s = fold_representative(f, a.x, a.y);
            double* o = folded + std::size_t(b) * 8 * std::size_t(P) + std::size_t(p);
            const double v[8] = {s.sa0, s.sa2, s.da, s.ea, s.sb0, s.sb2, s.db, s.eb};
#pragma unroll
            for (int k = 0; k < 8; ++k) o[std::size_t(k) * std::size_t(P)] = v[k];
        } else {
            folded[std::size_t(b) * std::size_t(P) + std::size_t(p)] = custom ? double(images(a.x, a.y, b)) : f(a.x, a.y);
        }
    }
}

__global__ void geometry_kernel(const PointRow* rows, const std::int64_t* offsets, int nrows, std::int64_t P,
                                bool custom, CentredGeometry g, double cx, double cy, double rho, Geometry out) {
    for (std::int64_t p = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; p < P;
         p += std::int64_t(gridDim.x) * blockDim.x) {
        double X, Y, t;
        out.at[p] = point_at(rows, offsets, nrows, p, custom, g, cx, cy, rho, X, Y, t);
        out.X[p] = X;
        out.Y[p] = Y;
        out.t[p] = t;
    }
}

// Slot infos of every task (tasks × kMaxSlots), from the plan and the coefficient tables.
std::vector<SlotInfo> slot_infos(const Plan& plan, const Coefficients& co) {
    std::vector<SlotInfo> out(plan.slots.size(), SlotInfo{0, 0, 0, 0, 0, kStep, 0});
    for (int t = 0; t < plan.tasks; ++t) {
        int prev_n = 0, prev_m = 0;
        for (int i = 0; i < plan.slot_count[std::size_t(t)]; ++i) {
            const PlanSlot& s = plan.slots[std::size_t(t) * kMaxSlots + std::size_t(i)];
            SlotInfo& o = out[std::size_t(t) * kMaxSlots + std::size_t(i)];
            o.n = s.n;
            o.m = s.m;
            if (plan.kind == PlanKind::QRec) {
                const bool first = i == 0;
                const int from = first ? s.n : prev_m;  // the repetition s2 holds before this slot
                if (first && s.m == s.n) o.kind = kStart;
                else if (!first && s.m == from - 2) o.kind = kStep;
                else o.kind = first ? kSlowStart : kSlow;
                o.from = from;
                if (o.kind == kStep) {
                    if (s.m == s.n - 2) { o.a = 0.0; o.b = double(s.n); o.c = -double(s.n - 1); }  // S(n−2) = n·t − (n−1)
                    else { const QRecCoef h = co.qrec[std::size_t(set_index(s.n, s.m))]; o.a = h.h1; o.b = h.h2; o.c = h.h3; }
                }
            } else {
                const bool start = s.start != 0;
                const int from = start ? s.m : prev_n;  // the order r1 holds before this slot's steps
                if (plan.kind == PlanKind::Chain) {
                    if (start && s.n == s.m) o.kind = kStart;
                    else if (!start && s.n == from + 2) o.kind = kStep;
                    else o.kind = start ? kSlowStart : kSlow;
                    if (o.kind == kStep) {
                        if (s.n == s.m + 2) { o.a = double(s.m + 2); o.b = -double(s.m + 1); o.c = 0.0; }  // R̃(m+2,m)
                        else { const KintnerCoef k = co.kintner[std::size_t(set_index(s.n, s.m))]; o.a = k.a; o.b = k.b; o.c = k.c; }
                    }
                } else {
                    o.kind = kStart;  // Explicit: every slot on its own
                }
                o.from = from;
            }
            prev_n = s.n;
            prev_m = s.m;
        }
    }
    return out;
}

// out(k, b, c) = (Σ over blocks of moment k's partials) · factor[k] / denominator, c = 0 (re) or
// 1 (im): one warp per value, each lane adding every 32nd block in order, then a fixed shuffle
// tree (deterministic); the scaling is the CPU's, operation for operation.
__global__ void finalise_kernel(const double* partial, const int2* where, const double* factor, double denominator,
                                int M, int tasks, int blocks, int chunk, StridedView<double> out) {
    const int q = int((blockIdx.x * std::size_t(blockDim.x) + threadIdx.x) / 32), lane = threadIdx.x % 32;
    if (q >= chunk * M * 2) return;
    const int c = q % 2, k = (q / 2) % M, b = q / (2 * M);
    const int2 ts = where[k];  // (task, slot)
    const double* p = partial + ((std::size_t(b) * tasks + std::size_t(ts.x)) * blocks) * (2 * kMaxSlots) +
                      std::size_t(ts.y) * 2 + std::size_t(c);
    double s = 0.0;
    for (int x = lane; x < blocks; x += 32) s += p[std::size_t(x) * (2 * kMaxSlots)];
    s = warp_sum(s);
    if (lane == 0) out(k, b, c) = s * factor[k] / denominator;
}

// Every sample of `out` set to 0 (the pixels outside the disk of a reconstruction).
__global__ void zero_kernel(StridedView<double> out) {
    const std::int64_t plane = std::int64_t(out.width) * out.height, n = plane * out.bands;
    for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
         i += std::int64_t(gridDim.x) * blockDim.x) {
        const int b = int(i / plane), y = int((i % plane) / out.width), x = int(i % out.width);
        out(x, y, b) = 0.0;
    }
}

// Thread → point of the disk (grid-stride), blockIdx.y → image: out(x, y, image) = f̂ there.
__global__ void reconstruct_kernel(Geometry geo, std::int64_t P, bool custom, const Cplx<double>* set,
                                   std::size_t set_size, int K, const KintnerCoef* kintner, StridedView<double> out) {
    const int b = blockIdx.y, W = out.width, H = out.height;
    for (std::int64_t p = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; p < P;
         p += std::int64_t(gridDim.x) * blockDim.x) {
        const int2 a = geo.at[p];
        const int x = custom ? a.x : (a.x + W - 1) / 2, y = custom ? a.y : (H - 1 - a.y) / 2;
        out(x, y, b) = reconstruct_point(set + std::size_t(b) * set_size, K, kintner, geo.X[p], geo.Y[p], geo.t[p]);
    }
}

// Several small host arrays uploaded with one copy; each section 16-byte aligned.
class Blob {
public:
    template <typename T>
    std::size_t add(const std::vector<T>& v) {
        const std::size_t at = (bytes_.size() + 15) / 16 * 16;
        bytes_.resize(at + v.size() * sizeof(T));
        if (!v.empty()) std::memcpy(bytes_.data() + at, v.data(), v.size() * sizeof(T));
        return at;
    }
    DeviceBuffer upload(const Context& ctx) const {
        DeviceBuffer d(ctx, std::max<std::size_t>(bytes_.size(), 16));
        // From pageable memory the copy is staged before cudaMemcpyAsync returns, so the blob
        // may go away; no synchronisation needed.
        if (!bytes_.empty())
            CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(d.data(), bytes_.data(), bytes_.size(), cudaMemcpyHostToDevice,
                                               detail::stream_of(ctx)));
        return d;
    }

private:
    std::vector<std::byte> bytes_;
};

template <typename T>
const T* section(const DeviceBuffer& d, std::size_t at) {
    return reinterpret_cast<const T*>(static_cast<const std::byte*>(d.data()) + at);
}

// Blocks per image: one per kThreads·kPointsPerThread points, but more when there are few tasks
// (a single order or moment) so that one image still fills the GPU, keeping ≥ kMinPointsPerThread
// points per thread. It depends on the image and the request only, never on the batch size, so a
// batch gives each image exactly its single-image result.
int blocks_per_image(std::int64_t P, int tasks) {
    const auto up = [](std::int64_t a, std::int64_t b) { return (a + b - 1) / b; };
    const std::int64_t base = up(P, kThreads * kPointsPerThread);
    const std::int64_t fill = std::min(up(P, kThreads * kMinPointsPerThread), up(kFillBlocks, tasks));
    return int(std::clamp<std::int64_t>(std::max(base, fill), 1, kMaxBlocksPerImage));
}

int grid_for(std::int64_t work) {
    return int(std::clamp<std::int64_t>((work + 255) / 256, 1, 132 * 16));
}

struct DeviceGeometry {
    DeviceBuffer X, Y, t, at;
    Geometry view() {
        return {static_cast<double*>(X.data()), static_cast<double*>(Y.data()), static_cast<double*>(t.data()),
                static_cast<int2*>(at.data())};
    }
};

// Geometry of every point of L on the device; `blob`/`rows_at`/`offsets_at` locate L's rows.
DeviceGeometry make_geometry(const Context& ctx, const PointLayout& L, const DeviceBuffer& blob, std::size_t rows_at,
                             std::size_t offsets_at) {
    const std::int64_t P = L.points();
    const std::size_t n = std::size_t(std::max<std::int64_t>(P, 1));
    DeviceGeometry g{DeviceBuffer(ctx, n * 8), DeviceBuffer(ctx, n * 8), DeviceBuffer(ctx, n * 8),
                     DeviceBuffer(ctx, n * sizeof(int2))};
    if (P == 0) return g;
    const int grid = grid_for(P);
    geometry_kernel<<<grid, 256, 0, detail::stream_of(ctx)>>>(section<PointRow>(blob, rows_at),
                                                              section<std::int64_t>(blob, offsets_at),
                                                              int(L.rows.size()), P, L.custom, L.centred, L.cx, L.cy,
                                                              L.rho, g.view());
    CUBEKIT_CHECK_LAUNCH(ctx, "zernike geometry_kernel", dim3(grid), dim3(256));
    return g;
}

template <typename T, PlanKind Kind, bool Sym>
void launch_moments(const Context& ctx, dim3 grid, Geometry geo, const double* folded, std::int64_t P, Tables tab,
                    double* partial) {
    if constexpr (Kind == PlanKind::Chain) {
        // Two points per thread iteration measured best (four: more registers, fewer warps).
        chain_kernel<T, Sym, 2><<<grid, kThreads, 0, detail::stream_of(ctx)>>>(geo, folded, P, tab, partial);
        CUBEKIT_CHECK_LAUNCH(ctx, "zernike chain_kernel", grid, dim3(kThreads));
    } else {
        moments_kernel<T, Kind, Sym><<<grid, kThreads, 0, detail::stream_of(ctx)>>>(geo, folded, P, tab, partial);
        CUBEKIT_CHECK_LAUNCH(ctx, "zernike moments_kernel", grid, dim3(kThreads));
    }
}

template <typename T, bool Sym>
void launch_moments(const Context& ctx, PlanKind kind, dim3 grid, Geometry geo, const double* folded, std::int64_t P,
                    Tables tab, double* partial) {
    switch (kind) {
        case PlanKind::Chain: launch_moments<T, PlanKind::Chain, Sym>(ctx, grid, geo, folded, P, tab, partial); break;
        case PlanKind::Explicit: launch_moments<T, PlanKind::Explicit, Sym>(ctx, grid, geo, folded, P, tab, partial); break;
        case PlanKind::QRec: launch_moments<T, PlanKind::QRec, Sym>(ctx, grid, geo, folded, P, tab, partial); break;
    }
}

}  // namespace

// What moments_cuda builds on the host for one disk and one request: the point layout, the plan and
// the tables the kernels read, packed into one blob. ~0.1 ms for a 2048² disk and a set to order 34,
// paid before the first kernel could start; kept for the last few (disk, request) pairs, since callers
// repeat the same shape and request (a batch of tiles, a video, a benchmark).
struct Prepared {
    PointLayout L;
    Plan plan;
    Blob blob;
    std::size_t rows_at = 0, offsets_at = 0, slots_at = 0, count_at = 0, kin_at = 0, qrec_at = 0, beta_at = 0,
                boff_at = 0, where_at = 0, factor_at = 0;
};

std::shared_ptr<const Prepared> prepare(const ZernikeDisk& disk, const Request& request) {
    auto p = std::make_shared<Prepared>();
    p->L = point_layout(disk, request.symmetric);
    p->plan = make_plan(request);
    const Plan& plan = p->plan;
    const Coefficients co = coefficients(request.max_order(), plan.kind == PlanKind::Explicit,
                                         plan.kind == PlanKind::QRec);
    const int M = int(request.wanted.size());
    if (plan.tasks > kMaxGridY)
        throw InvalidInput("zernike: " + std::to_string(M) + " moments need " + std::to_string(plan.tasks) +
                           " blocks per image row of the CUDA grid (at most 65535); request fewer moments per call");
    std::vector<int2> where(std::size_t(M), make_int2(0, 0));  // moment → (task, slot)
    for (int t = 0; t < plan.tasks; ++t)
        for (int i = 0; i < plan.slot_count[std::size_t(t)]; ++i)
            where[std::size_t(plan.slots[std::size_t(t) * kMaxSlots + std::size_t(i)].out)] = make_int2(t, i);
    std::vector<double> factor(request.wanted.size());  // n + 1 of each moment
    for (int k = 0; k < M; ++k) factor[std::size_t(k)] = double(request.wanted[std::size_t(k)].n + 1);
    Blob& blob = p->blob;
    p->rows_at = blob.add(p->L.rows), p->offsets_at = blob.add(p->L.offsets);
    p->slots_at = blob.add(slot_infos(plan, co)), p->count_at = blob.add(plan.slot_count);
    p->kin_at = blob.add(co.kintner), p->qrec_at = blob.add(co.qrec);
    p->beta_at = blob.add(co.beta), p->boff_at = blob.add(co.beta_offset);
    p->where_at = blob.add(where), p->factor_at = blob.add(factor);
    return p;
}

// Everything prepare() reads, as bytes: equal keys give identical Prepared.
std::string prepare_key(const ZernikeDisk& disk, const Request& r) {
    std::string key;
    const auto put = [&key](const auto& v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); };
    put(disk.width), put(disk.height), put(disk.mapping), put(disk.center_x), put(disk.center_y), put(disk.radius);
    put(disk.symmetric), put(r.method), put(r.radial), put(r.precision), put(r.symmetric);
    for (const ZernikeIndex& i : r.wanted) put(i.n), put(i.m);
    return key;
}

std::shared_ptr<const Prepared> prepared(const ZernikeDisk& disk, const Request& request) {
    constexpr std::size_t kKept = 8;
    static std::mutex mutex;
    static std::vector<std::pair<std::string, std::shared_ptr<const Prepared>>> kept;  // most recent first
    const std::string key = prepare_key(disk, request);
    {
        const std::lock_guard<std::mutex> lock(mutex);
        const auto hit = std::find_if(kept.begin(), kept.end(), [&](const auto& e) { return e.first == key; });
        if (hit != kept.end()) {
            std::rotate(kept.begin(), hit, hit + 1);
            return kept.front().second;
        }
    }
    std::shared_ptr<const Prepared> p = prepare(disk, request);  // outside the lock: other threads go on
    const std::lock_guard<std::mutex> lock(mutex);
    kept.insert(kept.begin(), {key, p});
    if (kept.size() > kKept) kept.pop_back();
    return p;
}

void moments_cuda(const Context& ctx, const CubeView& images, const ZernikeDisk& disk, const Request& request,
                  const MutableCubeView& out) {
    CUBEKIT_CUDA_CHECK(cudaSetDevice(ctx.device()));
    const std::shared_ptr<const Prepared> prep = prepared(disk, request);
    const PointLayout& L = prep->L;
    const Plan& plan = prep->plan;
    const int M = int(request.wanted.size()), B = images.bands();
    const std::size_t rows_at = prep->rows_at, offsets_at = prep->offsets_at, slots_at = prep->slots_at,
                      count_at = prep->count_at, kin_at = prep->kin_at, qrec_at = prep->qrec_at,
                      beta_at = prep->beta_at, boff_at = prep->boff_at, where_at = prep->where_at,
                      factor_at = prep->factor_at;
    const DeviceBuffer d_blob = prep->blob.upload(ctx);
    const Tables tab{section<SlotInfo>(d_blob, slots_at), section<int>(d_blob, count_at),
                     section<KintnerCoef>(d_blob, kin_at), section<QRecCoef>(d_blob, qrec_at),
                     section<double>(d_blob, beta_at), section<std::int32_t>(d_blob, boff_at)};

    // disk.pixel_count ≥ 1 (zernike_disk rejects an empty disk), so every layout has a point.
    const std::int64_t P = L.points();
    const int per_point = L.symmetric ? 8 : 1;
    const int blocks = blocks_per_image(P, plan.tasks);
    // Images in chunks of at most ~512 MB of folded values (the result does not depend on it).
    const std::size_t np = std::size_t(std::max<std::int64_t>(P, 1));
    const std::size_t per_image = np * per_point * sizeof(double);
    const int chunk = int(std::clamp<std::size_t>((std::size_t(512) << 20) / per_image, 1, std::size_t(std::min(B, kMaxGridY))));
    // One scratch allocation: geometry (X, Y, t, at), folded values, block partials.
    const std::size_t geo_bytes = np * (3 * sizeof(double) + sizeof(int2));
    const std::size_t folded_bytes = per_image * std::size_t(chunk);
    const std::size_t partial_bytes = std::size_t(chunk) * plan.tasks * blocks * 2 * kMaxSlots * sizeof(double);
    detail::keep_pool_memory(ctx, geo_bytes + folded_bytes + partial_bytes + 1024);
    DeviceBuffer scratch(ctx, geo_bytes + folded_bytes + partial_bytes);
    double* base = static_cast<double*>(scratch.data());
    const Geometry geo{base, base + np, base + 2 * np, reinterpret_cast<int2*>(base + 3 * np)};
    double* folded = base + geo_bytes / sizeof(double);
    double* part = folded + folded_bytes / sizeof(double);
    for (int b0 = 0; b0 < B; b0 += chunk) {
        ctx.check_cancelled("zernike");
        const int n = std::min(chunk, B - b0);
        visit_dtype(images.dtype(), [&](auto tag) {
            using E = decltype(tag);
            const StridedView<const E> img = images.band_range(b0, n).typed<E>();
            const int grid = grid_for(P * n);
            auto fold = L.symmetric ? fold_kernel<E, true> : fold_kernel<E, false>;
            fold<<<grid, 256, 0, detail::stream_of(ctx)>>>(img, section<PointRow>(d_blob, rows_at),
                                                            section<std::int64_t>(d_blob, offsets_at),
                                                            int(L.rows.size()), L.custom, L.centred, L.cx, L.cy, L.rho,
                                                            P, n, folded, b0 == 0, geo);
            CUBEKIT_CHECK_LAUNCH(ctx, "zernike fold_kernel", dim3(grid), dim3(256));
        });
        const dim3 grid(unsigned(blocks), unsigned(plan.tasks), unsigned(n));
        if (request.precision == ZernikePrecision::Float) {
            if (L.symmetric) launch_moments<float, true>(ctx, plan.kind, grid, geo, folded, P, tab, part);
            else launch_moments<float, false>(ctx, plan.kind, grid, geo, folded, P, tab, part);
        } else {
            if (L.symmetric) launch_moments<double, true>(ctx, plan.kind, grid, geo, folded, P, tab, part);
            else launch_moments<double, false>(ctx, plan.kind, grid, geo, folded, P, tab, part);
        }
        const int total = n * M * 2, fgrid = int((std::int64_t(total) * 32 + 255) / 256);
        finalise_kernel<<<fgrid, 256, 0, detail::stream_of(ctx)>>>(
            part, section<int2>(d_blob, where_at), section<double>(d_blob, factor_at), disk.denominator, M, plan.tasks,
            blocks, n, out.window(0, b0, M, n).typed<double>());
        CUBEKIT_CHECK_LAUNCH(ctx, "zernike finalise_kernel", dim3(fgrid), dim3(256));
        ctx.progress(std::size_t(b0 + n), std::size_t(B));
    }
}

void reconstruct_cuda(const Context& ctx, const std::vector<std::complex<double>>& set, int images, int K,
                      const ZernikeDisk& disk, const MutableCubeView& out) {
    if (out.empty()) return;
    CUBEKIT_CUDA_CHECK(cudaSetDevice(ctx.device()));
    const PointLayout L = point_layout(disk, false);
    const Coefficients co = coefficients(K, false, false);
    Blob blob;
    const std::size_t rows_at = blob.add(L.rows), offsets_at = blob.add(L.offsets), kin_at = blob.add(co.kintner);
    const std::size_t set_at = blob.add(set);
    const DeviceBuffer d_blob = blob.upload(ctx);
    DeviceGeometry geo = make_geometry(ctx, L, d_blob, rows_at, offsets_at);
    const int zgrid = grid_for(std::int64_t(out.num_elements()));
    zero_kernel<<<zgrid, 256, 0, detail::stream_of(ctx)>>>(out.typed<double>());
    CUBEKIT_CHECK_LAUNCH(ctx, "zernike zero_kernel", dim3(zgrid), dim3(256));
    const std::int64_t P = L.points();
    const std::size_t size = zernike_set_size(K);
    for (int b0 = 0; b0 < images && P > 0; b0 += kMaxGridY) {  // grid y = image, at most 65535 per launch
        const int n = std::min(kMaxGridY, images - b0);
        const dim3 grid(unsigned(grid_for(P)), unsigned(n));
        reconstruct_kernel<<<grid, 256, 0, detail::stream_of(ctx)>>>(
            geo.view(), P, L.custom, section<Cplx<double>>(d_blob, set_at) + std::size_t(b0) * size, size, K,
            section<KintnerCoef>(d_blob, kin_at), out.band_range(b0, n).typed<double>());
        CUBEKIT_CHECK_LAUNCH(ctx, "zernike reconstruct_kernel", grid, dim3(256));
    }
}

}  // namespace cubekit::zernike
