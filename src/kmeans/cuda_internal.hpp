#pragma once
// Host entry points shared by the CUDA k-means translation units: the engine (cuda.cu) calls the
// device selections of prepare_cuda.cu and kmeanspp_cuda.cu. Device arrays in, k- and m-sized
// results out; every function queues its work on the context's stream.
#include <cstdint>
#include <vector>

#include "kmeans/kmeans_internal.hpp"

namespace cubekit::detail {

/// The pixels of an init sample on the device, by raster index.
struct DeviceSample {
    DeviceBuffer owned;                    ///< the compacted subsample, when one is drawn
    const std::int64_t* raster = nullptr;  ///< raster index of sample position s; nullptr: s itself
    std::int64_t size = 0;
};

/// The init sample of one restart (spec §3.4), drawn on the device exactly as
/// init_sample_pixels() draws it on the host: every valid pixel when sampling is off or the
/// sample is smaller than k (then `raster` is the valid set's index).
DeviceSample init_sample_cuda(const Context& ctx, const DeviceValidSet& valid, const KmeansOptions& options,
                              std::uint64_t seed);

// ---- a tile of a scene run in tiles (the CUDA KmeansTile of cuda.cu) ----
/// The valid set of a dense BIP image on the device: `mask` (W×H, or empty) and no NaN band.
DeviceValidSet valid_set_cuda(const Context& ctx, const CubeView& image, const std::vector<std::uint8_t>& mask);
/// Per-band min and max of the valid pixels (as band_range on the host).
KmeansStats band_range_cuda(const Context& ctx, const CubeView& image, const DeviceValidSet& valid);
/// The exact per-band Σq and Σq² of the valid pixels (as band_moments on the host).
BandMoments band_moments_cuda(const Context& ctx, const CubeView& image, const DeviceValidSet& valid, double scale);
/// Valid pixels per row of a width × height image.
std::vector<std::int64_t> row_valid_cuda(const Context& ctx, const DeviceValidSet& valid, int width, int height);
/// The tile's pixels of the scene's init sample (every valid pixel when `all`), keyed by scene rank:
/// row r's first valid pixel is valid index row_start[r] and has rank first_rank[r].
TilePixels sample_cuda(const Context& ctx, const CubeView& image, const DeviceValidSet& valid, std::uint64_t seed,
                       double rate, bool all, const std::vector<std::int64_t>& first_rank,
                       const std::vector<std::int64_t>& row_start);

/// The values (count × m, as doubles: exact for every element type) of the pixels at these
/// positions of a sample whose raster indices are `d_raster` (nullptr: position = raster index)
/// in `image` (dense BIP on the context's device). Positions on the device or on the host.
std::vector<double> gather_pixels_cuda(const Context& ctx, const CubeView& image, const std::int64_t* d_raster,
                                       const std::int64_t* d_positions, std::int64_t count);
std::vector<double> gather_pixels_cuda(const Context& ctx, const CubeView& image, const std::int64_t* d_raster,
                                       const std::vector<std::int64_t>& positions);

/// Greedy k-means++ (spec §3.4) on the device, every weight, prefix sum, candidate and choice
/// computed there with the CPU reference's exact integers: returns the values of the chosen
/// centres (t × m, t ≤ k; t < k when the sample holds only t distinct vectors).
std::vector<double> kmeanspp_cuda(const Context& ctx, const CubeView& image, const DeviceSample& sample,
                                  const KmeansPlan& plan, std::uint64_t seed);

/// The relocation's choice (spec §3.7): of n pixels whose distances to their nearest centroid are
/// `d_distance` (f32, or f64 when `type` is F64), the `wanted` farthest (ties: lower index),
/// without zero distances — farthest() of them, ranked on the device.
std::vector<FarPixel> farthest_cuda(const Context& ctx, const void* d_distance, DType type, std::int64_t n,
                                    std::size_t wanted);

}  // namespace cubekit::detail
