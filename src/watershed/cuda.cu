// The watershed's CUDA driver: the relief preparation chain (levels, h-minima, imposition), the
// rounds of the relaxations, and the phases of cuda_kernels.cuh, all queued on the context's
// stream. Host reads: one 4-byte flag per batch of rounds, and R plus the NaN check at the end.
#include <cub/device/device_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/cuda_check.hpp"
#include "cubekit/buffer.hpp"
#include "cubekit/error.hpp"
#include "watershed/cuda_kernels.cuh"

namespace cubekit::detail {
namespace {

using namespace watershed_gpu;

constexpr int kBlock = 256;

unsigned blocks_for(std::int64_t n) { return unsigned((n + kBlock - 1) / kBlock); }

double double_of_key_host(unsigned long long k) {
    const unsigned long long u = (k >> 63) ? (k & ~(1ull << 63)) : ~k;
    double v;
    std::memcpy(&v, &u, 8);
    return v;
}

// A small read-back through the pinned staging buffer (a pageable copy if it is refused).
void read_back(const Context& ctx, const void* device, void* host, std::size_t bytes) {
    if (read_small(ctx, device, host, bytes)) return;
    CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_of(ctx)));
    CUBEKIT_CUDA_CHECK(cudaStreamSynchronize(stream_of(ctx)));
}

Steps make_steps(int connectivity) {
    const std::vector<Step> list = watershed_steps(connectivity);
    Steps s;
    s.n = int(list.size());
    for (int k = 0; k < s.n; ++k) {
        s.dz[k] = static_cast<signed char>(list[std::size_t(k)].dz);
        s.dy[k] = static_cast<signed char>(list[std::size_t(k)].dy);
        s.dx[k] = static_cast<signed char>(list[std::size_t(k)].dx);
    }
    return s;
}

template <class T>
T* as(DeviceBuffer& b) {
    return static_cast<T*>(b.data());
}

// Runs a monotone relaxation to its fixed point: rounds in growing batches (1, 2, 4, … 64), each
// batch's flag slots cleared first, one read of the last round's flag per batch.
template <class Rule>
void relax(const Context& ctx, const Geometry& g, const typename Rule::A* aux, typename Rule::V* v,
           WatershedSchedule schedule, DeviceBuffer& flags) {
    cudaStream_t stream = stream_of(ctx);
    int* f = as<int>(flags);
    const bool tiles = g.depth == 1 && schedule != WatershedSchedule::Synchronous;
    const bool sync_tiles = g.depth == 1 && schedule == WatershedSchedule::Synchronous;
    const dim3 tile_grid((g.width + kTileX - 1) / kTileX, (g.height + kTileY - 1) / kTileY);
    const dim3 tile_block(kTileX, kThreadsY);
    int round = 0, batch = 1;
    while (true) {
        for (int i = 0; i < batch; ++i)
            CUBEKIT_CUDA_CHECK(cudaMemsetAsync(f + slot(round + i), 0, sizeof(int), stream));
        for (int i = 0; i < batch; ++i, ++round) {
            if (tiles) {
                relax_tiles<Rule, true><<<tile_grid, tile_block, 0, stream>>>(g, aux, v, f, round);
                CUBEKIT_CHECK_LAUNCH(ctx, "watershed relax_tiles", tile_grid, tile_block);
            } else if (sync_tiles) {
                relax_tiles<Rule, false><<<tile_grid, tile_block, 0, stream>>>(g, aux, v, f, round);
                CUBEKIT_CHECK_LAUNCH(ctx, "watershed relax_tiles (sync)", tile_grid, tile_block);
            } else {
                const unsigned blocks = std::min<unsigned>(blocks_for(g.width * std::int64_t(g.height) * g.depth), 65535u * 8u);
                relax_global<Rule><<<blocks, kBlock, 0, stream>>>(g, aux, v, f, round);
                CUBEKIT_CHECK_LAUNCH(ctx, "watershed relax_global", dim3(blocks), dim3(kBlock));
            }
        }
        int last = 0;
        read_back(ctx, f + slot(round - 1), &last, sizeof(int));
        if (last == 0) return;
        ctx.check_cancelled("watershed");
        batch = std::min(batch * 2, 64);
    }
}

