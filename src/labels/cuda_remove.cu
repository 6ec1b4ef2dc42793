// Small-component removal on CUDA for the public call (remove_small_components_into): one pass
// over the mask copies it into the output (unless it is the output) and finds whether it holds a
// single foreground value; that 8-byte answer is the only read-back. One value: the binary rule
// (any two neighbouring nonzero samples join), the faster path the edge detector also uses; more:
// the equal-value rule. Both give the public rule's result (spec edges.md §3.7, labels.hpp).
// DRAM: the mask once (+ the copy written), then the removal's own traffic (cuda.cu).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/cuda_check.hpp"
#include "labels/labels_internal.hpp"

namespace cubekit::detail {
namespace {

constexpr int kThreads = 256;
constexpr int kBlocksPerSm = 8;
constexpr unsigned kAllLanes = 0xffffffffu;

// A thread's running answer over the nonzero samples v: the largest 255 − v (so the smallest v)
// and the largest v; 0 and 0 while it has seen none. Both are maxima, so the device words start
// at 0 and take atomicMax.
struct Seen {
    unsigned inverted_min = 0, max = 0;
    __device__ void note(unsigned v) {
        if (v == 0) return;
        inverted_min = ::max(inverted_min, 255u - v);
        max = ::max(max, v);
    }
    __device__ void note_word(unsigned w) {
#pragma unroll
        for (int s = 0; s < 32; s += 8) note((w >> s) & 0xffu);
    }
    // Whole warps only: every thread of the block calls it.
    __device__ void flush(unsigned* answer) {
        for (int o = 16; o > 0; o >>= 1) {
            inverted_min = ::max(inverted_min, __shfl_xor_sync(kAllLanes, inverted_min, o));
            max = ::max(max, __shfl_xor_sync(kAllLanes, max, o));
        }
        if ((threadIdx.x & 31) == 0 && max != 0) {
            atomicMax(answer, inverted_min);
            atomicMax(answer + 1, max);
        }
    }
};

// A dense mask of n bytes (and a dense destination, or none): grid-stride, 16-byte words when
// `vectors` (both 16-byte aligned), the tail byte by byte.
__global__ void __launch_bounds__(kThreads)
dense_mask_kernel(const std::uint8_t* __restrict__ src, std::uint8_t* __restrict__ dst, std::size_t n, bool vectors,
                  unsigned* __restrict__ answer) {
    Seen seen;
    const std::size_t tid = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x, stride = std::size_t(gridDim.x) * blockDim.x;
    const std::size_t words = vectors ? n / 16 : 0;
    for (std::size_t i = tid; i < words; i += stride) {
        const uint4 w = reinterpret_cast<const uint4*>(src)[i];
        if (dst) reinterpret_cast<uint4*>(dst)[i] = w;
        seen.note_word(w.x), seen.note_word(w.y), seen.note_word(w.z), seen.note_word(w.w);
    }
    for (std::size_t i = words * 16 + tid; i < n; i += stride) {
        const std::uint8_t v = src[i];
        if (dst) dst[i] = v;
        seen.note(v);
    }
    seen.flush(answer);
}

// A window of a BSQ mask (and destination, or none): a block per row (grid-stride over the
// planes·H rows), the threads along it.
__global__ void __launch_bounds__(kThreads)
rows_mask_kernel(const std::uint8_t* __restrict__ src, std::int64_t src_row, std::int64_t src_plane,
                 std::uint8_t* __restrict__ dst, std::int64_t dst_row, std::int64_t dst_plane, int W, int H,
                 std::int64_t rows, unsigned* __restrict__ answer) {
    Seen seen;
    for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const std::int64_t p = r / H, y = r % H;
        const std::uint8_t* s = src + p * src_plane + y * src_row;
        std::uint8_t* d = dst ? dst + p * dst_plane + y * dst_row : nullptr;
        for (int x = int(threadIdx.x); x < W; x += kThreads) {
            const std::uint8_t v = s[x];
            if (d) d[x] = v;
            seen.note(v);
        }
    }
    seen.flush(answer);
}

unsigned blocks_for(const Context& ctx, std::size_t work_items) {
    int sms = 0;
    CUBEKIT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx.device()));
    const std::size_t cap = std::size_t(std::max(sms, 1)) * kBlocksPerSm;
    return unsigned(std::max<std::size_t>(1, std::min(work_items, cap)));
}

bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15) == 0; }

}  // namespace

void remove_small_components_cuda(const Context& ctx, const CubeView& mask, const MutableCubeView& maps,
                                  std::int64_t min_size, int connectivity) {
    if (!mask.on_device() || mask.device() != ctx.device() || !mask.is_pitched(Layout::BSQ) || !labels_cuda_accepts(ctx, maps))
        throw InvalidInput("remove_small_components: the device path wants a BSQ mask (or a window of one) and dense BSQ "
                           "maps on the context's device");
    CUBEKIT_CUDA_CHECK(cudaSetDevice(ctx.device()));
    const cudaStream_t stream = stream_of(ctx);
    const int W = mask.width(), H = mask.height(), B = mask.bands();
    const auto* src = reinterpret_cast<const std::uint8_t*>(mask.data());
    auto* out = reinterpret_cast<std::uint8_t*>(maps.data());
    std::uint8_t* dst = src == out ? nullptr : out;  // nullptr: in place

    DeviceBuffer d_answer(ctx, 2 * sizeof(unsigned));
    CUBEKIT_CUDA_CHECK(cudaMemsetAsync(d_answer.data(), 0, 2 * sizeof(unsigned), stream));
    auto* answer = static_cast<unsigned*>(d_answer.data());
    if (mask.is_dense(Layout::BSQ) && (!dst || maps.is_dense(Layout::BSQ))) {
        const std::size_t n = mask.num_elements();
        const bool vectors = aligned16(src) && (!dst || aligned16(dst));
        const dim3 grid(blocks_for(ctx, (vectors ? n / 16 : n) / kThreads + 1)), block(kThreads);
        dense_mask_kernel<<<grid, block, 0, stream>>>(src, dst, n, vectors, answer);
        CUBEKIT_CHECK_LAUNCH(ctx, "dense_mask_kernel", grid, block);
    } else {
        const std::int64_t rows = std::int64_t(H) * B;
        const dim3 grid(blocks_for(ctx, std::size_t(rows))), block(kThreads);
        rows_mask_kernel<<<grid, block, 0, stream>>>(src, mask.strides().y, mask.strides().b, dst, maps.strides().y,
                                                     maps.strides().b, W, H, rows, answer);
        CUBEKIT_CHECK_LAUNCH(ctx, "rows_mask_kernel", grid, block);
    }
    unsigned seen[2] = {0, 0};
    d_answer.download(ctx, seen, sizeof seen);  // waits: the rule is chosen on the host
    const bool one_value = seen[1] == 0 || 255u - seen[0] == seen[1];
    remove_small_components_device(ctx, out, W, H, B, min_size, connectivity, !one_value);
}

}  // namespace cubekit::detail
