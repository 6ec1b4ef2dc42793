#pragma once
// Backends of the connected-component labelling (labels.cpp validates and dispatches). The
// remove_small_components_* functions on raw planes are also called directly by the edge detector
// on its per-band edge maps.
#include <cstdint>
#include <vector>

#include "cubekit/labels.hpp"

namespace cubekit::detail {

/// Throws InvalidInput (naming `function`) unless connectivity is 4 or 8 and a width×height
/// plane fits a 32-bit pixel index (both backends index pixels within a plane with int32).
void check_label_geometry(const char* function, int width, int height, int planes, int connectivity);

// ---- Small-component removal on raw planes (binary rule) ------------------------------------
// `maps` holds `planes` planes of width×height u8 samples, BSQ, contiguous, and is changed in
// place. Foreground is any nonzero sample and, unlike the public remove_small_components (which
// joins only equal values), ANY two neighbouring nonzero samples join: the edge maps these are
// made for hold 0/1, and not comparing values is faster. Every pixel of a component of fewer
// than min_size pixels becomes 0; min_size ≤ 1 changes nothing. Each plane is independent.

/// CPU: OpenMP over planes (ctx.threads()). Throws InvalidInput for a bad connectivity or size.
void remove_small_components_cpu(const Context& ctx, std::uint8_t* maps, int width, int height, int planes,
                                 std::int64_t min_size, int connectivity);

/// CUDA: `maps` is device memory. All planes in one set of launches, stream-ordered on ctx's
/// stream, with no host synchronisation: the caller may time it with events. Scratch memory
/// (about 10 bytes per pixel) comes from the stream-ordered pool (cudaMallocAsync); the pool's
/// release threshold is raised so that repeated calls reuse it rather than re-map it.
/// Throws InvalidInput as the CPU version, DeviceError when ctx is not a CUDA context.
void remove_small_components_device(const Context& ctx, std::uint8_t* maps, int width, int height, int planes,
                                    std::int64_t min_size, int connectivity);

/// CUDA, the same with the binary rule or (equal_values) the public equal-value rule.
void remove_small_components_device(const Context& ctx, std::uint8_t* maps, int width, int height, int planes,
                                    std::int64_t min_size, int connectivity, bool equal_values);

// ---- Views (the public calls), validated by labels.cpp ---------------------------------------

/// CPU removal in place on a host u8 view of any strides. equal_values: the public rule (equal
/// neighbours join); else the binary rule above.
void remove_small_components_cpu(const Context& ctx, const MutableCubeView& maps, std::int64_t min_size,
                                 int connectivity, bool equal_values);

/// CPU labelling (equal-value rule). image: host view, integer type, any strides; labels: host
/// i32 view of the same size, any strides.
ComponentStats label_components_cpu(const Context& ctx, const CubeView& image, const MutableCubeView& labels,
                                    int connectivity);

/// True when the CUDA kernels read or write `view` where it is: a dense BSQ cube on the context's
/// device. (A window is converted once: a pitch in the kernels cost the removal ~5 %.)
bool labels_cuda_accepts(const Context& ctx, const CubeView& view);

/// CUDA labelling. image: a device view labels_cuda_accepts, integer type; labels: the same for an
/// i32 view. Returns the statistics (downloaded: the call waits for them); the labels are queued.
ComponentStats label_components_cuda(const Context& ctx, const CubeView& image, const MutableCubeView& labels,
                                     int connectivity);

/// CUDA removal: copies `mask` into `maps` (skipped when they are the same memory) while finding
/// whether the mask holds a single foreground value, reads that 8-byte answer, then removes in
/// place with the binary rule (one value) or the equal-value rule. mask: u8, a BSQ cube or a
/// window of one on the context's device; maps: u8, labels_cuda_accepts; min_size ≥ 2.
void remove_small_components_cuda(const Context& ctx, const CubeView& mask, const MutableCubeView& maps,
                                  std::int64_t min_size, int connectivity);

/// The cleaning step of remove_small_components_tiled: out(x, y, b) = mask(x, y, b) where
/// keep[offset[b] + labels(x, y, b)] is nonzero, else 0. CUDA: mask a u8 device view (any strides),
/// labels a dense BSQ i32 and out a dense BSQ u8 on the context's device; waits for the kernel.
void apply_keep_cuda(const Context& ctx, const CubeView& mask, const CubeView& labels, const std::vector<std::uint8_t>& keep,
                     const std::vector<std::int64_t>& offset, const MutableCubeView& out);

}  // namespace cubekit::detail
