#pragma once
// Backends of the connected-component labelling (labels.cpp validates and dispatches). The
// remove_small_components_* functions are also called directly by the edge detector on raw
// buffers of per-band edge maps.
#include <cstdint>

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

// ---- Full labelling (equal-value rule), host cube in, host result out ------------------------
// image: BSQ, integer element type, validated by the caller.
Components label_components_cpu(const Context& ctx, const Cube& image, int connectivity);
Components label_components_device(const Context& ctx, const Cube& image, int connectivity);

}  // namespace cubekit::detail