// Distinct marker labels > 0 inside the mask (R with markers).
__global__ void seed_values(Geometry g, const std::int32_t* markers, std::int32_t* out) {
    const std::int64_t p = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (p < g.size()) out[p] = (g.in(p) && markers[p] > 0) ? markers[p] : 0;
}

std::int64_t count_marker_labels(const Context& ctx, const Geometry& g, const std::int32_t* markers) {
    // Sorted, then the distinct runs counted, all with CUB over DeviceBuffers (thrust would allocate
    // its temporary storage outside them, escaping OutOfMemory and the allocation tests).
    const std::int64_t n = std::int64_t(g.width) * g.height * g.depth;
    cudaStream_t stream = stream_of(ctx);
    DeviceBuffer values(ctx, std::size_t(n) * sizeof(std::int32_t)), sorted(ctx, std::size_t(n) * sizeof(std::int32_t));
    seed_values<<<blocks_for(n), kBlock, 0, stream>>>(g, markers, as<std::int32_t>(values));
    CUBEKIT_CHECK_LAUNCH(ctx, "watershed seed_values", dim3(blocks_for(n)), dim3(kBlock));
    std::size_t sort_bytes = 0, unique_bytes = 0;
    CUBEKIT_CUDA_CHECK(cub::DeviceRadixSort::SortKeys(nullptr, sort_bytes, as<std::int32_t>(values), as<std::int32_t>(sorted),
                                                      n, 0, 32, stream));
    CUBEKIT_CUDA_CHECK(cub::DeviceSelect::Unique(nullptr, unique_bytes, as<std::int32_t>(sorted), as<std::int32_t>(values),
                                                 static_cast<std::int64_t*>(nullptr), n, stream));
    DeviceBuffer temp(ctx, std::max<std::size_t>({sort_bytes, unique_bytes, 1}));
    struct Tally {
        std::int64_t distinct;
        std::int32_t smallest, unused;
    };
    DeviceBuffer tally(ctx, sizeof(Tally));
    auto* on_device = static_cast<Tally*>(tally.data());
    CUBEKIT_CUDA_CHECK(cudaMemsetAsync(on_device, 0, sizeof(Tally), stream));  // all 16 bytes are read back
    CUBEKIT_CUDA_CHECK(cub::DeviceRadixSort::SortKeys(temp.data(), sort_bytes, as<std::int32_t>(values), as<std::int32_t>(sorted),
                                                      n, 0, 32, stream));
    CUBEKIT_CUDA_CHECK(cub::DeviceSelect::Unique(temp.data(), unique_bytes, as<std::int32_t>(sorted), as<std::int32_t>(values),
                                                 &on_device->distinct, n, stream));
    CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(&on_device->smallest, as<std::int32_t>(sorted), sizeof(std::int32_t),
                                       cudaMemcpyDeviceToDevice, stream));
    Tally got{};
    read_back(ctx, on_device, &got, sizeof got);
    return got.distinct - (got.smallest == 0 ? 1 : 0);
}

