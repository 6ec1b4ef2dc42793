#include "auto_backend.hpp"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <system_error>

#include "cubekit/dtype.hpp"
#include "cubekit/io.hpp"

namespace cubekit::cli {

namespace {

// CPU cost per unit of work on one thread, in ns: the CPU step of bench/cli_wall.py at 16 threads on
// the GPU machine (bench/results/2026-11-26-h100.md; commit a70e9ac, edges and rcmg 246ae07) × 16 / units.
constexpr double kEdgesNsPerSample = 2.60;       // edges 13.0 ms, 1096×715×102 u8
constexpr double kRcmgNsPerSample = 11.0;        // rcmg 14.7 ms, 610×340×103 f32, 8-conn f64
constexpr double kKmeansNsPerSampleK = 80.6;     // cluster 971 ms, 610×340×103 f32, k = 9 (quantize: 170)
constexpr double kPcaNsPerSampleBand = 0.97;     // pca 133.8 ms, 610×340×103 f32
constexpr double kZernikeNsPerSampleMoment = 0.84;      // zernike 26.7 ms, 2048² u8, n ≤ 20 (121 moments)
constexpr double kReconstructNsPerPixelMoment = 3.3;    // zernike-reconstruct 106.5 ms, 2048², 121 moments
// Detection: first guesses (to be measured on the H100 machine like the ones above).
constexpr double kRbfnNsPerSampleNeuron = 1.0;   // the CPU loop of pixel_cpu.cpp, ~2 flops + expf share
constexpr double kMultiresNsPerSample = 1.0;     // block sums: one f64 add pair per sample
constexpr double kBaselineNsPerSample = 385;     // edges-baseline (canny) 200.5 ms, 3840×2160 one band (29e0f72)
// Watershed, segment, classify (bench/results/2026-11-26-h100.md, "Watershed, segmentation and classification").
// The CPU reference of the watershed is sequential (breadth-first search, union-find, descent:
// src/watershed/cpu.cpp), so its time is cpu_serial_ms whatever the threads: 0.8-1.2 s on one thread at
// 2440×2040 (5.0 Mpixel; ~1.1 s typical: 220 ns a pixel), 25-61 ms at 610×340; the loaded 2-core development
// machine gave 185-280 ns. The GPU's own time is left out, as for the other families, being far below
// kCudaProcessMs: on the H100 the watershed of the 2440×2040 u8 relief takes 0.88 ms device-resident and 6-9 ms
// from a host relief to host labels; segment of 610×340×103 0.37 ms on the device, 3.44 ms host to host. So the
// CPU keeps a watershed of up to ~1.3 Mpixel (295 ms / 220 ns), whatever its thread count, and segment adds the
// RCMG's share.
constexpr double kWatershedNsPerPixel = 220;
// SVM prediction (cubekit's f64 twin of LIBSVM's RBF decision values, pixel rows over the threads): 219 ms at
// 16 threads for Salinas-A tiled to 610×340×204 with 56 support vectors, i.e. 1.48 ns per sample and support
// vector on one thread (one thread of the development machine: 0.81 ns, Salinas-A 86×83×204, 56 and 79 SVs).
// The GPU's: 3.64 ms device-resident, 9.40 ms host to host.
constexpr double kSvmNsPerSampleSv = 1.48;
// The region vote, counted as sequential (grouping the pixels by region is): 36.5 ms for 610×340 pixels in
// 14 733 regions on one thread of the development machine (not measured on the GPU machine).
constexpr double kVoteNsPerPixel = 175;

double samples(const CubeShape& s) { return double(s.width) * double(s.height) * double(s.bands); }
double sample_bytes(const CubeShape& s) { return samples(s) * double(dtype_size(s.dtype)); }
double pixels(const CubeShape& s) { return double(s.width) * double(s.height); }

std::string fmt(const char* format, double a, double b) {
    char line[160];
    std::snprintf(line, sizeof line, format, a, b);
    return line;
}

}  // namespace

nlohmann::json BackendChoice::json() const {
    return {{"rule", "auto"}, {"picked", backend == Backend::Cuda ? "cuda" : "cpu"},
            {"cpu_estimate_ms", cpu_ms}, {"gpu_estimate_ms", gpu_ms}, {"reason", reason}};
}

WorkEstimate operator+(const WorkEstimate& a, const WorkEstimate& b) {
    return {.cpu_thread_ms = a.cpu_thread_ms + b.cpu_thread_ms, .bytes_moved = a.bytes_moved + b.bytes_moved,
            .cpu_serial_ms = a.cpu_serial_ms + b.cpu_serial_ms};
}

BackendChoice choose_backend(const WorkEstimate& work, int threads) {
    BackendChoice c;
    c.cpu_ms = work.cpu_thread_ms / double(threads > 0 ? threads : 1) + work.cpu_serial_ms;
    c.gpu_ms = kCudaProcessMs + work.bytes_moved / kPageableBytesPerMs;
    c.backend = c.cpu_ms > c.gpu_ms ? Backend::Cuda : Backend::Cpu;
    c.reason = c.backend == Backend::Cuda
                   ? fmt("the CPU estimate (%.0f ms) exceeds a CUDA process's start, copies and exit (%.0f ms)", c.cpu_ms, c.gpu_ms)
                   : fmt("the CPU estimate (%.0f ms) is below a CUDA process's start, copies and exit (%.0f ms)", c.cpu_ms, c.gpu_ms);
    return c;
}

WorkEstimate estimate_edges(const CubeShape& s) {
    return {samples(s) * kEdgesNsPerSample * 1e-6, sample_bytes(s) + pixels(s)};
}

WorkEstimate estimate_edge_baseline(const CubeShape& s) {
    return {samples(s) * kBaselineNsPerSample * 1e-6, sample_bytes(s) + samples(s)};
}

WorkEstimate estimate_rcmg(const CubeShape& s) {
    return {samples(s) * kRcmgNsPerSample * 1e-6, sample_bytes(s) + 4 * pixels(s)};
}

WorkEstimate estimate_kmeans(const CubeShape& s, int k) {
    return {samples(s) * double(k) * kKmeansNsPerSampleK * 1e-6, sample_bytes(s) + 4 * pixels(s)};
}

WorkEstimate estimate_pca(const CubeShape& s) {
    return {samples(s) * double(s.bands) * kPcaNsPerSampleBand * 1e-6, sample_bytes(s) + 8 * samples(s)};
}

WorkEstimate estimate_detect_rbfn(const CubeShape& s, std::int64_t neurons) {
    return {samples(s) * double(neurons) * kRbfnNsPerSampleNeuron * 1e-6, sample_bytes(s) + 4 * samples(s) / s.bands};
}

WorkEstimate estimate_detect_multires(const CubeShape& s) {
    return {samples(s) * kMultiresNsPerSample * 1e-6, sample_bytes(s)};
}

WorkEstimate estimate_watershed(const CubeShape& s) {  // the relief up, i32 labels down
    return {.bytes_moved = sample_bytes(s) + 4 * samples(s), .cpu_serial_ms = samples(s) * kWatershedNsPerPixel * 1e-6};
}

WorkEstimate estimate_segment(const CubeShape& s) {  // the cube up; the f32 gradient and the labels down
    return {.cpu_thread_ms = estimate_rcmg(s).cpu_thread_ms, .bytes_moved = sample_bytes(s) + 8 * pixels(s),
            .cpu_serial_ms = pixels(s) * kWatershedNsPerPixel * 1e-6};
}

WorkEstimate estimate_classify(const CubeShape& s, std::int64_t support_vectors, bool segment) {
    WorkEstimate w;
    if (support_vectors > 0)  // the cube up, the classes down
        w = {.cpu_thread_ms = samples(s) * double(support_vectors) * kSvmNsPerSampleSv * 1e-6,
             .bytes_moved = sample_bytes(s) + 4 * pixels(s)};
    if (!segment) return w;
    // RCMG (the cube up, the gradient down), the watershed of the f32 gradient, the vote (the regions and the
    // pixel-wise map up, the classes down): three calls, each from host memory.
    const WorkEstimate vote{.bytes_moved = 12 * pixels(s), .cpu_serial_ms = pixels(s) * kVoteNsPerPixel * 1e-6};
    return w + estimate_rcmg(s) + estimate_watershed({.width = s.width, .height = s.height, .bands = 1, .dtype = DType::F32}) +
           vote;
}

WorkEstimate estimate_zernike(const CubeShape& s, std::int64_t moments) {
    return {samples(s) * double(moments) * kZernikeNsPerSampleMoment * 1e-6, sample_bytes(s)};
}

WorkEstimate estimate_zernike_reconstruct(std::int64_t pixel_count, std::int64_t moments) {
    return {double(pixel_count) * double(moments) * kReconstructNsPerPixelMoment * 1e-6, 8.0 * double(pixel_count)};
}

/// A PNG's samples from its IHDR (the 8 signature bytes, then the IHDR chunk: width, height, bit depth,
/// colour type); 0 when the file is no PNG. A palette counts as one sample per pixel (a lower bound).
std::uint64_t png_samples(const std::filesystem::path& path) {
    unsigned char h[26] = {};
    std::ifstream in(path, std::ios::binary);
    if (!in.read(reinterpret_cast<char*>(h), sizeof h)) return 0;
    static const unsigned char signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (std::memcmp(h, signature, 8) != 0 || std::memcmp(h + 12, "IHDR", 4) != 0) return 0;
    const auto be32 = [](const unsigned char* p) { return std::uint64_t(p[0]) << 24 | p[1] << 16 | p[2] << 8 | p[3]; };
    const int channels[7] = {1, 0, 3, 1, 2, 0, 4};  // by colour type 0, 2, 3 (palette), 4, 6
    return be32(h + 16) * be32(h + 20) * std::uint64_t(h[25] < 7 ? channels[h[25]] : 0);
}

CubeShape shape_lower_bound(const std::filesystem::path& path) {
    std::error_code ec;
    const std::uintmax_t bytes = std::filesystem::file_size(path, ec);
    if (ec) return {};
    if (const std::uint64_t n = png_samples(path); n > 0)  // exact, from the header
        return CubeShape{.width = int(std::min<std::uint64_t>(n, 1u << 30)), .height = 1, .bands = 1,
                         .dtype = DType::U8, .layout = Layout::BSQ};
    FileFormat format = FileFormat::Auto;
    try {
        format = detect_format(path);
    } catch (const std::exception&) {
        return {};
    }
    const std::uintmax_t per_sample = format == FileFormat::Jpeg ? 1 : (format == FileFormat::Png || format == FileFormat::Pnm) ? 2 : 8;
    return CubeShape{.width = int(std::min<std::uintmax_t>(bytes / per_sample, 1u << 30)), .height = 1, .bands = 1,
                     .dtype = DType::U8, .layout = Layout::BSQ};
}

}  // namespace cubekit::cli
