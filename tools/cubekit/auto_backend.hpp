#pragma once
// What `--backend auto` (the default) runs on, for one CLI process.
//
// The rule: auto takes the GPU only when the CPU would take longer than the GPU process's fixed cost plus
// its copies:  cpu_ms > kCudaProcessMs + bytes_moved / kPageableBytesPerMs, where
//   cpu_ms      = the family's CPU work (units × ns per unit per thread, measured) / the CPU threads, plus its
//               sequential work (the watershed reference), which no thread count shortens;
//   kCudaProcessMs = what any CUDA process pays on the GPU machine and a CPU run does not: cuInit ~95 ms,
//               the primary context ~93 ms, the driver's teardown at exit 82-110 ms, the first use of our
//               kernels and memory pool ~15 ms (bench/cuda_startup_probe.py, bench/results/2026-11-26-h100.md);
//   bytes_moved = the input up and the outputs down, at the pageable rate (15 GB/s measured).
// No CUDA call is made to decide: when the estimate says CPU, CUDA is never initialised. When it says GPU
// and there is no usable device, auto runs on the CPU (as it always has). --backend cpu/cuda and --device
// bypass the rule. The estimates are deliberately simple (linear in the work, perfect thread scaling);
// their per-family constants were measured at 16 threads on the GPU machine's Xeon (see the .cpp).
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>

#include "cubekit/context.hpp"
#include "cubekit/cube.hpp"

namespace cubekit::cli {

/// Fixed cost of a CUDA process on the GPU machine (see above), milliseconds.
inline constexpr double kCudaProcessMs = 295;
/// Pageable host<->device copy rate, bytes per millisecond (15 GB/s).
inline constexpr double kPageableBytesPerMs = 15e6;

/// The work of one command, as auto's rule sees it.
struct WorkEstimate {
    double cpu_thread_ms = 0;      ///< CPU time on one thread of the work the threads share
    double bytes_moved = 0;        ///< host<->device bytes a GPU run copies
    double cpu_serial_ms = 0;      ///< CPU time of sequential work: the same on any thread count
};

/// The work of two steps of one command, one after the other.
WorkEstimate operator+(const WorkEstimate& a, const WorkEstimate& b);

/// auto's decision and the numbers behind it (the --json summary's "backend_choice").
struct BackendChoice {
    Backend backend = Backend::Cpu;  ///< what the rule picked (Cuda means: CUDA if a device is usable)
    double cpu_ms = 0, gpu_ms = 0;   ///< the two estimates compared
    std::string reason;
    nlohmann::json json() const;
};

/// The rule above, for `threads` CPU threads (> 0).
BackendChoice choose_backend(const WorkEstimate& work, int threads);

/// Per-family estimates (shape = the input as read, after --bands).
WorkEstimate estimate_edges(const CubeShape& shape);
WorkEstimate estimate_edge_baseline(const CubeShape& shape);
WorkEstimate estimate_rcmg(const CubeShape& shape);
/// k-means with k clusters (quantize, cluster).
WorkEstimate estimate_kmeans(const CubeShape& shape, int k);
WorkEstimate estimate_pca(const CubeShape& shape);
/// Target detection: an RBF network of `neurons` Gaussian neurons over every pixel; the multi-resolution block sums.
WorkEstimate estimate_detect_rbfn(const CubeShape& shape, std::int64_t neurons);
WorkEstimate estimate_detect_multires(const CubeShape& shape);
/// Watershed of a relief of this shape (every band a z-slice of a volume): the CPU reference is sequential.
WorkEstimate estimate_watershed(const CubeShape& relief);
/// segment: the RCMG of the cube, then the watershed of its one-band gradient (kept on the device).
WorkEstimate estimate_segment(const CubeShape& cube);
/// classify: the SVM prediction of a model with `support_vectors` support vectors (0: no SVM, or the class
/// means of sam and mindist, which run on the CPU on any backend), and with `segment` RCMG -> watershed and
/// the region vote. Training is CPU work on any backend and not counted.
WorkEstimate estimate_classify(const CubeShape& cube, std::int64_t support_vectors, bool segment);
/// Zernike moments: `moments` moments of every band (image) of the shape.
WorkEstimate estimate_zernike(const CubeShape& shape, std::int64_t moments);
/// Reconstruction of a width×height image from `moments` moments.
WorkEstimate estimate_zernike_reconstruct(std::int64_t pixels, std::int64_t moments);

/// Before the read: a one-band shape with no more samples than the file at `path` holds (a PNG's from
/// its header, exactly; else the file size over the most bytes a sample can take in its format: 1 for
/// JPEG, 2 for PNM, 8 for the others; compressed data only expands). When even this lower bound picks the GPU, the CUDA context is made
/// while the file is read; otherwise the file is read first and the rule applied to its real shape.
/// A path that cannot be examined gives an empty shape (the read reports the error).
CubeShape shape_lower_bound(const std::filesystem::path& path);

}  // namespace cubekit::cli