// Phases 1–5 on a prepared relief. Returns R (without markers), 0 with markers.
template <class T>
std::int64_t automaton(const Context& ctx, const Geometry& g, const T* h, const std::int32_t* markers,
                       std::int32_t* labels, WatershedSchedule schedule, DeviceBuffer& flags) {
    cudaStream_t stream = stream_of(ctx);
    const std::int64_t n = std::int64_t(g.width) * g.height * g.depth;
    const unsigned blocks = blocks_for(n);
    DeviceBuffer d(ctx, std::size_t(n) * 4), parent(ctx, std::size_t(n) * 4), is_root(ctx, std::size_t(n) * 4);
    init_distance<T><<<blocks, kBlock, 0, stream>>>(g, h, as<std::uint32_t>(d));
    CUBEKIT_CHECK_LAUNCH(ctx, "watershed init_distance", dim3(blocks), dim3(kBlock));
    relax<DistanceRule<T>>(ctx, g, h, as<std::uint32_t>(d), schedule, flags);
    arrows<T><<<blocks, kBlock, 0, stream>>>(g, h, as<std::uint32_t>(d), as<int>(parent));
    CUBEKIT_CHECK_LAUNCH(ctx, "watershed arrows", dim3(blocks), dim3(kBlock));
    if (!markers) {  // with markers each minimum cell keeps its own seed's label: no joining
        join_minima<<<blocks, kBlock, 0, stream>>>(g, as<std::uint32_t>(d), as<int>(parent));
        CUBEKIT_CHECK_LAUNCH(ctx, "watershed join_minima", dim3(blocks), dim3(kBlock));
    }
    int* root = as<int>(d);  // d is not read after the arrows
    flatten<<<blocks, kBlock, 0, stream>>>(g, as<int>(parent), root, as<int>(is_root));
    CUBEKIT_CHECK_LAUNCH(ctx, "watershed flatten", dim3(blocks), dim3(kBlock));
    if (markers) {
        number<<<blocks, kBlock, 0, stream>>>(g, root, nullptr, markers, labels);
        CUBEKIT_CHECK_LAUNCH(ctx, "watershed number", dim3(blocks), dim3(kBlock));
        return 0;
    }
    DeviceBuffer rank(ctx, std::size_t(n) * 4);
    std::size_t temp_bytes = 0;
    CUBEKIT_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, temp_bytes, as<int>(is_root), as<int>(rank), int(n), stream));
    DeviceBuffer temp(ctx, std::max<std::size_t>(temp_bytes, 1));
    CUBEKIT_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp.data(), temp_bytes, as<int>(is_root), as<int>(rank), int(n), stream));
    number<<<blocks, kBlock, 0, stream>>>(g, root, as<int>(rank), nullptr, labels);
    CUBEKIT_CHECK_LAUNCH(ctx, "watershed number", dim3(blocks), dim3(kBlock));
    int tail[2] = {0, 0};  // R = rank[n − 1] + is_root[n − 1], gathered for one read-back
    DeviceBuffer last(ctx, sizeof tail);
    CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(as<int>(last) + 0, as<int>(rank) + (n - 1), 4, cudaMemcpyDeviceToDevice, stream));
    CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(as<int>(last) + 1, as<int>(is_root) + (n - 1), 4, cudaMemcpyDeviceToDevice, stream));
    read_back(ctx, as<int>(last), tail, sizeof tail);
    return std::int64_t(tail[0]) + tail[1];
}

// The range keys of the relief and its first NaN inside the mask (refused). With `levels`, the range
// is read back and must be finite (the rule divides by hi − lo).
template <class T>
void check_relief(const Context& ctx, const Geometry& g, const T* h, DeviceBuffer& range, std::int64_t levels) {
    cudaStream_t stream = stream_of(ctx);
    const std::int64_t n = std::int64_t(g.width) * g.height * g.depth;
    struct Readback {
        unsigned long long lo_hi[2];
        int nan_first;
    } init{{~0ull, 0ull}, 0x7FFFFFFF};
    auto* lo_hi = as<unsigned long long>(range);
    int* nan_first = reinterpret_cast<int*>(lo_hi + 2);
    CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(lo_hi, &init, sizeof(init), cudaMemcpyHostToDevice, stream));
    const unsigned blocks = std::min(blocks_for(n), 132u * 8u);
    range_keys<T><<<blocks, kBlock, 0, stream>>>(g, h, lo_hi, nan_first);
    CUBEKIT_CHECK_LAUNCH(ctx, "watershed range_keys", dim3(blocks), dim3(kBlock));
    if (!std::is_floating_point_v<T>) return;  // integers: no NaN, a finite range
    Readback r = init;
    read_back(ctx, lo_hi, &r, sizeof(r));
    if (r.nan_first != init.nan_first) {
        const std::int64_t plane = std::int64_t(g.width) * g.height, first = r.nan_first;
        throw InvalidInput("watershed: the relief holds NaN (first at x " + std::to_string(first % g.width) + ", y " +
                           std::to_string((first % plane) / g.width) + ", band " + std::to_string(first / plane) +
                           "); heights must be comparable");
    }
    if (levels > 0 && r.lo_hi[0] <= r.lo_hi[1])
        check_levels_range(double_of_key_host(r.lo_hi[0]), double_of_key_host(r.lo_hi[1]), levels);
}

struct Pipeline {
    const Context& ctx;
    Geometry g;
    const std::int32_t* markers;
    std::int32_t* labels;
    WatershedOptions options;
    DeviceBuffer flags;

    std::int64_t n() const { return std::int64_t(g.width) * g.height * g.depth; }

    // Stage 0: levels, 1: h-minima, 2: imposition, then the automaton (as the CPU's relief.cpp).
    template <class T>
    std::int64_t run(const T* h, int stage) {
        cudaStream_t stream = stream_of(ctx);
        const unsigned blocks = blocks_for(n());
        if (stage == 0 && options.levels > 0) {
            DeviceBuffer range(ctx, 32), q(ctx, std::size_t(n()) * 4);
            check_relief<T>(ctx, g, h, range, options.levels);
            quantize<T><<<blocks, kBlock, 0, stream>>>(g, h, as<unsigned long long>(range),
                                                        double(options.levels - 1), as<std::uint32_t>(q));
            CUBEKIT_CHECK_LAUNCH(ctx, "watershed quantize", dim3(blocks), dim3(kBlock));
            return run(as<const std::uint32_t>(q), 1);
        }
        if (stage <= 1 && options.h_min > 0) {
            DeviceBuffer floor(ctx, std::size_t(n()) * 8), raised(ctx, std::size_t(n()) * 8);
            raise_heights<T><<<blocks, kBlock, 0, stream>>>(g, h, options.h_min, as<double>(floor), as<double>(raised));
            CUBEKIT_CHECK_LAUNCH(ctx, "watershed raise_heights", dim3(blocks), dim3(kBlock));
            relax<ErosionRule<double>>(ctx, g, as<const double>(floor), as<double>(raised), options.schedule, flags);
            return run(as<const double>(raised), 2);
        }
        if (stage <= 2 && markers) {
            DeviceBuffer floor(ctx, std::size_t(n()) * 8), relief(ctx, std::size_t(n()) * 8);
            impose_keys<T><<<blocks, kBlock, 0, stream>>>(g, h, markers, as<std::uint64_t>(floor), as<std::uint64_t>(relief));
            CUBEKIT_CHECK_LAUNCH(ctx, "watershed impose_keys", dim3(blocks), dim3(kBlock));
            relax<ErosionRule<std::uint64_t>>(ctx, g, as<const std::uint64_t>(floor), as<std::uint64_t>(relief),
                                              options.schedule, flags);
            automaton<std::uint64_t>(ctx, g, as<const std::uint64_t>(relief), markers, labels, options.schedule, flags);
            return count_marker_labels(ctx, g, markers);
        }
        return automaton<T>(ctx, g, h, markers, labels, options.schedule, flags);
    }
};

}  // namespace

std::int64_t watershed_cuda(const Context& ctx, const DeviceWatershed& w, const void* h, DType dtype,
                            const WatershedOptions& options) {
    const std::size_t n = std::size_t(w.grid.width) * std::size_t(w.grid.height) * std::size_t(w.grid.depth);
    keep_pool_memory(ctx, n * 32);  // the scratch of the deepest chain (imposition + automaton), kept across syncs
    Pipeline pipeline{ctx, {}, w.markers, w.labels, options, DeviceBuffer(ctx, kFlagSlots * sizeof(int))};
    pipeline.g = Geometry{w.grid.width, w.grid.height, w.grid.depth, w.grid.inside, make_steps(options.connectivity)};
    return visit_dtype(dtype, [&](auto tag) {
        using T = decltype(tag);
        if (std::is_floating_point_v<T> && options.levels == 0) {  // levels checks NaN itself
            DeviceBuffer range(ctx, 32);
            check_relief<T>(ctx, pipeline.g, static_cast<const T*>(h), range, 0);
        }
        return pipeline.run(static_cast<const T*>(h), 0);
    });
}

// One tile of watershed_tiled (watershed_internal.hpp): the CPU piece's steps on the device. Host
// reads: the ring's distances with the class count and the NaN check, then the class tables.
WatershedPiece watershed_piece_cuda(const Context& ctx, const TileFrame& f, const std::vector<std::uint32_t>& seeds,
                                    const void* h, DType dtype, const std::uint8_t* inside, int connectivity,
                                    std::int32_t* labels) {
    const std::int64_t n = std::int64_t(f.width) * f.height;
    const int ring_n = int(f.ring.size());
    keep_pool_memory(ctx, std::size_t(n) * 24);
    cudaStream_t stream = stream_of(ctx);
    const Geometry g{f.width, f.height, 1, inside, make_steps(connectivity)};
    const TileCore core{f.core_x0, f.core_y0, f.core_width, f.core_height};
    const unsigned blocks = blocks_for(n), ring_blocks = blocks_for(ring_n);
    DeviceBuffer flags(ctx, kFlagSlots * sizeof(int)), d(ctx, std::size_t(n) * 4), parent(ctx, std::size_t(n) * 4),
        root(ctx, std::size_t(n) * 4), flag(ctx, std::size_t(n) * 4), rank(ctx, std::size_t(n) * 4),
        ring(ctx, std::size_t(ring_n) * 8), tail(ctx, std::size_t(2 * ring_n + 2) * 4);
    std::vector<std::uint32_t> up(std::size_t(ring_n) * 2);
    std::memcpy(up.data(), f.ring.data(), std::size_t(ring_n) * 4);
    std::memcpy(up.data() + ring_n, seeds.data(), std::size_t(ring_n) * 4);
    ring.upload(ctx, up.data(), up.size() * 4);
    // Read back at once: the ring's distances, the class count, the first NaN, the ring's labels.
    auto* ring_d = as<std::uint32_t>(tail);
    int* count = reinterpret_cast<int*>(ring_d + ring_n);
    auto* ring_labels = reinterpret_cast<std::int32_t*>(count + 2);
    CUBEKIT_CUDA_CHECK(cudaMemsetAsync(count, 0x7F, 8, stream));  // no NaN: 0x7F7F7F7F, beyond any cell
    visit_dtype(dtype, [&](auto tag) {
        using T = decltype(tag);
        const T* ht = static_cast<const T*>(h);
        if constexpr (std::is_floating_point_v<T>) {
            first_nan_in_core<T><<<blocks, kBlock, 0, stream>>>(g, core, ht, count + 1);
            CUBEKIT_CHECK_LAUNCH(ctx, "watershed first_nan_in_core", dim3(blocks), dim3(kBlock));
        }
        init_distance<T><<<blocks, kBlock, 0, stream>>>(g, ht, as<std::uint32_t>(d));
        CUBEKIT_CHECK_LAUNCH(ctx, "watershed init_distance", dim3(blocks), dim3(kBlock));
        seed_ring<<<ring_blocks, kBlock, 0, stream>>>(g, as<int>(ring), as<std::uint32_t>(ring) + ring_n, ring_n,
                                                       as<std::uint32_t>(d));
        CUBEKIT_CHECK_LAUNCH(ctx, "watershed seed_ring", dim3(ring_blocks), dim3(kBlock));
        relax<DistanceRule<T>>(ctx, g, ht, as<std::uint32_t>(d), WatershedSchedule::Auto, flags);
        arrows<T><<<blocks, kBlock, 0, stream>>>(g, ht, as<std::uint32_t>(d), as<int>(parent));
        CUBEKIT_CHECK_LAUNCH(ctx, "watershed arrows", dim3(blocks), dim3(kBlock));
        gather_ring<T><<<ring_blocks, kBlock, 0, stream>>>(g, core, ht, as<int>(ring), ring_n, as<std::uint32_t>(d), ring_d);
        CUBEKIT_CHECK_LAUNCH(ctx, "watershed gather_ring", dim3(ring_blocks), dim3(kBlock));
    });
    halo_ends<<<blocks, kBlock, 0, stream>>>(g, core, as<int>(parent));
    CUBEKIT_CHECK_LAUNCH(ctx, "watershed halo_ends", dim3(blocks), dim3(kBlock));
    join_minima<<<blocks, kBlock, 0, stream>>>(g, as<std::uint32_t>(d), as<int>(parent));
    CUBEKIT_CHECK_LAUNCH(ctx, "watershed join_minima", dim3(blocks), dim3(kBlock));
    flatten<<<blocks, kBlock, 0, stream>>>(g, as<int>(parent), as<int>(root), as<int>(flag));
    CUBEKIT_CHECK_LAUNCH(ctx, "watershed flatten", dim3(blocks), dim3(kBlock));
    class_flags<<<blocks, kBlock, 0, stream>>>(g, core, as<int>(root), as<int>(flag));
    CUBEKIT_CHECK_LAUNCH(ctx, "watershed class_flags", dim3(blocks), dim3(kBlock));
    std::size_t scan_bytes = 0, select_bytes = 0;
    const thrust::counting_iterator<int> cells(0);
    int* class_cells = as<int>(d);  // d is not read after the ring's gather
    CUBEKIT_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, as<int>(flag), as<int>(rank), int(n), stream));
    CUBEKIT_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, select_bytes, cells, as<int>(flag), class_cells, count, int(n), stream));
    DeviceBuffer temp(ctx, std::max<std::size_t>({scan_bytes, select_bytes, 1}));
    CUBEKIT_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp.data(), scan_bytes, as<int>(flag), as<int>(rank), int(n), stream));
    CUBEKIT_CUDA_CHECK(cub::DeviceSelect::Flagged(temp.data(), select_bytes, cells, as<int>(flag), class_cells, count, int(n), stream));
    tile_labels<<<blocks, kBlock, 0, stream>>>(g, as<int>(root), as<int>(rank), labels);
    CUBEKIT_CHECK_LAUNCH(ctx, "watershed tile_labels", dim3(blocks), dim3(kBlock));
    gather_ring_labels<<<ring_blocks, kBlock, 0, stream>>>(as<int>(ring), ring_n, labels, ring_labels);
    CUBEKIT_CHECK_LAUNCH(ctx, "watershed gather_ring_labels", dim3(ring_blocks), dim3(kBlock));
    int* joined = as<int>(parent);
    class_table<<<blocks, kBlock, 0, stream>>>(class_cells, count, as<int>(root), as<int>(rank), joined);
    CUBEKIT_CHECK_LAUNCH(ctx, "watershed class_table", dim3(blocks), dim3(kBlock));

    WatershedPiece piece;
    std::vector<std::uint32_t> head(2 * std::size_t(ring_n) + 2);
    read_back(ctx, ring_d, head.data(), head.size() * 4);
    const int classes = int(head[std::size_t(ring_n)]), nan_first = int(head[std::size_t(ring_n) + 1]);
    if (nan_first != 0x7F7F7F7F) throw_nan_in_tile(f, nan_first);
    piece.ring_d.assign(head.begin(), head.begin() + ring_n);
    for (std::size_t r = 0; r < std::size_t(ring_n); ++r)
        piece.ring_labels.push_back(std::int32_t(head[std::size_t(ring_n) + 2 + r]));
    std::vector<int> local(static_cast<std::size_t>(classes));
    piece.class_joined.resize(std::size_t(classes));
    if (classes > 0) {
        CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(local.data(), class_cells, std::size_t(classes) * 4, cudaMemcpyDeviceToHost, stream));
        CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(piece.class_joined.data(), joined, std::size_t(classes) * 4, cudaMemcpyDeviceToHost,
                                           stream));
        CUBEKIT_CUDA_CHECK(cudaStreamSynchronize(stream));
    }
    piece.class_cells.reserve(local.size());
    for (int cell : local) piece.class_cells.push_back(f.scene_index(cell));
    return piece;
}

}  // namespace cubekit::detail
