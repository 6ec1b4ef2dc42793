// Zernike moments benchmark (spec zernike.md §3.9, §4.3–4.7, §5.7; issue: Zernike moments).
// Workloads, every input resident on the device (uploaded once), the public device-resident call
// (zernike_set_into / zernike_order_into / zernike_moment_into) timed: CUDA events around the
// whole call on the context's stream (validation, the host-side plan and coefficients inside the
// call, the kernels, the moments written into a device output), the median and minimum of kRuns
// runs after kWarmup.
//   (a) whole set n ≤ 34 of one 2048² f64 image, precision f64, Kintner, 8-fold symmetric and plain
//       (plus the same in f32 precision on an f32 image);
//   (b) the seed's workload: all repetitions A(n,*) of one order n ∈ {4, 8, …, 32, 34} on square
//       images of 64…2048 (spec §4.3, §4.6), Auto method (QRecursive in f64, Kintner in f32), f32
//       image + f32 precision and f64 image + f64 precision; at order 34 and 2048² also each method
//       explicitly (Direct with the stable and the seed's explicit radial, QRecursive, Kintner) and
//       Auto with the symmetry off;
//   (c) Table IV single moments A0,0 A6,2 A12,0 A25,13 A34,0 A34,18 A34,34 at 64, 256, 1024 (Auto =
//       Direct with the stable radial), f64 and f32;
//   (d) a batch of 1024 images of 128² (a BSQ cube of 1024 f32 bands), whole set n ≤ 20;
//   (e) a 610×340×103 u16 cube (Pavia University's shape), whole set n ≤ 20 of every band.
// Image content: an integer hash of (x, y, band), the same as bench/peers/zernike_torch.py builds,
// so the cross-check values printed here and by the peer can be compared.
//
// Floors (a lower bound each; the row's floor is the larger of the two):
//   compute: an explicit operation count. Per visited point (a representative u ≥ v ≥ 0 on the
//     8-fold path, a pixel on the plain path: visited_points below) and
//     per wanted moment at least one radial recurrence step and one accumulation:
//       Kintner step R_n = (a·t + b)·R_{n−2} + c·R_{n−4}:  3 mul + 2 add = 5 ops
//       accumulation acc += R·P (P complex, the point's angular-weighted value): 2 mul + 2 add = 4
//     = 9 FP64 ops per point and moment (what Kintner reaches for a set, the q-recursion for an
//     order). A request for one moment A(n,m) needs its whole chain: 5·(n−m)/2 + 4 ops per point.
//     Not counted: per (point, m) the angular update w·(X−jY) and the symmetric fold w·Sa + w̄·Sb,
//     per point the 8-pixel gather, the reductions, launch latency (a few µs).
//     The build uses --fmad=false, so every add and mul is one DADD/DMUL instruction: the H100
//     SXM issues 132 SMs × 64 × 1.98 GHz ≈ 17 T FP64 instructions/s (its 34 TFLOP/s FP64
//     non-tensor figure counts an FMA as 2). f64 floor = 9·P·M / 17e12 s.
//     f32 precision (radial and angular factors in float, sums in double): the 5 step ops and
//     the 2 muls of R·P in FP32 at 33.5 T/s, the 2 adds in FP64 at 17 T/s, the two pipes
//     overlapping: floor = max(7·P·M / 33.5e12, 2·P·M / 17e12) s (conversions not counted).
//   memory: the input cube's bytes / 3.0 TB/s.
//   Batches (d, e) also get the GEMM form's floor of spec §4.7 in the notes: moments (2M × B) =
//     basis (2M × P) · images (P × B), 4·M·P·B flops at 67 TFLOP/s FP64 tensor cores.
//
// Usage: zernike_bench [--quick] [--runs N] [--out FILE.md] [--json FILE.json]
//   --quick: a reduced set (sweep of orders 4, 20, 34 at 64² and 2048²; Table IV at 64 and 1024);
//   --out: appends the Markdown report; --json: writes every measurement as a JSON array.
// Exit 0 with a message when built without CUDA or when no CUDA device exists.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <stdexcept>
#include <tuple>

#include "cubekit/context.hpp"
#include "cubekit/cube.hpp"
#include "cubekit/zernike.hpp"

#ifdef CUBEKIT_HAVE_CUDA
#include <cuda_runtime.h>
#endif

using namespace cubekit;

#ifdef CUBEKIT_HAVE_CUDA
namespace {

constexpr int kWarmup = 3;
constexpr double kBandwidth = 3.0e12;   // bytes/s, H100 HBM3 (measured copy bandwidth)
constexpr double kFp64Rate = 17.0e12;   // DADD/DMUL instructions/s (34 TFLOP/s counting an FMA as 2)
constexpr double kFp32Rate = 33.5e12;   // FADD/FMUL instructions/s
constexpr double kFp64Tensor = 67.0e12; // FLOP/s, FP64 tensor cores (DMMA)

// Content shared with bench/peers/zernike_torch.py: h = ((x·73856093) ^ (y·19349663) ^
// (b·83492791)) mod K; float images hold (h mod 1000) / 999, u8 h mod 256, u16 h mod 4096.
std::int64_t hash_xyb(std::int64_t x, std::int64_t y, std::int64_t b) {
    return (x * 73856093) ^ (y * 19349663) ^ (b * 83492791);
}

template <typename T>
void fill_hash(Cube& c, double (*value)(std::int64_t)) {
    T* p = c.data<T>();
    for (int b = 0; b < c.bands(); ++b)
        for (int y = 0; y < c.height(); ++y)
            for (int x = 0; x < c.width(); ++x) *p++ = T(value(hash_xyb(x, y, b)));
}

Cube hash_cube(int width, int height, int bands, DType dtype) {
    Cube c(width, height, bands, dtype, Layout::BSQ);
    switch (dtype) {
        case DType::F64: fill_hash<double>(c, [](std::int64_t h) { return double(h % 1000) / 999.0; }); break;
        case DType::F32: fill_hash<float>(c, [](std::int64_t h) { return double(h % 1000) / 999.0; }); break;
        case DType::U8: fill_hash<std::uint8_t>(c, [](std::int64_t h) { return double(h % 256); }); break;
        case DType::U16: fill_hash<std::uint16_t>(c, [](std::int64_t h) { return double(h % 4096); }); break;
        default: throw std::runtime_error("hash_cube: unsupported type");
    }
    return c;
}

const char* type_name(DType t) {
    switch (t) {
        case DType::F64: return "f64";
        case DType::F32: return "f32";
        case DType::U8: return "u8";
        case DType::U16: return "u16";
        default: return "?";
    }
}

std::string fmt(const char* f, double v) {
    char s[256];
    std::snprintf(s, sizeof s, f, v);
    return s;
}

std::string json_escape(const std::string& s) {
    std::string o;
    for (char ch : s) {
        if (ch == '"' || ch == '\\') o += '\\';
        if (ch == '\n') { o += "\\n"; continue; }
        o += ch;
    }
    return o;
}

void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// The options of a row: method and radial as asked, precision, symmetry on or off.
ZernikeOptions options_of(ZernikeMethod method, ZernikeRadial radial, ZernikePrecision precision, bool symmetry) {
    ZernikeOptions o;
    o.method = method;
    o.radial = radial;
    o.precision = precision;
    o.symmetry = symmetry;
    return o;
}

std::string method_label(ZernikeMethod asked, const ZernikeMomentsInfo& r) {
    std::string s(zernike_method_name(r.method));
    if (r.method == ZernikeMethod::Direct) s += r.radial == ZernikeRadial::Stable ? " (stable)" : " (explicit, seed)";
    return asked == ZernikeMethod::Auto ? "auto → " + s : s;
}

// What a row asks for, through the public device-resident calls: the whole set n ≤ nmax
// (zernike_set_into), every repetition of order n (zernike_order_into) or A(n, m)
// (zernike_moment_into), with the options' method as asked (Auto resolved by the library).
struct Ask {
    enum Kind { Set, Order, Moment } kind = Set;
    int n = 0, m = 0;
    ZernikeOptions options;

    std::vector<ZernikeIndex> wanted() const {
        if (kind == Set) return zernike_set_indices(n);
        if (kind == Order) return zernike_order_indices(n);
        return {{n, m}};
    }
    ZernikeMomentsInfo run(const Context& ctx, const CubeView& images, const MutableCubeView& out) const {
        if (kind == Set) return zernike_set_into(ctx, images, n, out, options);
        if (kind == Order) return zernike_order_into(ctx, images, n, out, options);
        return zernike_moment_into(ctx, images, n, m, out, options);
    }
};

Ask set_ask(int nmax, ZernikePrecision p, bool symmetry) {
    return {Ask::Set, nmax, 0, options_of(ZernikeMethod::Kintner, ZernikeRadial::Stable, p, symmetry)};
}
Ask order_ask(int n, ZernikeMethod method, ZernikeRadial radial, ZernikePrecision p, bool symmetry) {
    return {Ask::Order, n, 0, options_of(method, radial, p, symmetry)};
}
Ask moment_ask(int n, int m, ZernikePrecision p) {
    return {Ask::Moment, n, m, options_of(ZernikeMethod::Auto, ZernikeRadial::Stable, p, true)};
}

// The points a sum visits: on the 8-fold path the representatives u ≥ v ≥ 0 of the centred disk
// (u = 2x + 1 − W, v = H − 1 − 2y), otherwise every pixel inside the disk.
std::int64_t visited_points(const ZernikeDisk& d, bool symmetric) {
    if (!symmetric) return d.pixel_count;
    static std::map<std::pair<int, int>, std::int64_t> known;
    auto [it, fresh] = known.try_emplace({d.width, d.height}, 0);
    if (!fresh) return it->second;
    for (int y = 0; 2 * y <= d.height - 1; ++y)
        for (int x = 0; x < d.width; ++x)
            it->second += 2 * x + 1 - d.width >= d.height - 1 - 2 * y && d.inside(x, y);
    return it->second;
}

// Per visited point (see the header): radial recurrence steps and accumulations. A request of
// several moments costs one step and one accumulation per moment; a single moment A(n,m) its
// whole chain of (n − m)/2 steps and one accumulation.
struct PointWork {
    double steps, accumulations;
};
PointWork point_work(const std::vector<ZernikeIndex>& wanted) {
    if (wanted.size() == 1) return {double((wanted[0].n - wanted[0].m) / 2), 1.0};
    return {double(wanted.size()), double(wanted.size())};
}

// f64: 5 ops per step + 4 per accumulation, all FP64. f32: the steps and the 2 muls of R·P in
// FP32, the 2 adds into the double sums in FP64, on pipes that overlap.
double compute_floor_ms(const std::vector<ZernikeIndex>& wanted, ZernikePrecision precision, double points,
                        int images) {
    const PointWork w = point_work(wanted);
    const double scale = points * double(images);
    if (precision == ZernikePrecision::Double) return (5.0 * w.steps + 4.0 * w.accumulations) * scale / kFp64Rate * 1e3;
    return std::max((5.0 * w.steps + 2.0 * w.accumulations) * scale / kFp32Rate,
                    2.0 * w.accumulations * scale / kFp64Rate) * 1e3;
}

struct Result {
    std::string group, workload, image, precision, method;
    bool symmetric = false;
    int images = 1, size = 0;
    std::size_t moments = 0;
    std::int64_t points = 0;
    double median = NAN, min = NAN, compute_ms = 0, memory_ms = 0;
    double host_ms = NAN;  // median time the call takes to return (host work; the GPU may still run)
    std::string error;
    std::vector<std::complex<double>> values;  // first image's moments (cross-checks)
    double floor_ms() const { return std::max(compute_ms, memory_ms); }
};

}  // namespace
#endif

int main(int argc, char** argv) {
    bool quick = false;
    int runs = 20;
    std::string out_path, json_path;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--quick")) quick = true;
        else if (!std::strcmp(argv[i], "--runs") && i + 1 < argc) runs = std::max(1, std::atoi(argv[++i]));
        else if (!std::strcmp(argv[i], "--out") && i + 1 < argc) out_path = argv[++i];
        else if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
        else {
            std::fprintf(stderr, "usage: zernike_bench [--quick] [--runs N] [--out FILE.md] [--json FILE.json]\n");
            return 2;
        }
    }
#ifndef CUBEKIT_HAVE_CUDA
    std::fprintf(stderr, "zernike_bench: built without CUDA; nothing to time\n");
    (void)quick, (void)runs;
    return 0;
#else
    if (Context::cuda_device_count() == 0) {
        std::fprintf(stderr, "zernike_bench: no CUDA device; nothing to time\n");
        return 0;
    }
    try {
        const Context gpu({.backend = Backend::Cuda});
        const cudaStream_t stream = static_cast<cudaStream_t>(gpu.cuda_stream());
        cudaEvent_t ev_start = nullptr, ev_stop = nullptr;
        check(cudaEventCreate(&ev_start), "cudaEventCreate");
        check(cudaEventCreate(&ev_stop), "cudaEventCreate");

        std::string report;
        auto emit = [&](const std::string& line) {
            std::printf("%s\n", line.c_str());
            std::fflush(stdout);
            report += line + "\n";
        };
        std::vector<Result> results;

        // Device-resident inputs, uploaded once, keyed by "WxHxB type".
        std::map<std::string, std::unique_ptr<DeviceCube>> cubes;
        auto cube = [&](int w, int h, int b, DType t) -> const DeviceCube& {
            const std::string key = std::to_string(w) + "x" + std::to_string(h) + "x" + std::to_string(b) + type_name(t);
            auto& slot = cubes[key];
            if (!slot) slot = std::make_unique<DeviceCube>(DeviceCube::upload(gpu, hash_cube(w, h, b, t)));
            return *slot;
        };

        // One measurement: warm-ups, then `runs` CUDA-event timings of the device-resident call.
        auto measure = [&](const std::string& group, const std::string& workload, const DeviceCube& d, const Ask& ask) {
            Result r;
            const CubeShape& s = d.shape();
            const std::vector<ZernikeIndex> wanted = ask.wanted();
            const ZernikeMethod asked = ask.options.method;
            r.group = group;
            r.workload = workload;
            r.image = std::to_string(s.width) + "×" + std::to_string(s.height) +
                      (s.bands > 1 ? "×" + std::to_string(s.bands) : "") + " " + type_name(s.dtype);
            r.precision = std::string(zernike_precision_name(ask.options.precision));
            r.method = std::string(zernike_method_name(asked));
            r.images = s.bands;
            r.size = s.width;
            r.moments = wanted.size();
            try {
                DeviceCube d_out(gpu, zernike_moments_shape(s.bands, int(wanted.size())));
                std::vector<float> ms;
                std::vector<double> host;
                for (int i = 0; i < kWarmup + runs; ++i) {
                    check(cudaEventRecord(ev_start, stream), "cudaEventRecord");
                    const auto h0 = std::chrono::steady_clock::now();
                    const ZernikeMomentsInfo info = ask.run(gpu, d, d_out);
                    const auto h1 = std::chrono::steady_clock::now();
                    if (i >= kWarmup) host.push_back(std::chrono::duration<double, std::milli>(h1 - h0).count());
                    check(cudaEventRecord(ev_stop, stream), "cudaEventRecord");
                    check(cudaEventSynchronize(ev_stop), "cudaEventSynchronize");
                    float t = 0;
                    check(cudaEventElapsedTime(&t, ev_start, ev_stop), "cudaEventElapsedTime");
                    if (i >= kWarmup) ms.push_back(t);
                    if (i > 0) continue;
                    r.method = method_label(asked, info);
                    r.symmetric = info.symmetric;
                    r.points = visited_points(info.disk, info.symmetric);
                    r.compute_ms = compute_floor_ms(wanted, info.precision, double(r.points), s.bands);
                    r.memory_ms = double(s.num_bytes()) / kBandwidth * 1e3;
                    r.values.resize(wanted.size());  // the first image's moments: row 0 of the output
                    copy_cube(gpu, d_out.view().window(0, 0, int(wanted.size()), 1),
                              MutableCubeView::host(r.values.data(), int(wanted.size()), 1, 2, DType::F64,
                                                    dense_strides(int(wanted.size()), 1, 2, Layout::BIP)));
                }
                std::sort(ms.begin(), ms.end());
                r.median = ms[ms.size() / 2];
                r.min = ms.front();
                std::sort(host.begin(), host.end());
                r.host_ms = host[host.size() / 2];
            } catch (const std::exception& e) {
                r.error = e.what();
                std::fprintf(stderr, "zernike_bench: %s / %s / %s: %s\n", group.c_str(), workload.c_str(), r.method.c_str(),
                             e.what());
            }
            results.push_back(r);
            return r;
        };
        auto row = [&](const Result& r) {
            if (!r.error.empty()) {
                emit("| " + r.group + " | " + r.workload + " | " + r.image + " | " + r.precision + " | " + r.method +
                     " | — | — | — | error: " + r.error.substr(0, 120) + " | | | | |");
                return;
            }
            char line[512];
            std::snprintf(line, sizeof line, "| %s | %s | %s | %s | %s | %s | %lld | %zu × %d | %.4f | %.4f | %.4f | %.4f | %.4f | %.1f× |",
                          r.group.c_str(), r.workload.c_str(), r.image.c_str(), r.precision.c_str(), r.method.c_str(),
                          r.symmetric ? "8-fold" : "plain", (long long)r.points, r.moments, r.images, r.median, r.min,
                          r.host_ms, r.compute_ms, r.memory_ms, r.median / r.floor_ms());
            emit(line);
        };

        emit("### Zernike moments on " + gpu.device_name());
        emit("");
        emit("Inputs resident on the device (hash content shared with `bench/peers/zernike_torch.py`), one call of "
             "`zernike_set_into` / `zernike_order_into` / `zernike_moment_into` timed with CUDA events (validation, "
             "host plan + coefficients, kernels, the moments written to a device output; 'host ms': how long the call "
             "takes to return, the host work of the median run): "
             "median and min of " + std::to_string(runs) + " runs after " + std::to_string(kWarmup) + " warm-ups." +
             (quick ? " **Quick set.**" : ""));
        emit("Compute floor: 9 FP64 ops per visited point and moment (Kintner step 3 mul + 2 add, accumulation "
             "2 mul + 2 add; one moment alone: 5·(n−m)/2 + 4), built with --fmad=false so one op = one DADD/DMUL "
             "instruction at 17 T/s (H100 SXM, 34 TFLOP/s FP64 counting FMA as 2); f32 precision: "
             "max(7 FP32 ops at 33.5 T/s, 2 FP64 adds at 17 T/s). Points = representatives u ≥ v ≥ 0 (8-fold) "
             "or pixels inside the disk (plain). Memory floor: cube bytes / 3.0 TB/s. Launch latency not counted.");
        emit("");
        emit("| case | workload | image | precision | method | path | points | moments × images | median ms | min ms | host ms | "
             "compute floor ms | memory floor ms | median / floor |");
        emit("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");

        // (a) whole set n ≤ 34 at 2048².
        const ZernikeDisk d2048 = zernike_disk(2048, 2048);
        const DeviceCube& img64 = cube(2048, 2048, 1, DType::F64);
        const Result a_sym = measure("a", "set n ≤ 34", img64, set_ask(34, ZernikePrecision::Double, true));
        row(a_sym);
        const Result a_plain = measure("a", "set n ≤ 34", img64, set_ask(34, ZernikePrecision::Double, false));
        row(a_plain);
        const Result a_f32 = measure("a", "set n ≤ 34", cube(2048, 2048, 1, DType::F32),
                                     set_ask(34, ZernikePrecision::Float, true));
        row(a_f32);

        // (b) order 34 at 2048², every method, f32 and f64.
        struct MethodCase {
            ZernikeMethod method;
            ZernikeRadial radial;
            bool symmetry;
        };
        const MethodCase methods[] = {{ZernikeMethod::Auto, ZernikeRadial::Stable, true},
                                      {ZernikeMethod::Auto, ZernikeRadial::Stable, false},
                                      {ZernikeMethod::QRecursive, ZernikeRadial::Stable, true},
                                      {ZernikeMethod::Kintner, ZernikeRadial::Stable, true},
                                      {ZernikeMethod::Direct, ZernikeRadial::Stable, true},
                                      {ZernikeMethod::Direct, ZernikeRadial::Explicit, true}};
        for (ZernikePrecision p : {ZernikePrecision::Float, ZernikePrecision::Double}) {
            const DType t = p == ZernikePrecision::Double ? DType::F64 : DType::F32;
            for (const MethodCase& mc : methods)
                row(measure("b", "order 34, all 18 repetitions", cube(2048, 2048, 1, t),
                            order_ask(34, mc.method, mc.radial, p, mc.symmetry)));
        }

        // (d) batch of 1024 images of 128², set n ≤ 20; (e) 610×340×103 u16, set n ≤ 20.
        const ZernikeDisk d128 = zernike_disk(128, 128), dpavia = zernike_disk(610, 340);
        const DeviceCube& batch = cube(128, 128, 1024, DType::F32);
        const DeviceCube& pavia = cube(610, 340, 103, DType::U16);
        std::vector<Result> batches;
        for (bool sym : {true, false}) {
            batches.push_back(measure("d", "batch, set n ≤ 20", batch, set_ask(20, ZernikePrecision::Double, sym)));
            row(batches.back());
        }
        for (bool sym : {true, false}) {
            batches.push_back(measure("e", "cube bands, set n ≤ 20", pavia, set_ask(20, ZernikePrecision::Double, sym)));
            row(batches.back());
        }
        emit("");
        for (const auto& [name, disk, images] :
             {std::tuple{"(d) 1024 × 128²", d128, 1024}, std::tuple{"(e) 610×340×103", dpavia, 103}}) {
            const double M = double(zernike_set_size(20)), P = double(disk.pixel_count);
            emit(std::string("GEMM-form floor of ") + name + " (spec §4.7, 4·M·P·B flops at 67 TFLOP/s FP64 tensor, M = " +
                 std::to_string(int(M)) + ", P = " + std::to_string(disk.pixel_count) + "): " +
                 fmt("%.4f ms", 4.0 * M * P * images / kFp64Tensor * 1e3) + ".");
        }

        // Cross-checks: a few moments of the (a) image, and path agreement e = |A − A'| / ((n+1)·mean|f|).
        if (a_sym.error.empty()) {
            emit("");
            std::string line = "Cross-check, (a) image, Kintner 8-fold f64 (A = (n+1)/cnt · Σ f V*, cnt = " +
                               std::to_string(d2048.pixel_count) + "):";
            const std::pair<int, int> picks[] = {{0, 0}, {2, 0}, {4, 2}, {10, 4}, {20, 0}, {34, 0}, {34, 34}};
            for (const auto& [n, m] : picks) {
                const std::complex<double> a = a_sym.values[zernike_set_index(n, m)];
                char s[96];
                std::snprintf(s, sizeof s, " A(%d,%d) = %.12g%+.12gj;", n, m, a.real(), a.imag());
                line += s;
            }
            emit(line);
            // mean |f| over the disk: the hash image's values are (h mod 1000)/999 ≥ 0, so mean |f| =
            // Σ f / cnt = A(0,0) (PixelCount normalisation).
            const double mean_f = a_sym.values[0].real();
            for (const Result* other : {&a_plain, &a_f32}) {
                if (!other->error.empty() || other->values.size() != a_sym.values.size()) continue;
                double e = 0;
                for (const ZernikeIndex z : zernike_set_indices(34)) {
                    const std::size_t k = zernike_set_index(z.n, z.m);
                    e = std::max(e, std::abs(a_sym.values[k] - other->values[k]) / double(z.n + 1) / mean_f);
                }
                emit("Agreement of (a) 8-fold f64 with " + std::string(other->symmetric ? "8-fold" : "plain") + " " +
                     other->precision + ": max e = " + fmt("%.2e", e) + " (spec §5.3: ≤ 1e-12 f64, ≤ 1e-6 f32).");
            }
        }

        // (b) the seed's sweep, Auto method, as spec Tables III / V (median ms).
        const std::vector<int> orders = quick ? std::vector<int>{4, 20, 34} : std::vector<int>{4, 8, 12, 16, 20, 24, 28, 32, 34};
        const std::vector<int> sizes = quick ? std::vector<int>{64, 2048} : std::vector<int>{64, 128, 256, 512, 1024, 2048};
        const std::map<int, std::pair<double, double>> k20c = {  // spec §4.3 / §4.6, Kepler K20c 2048², f32
            {4, {7.17, 7.76}},    {8, {14.74, 12.73}},  {12, {24.67, 17.73}}, {16, {36.93, 22.79}}, {20, {51.56, 27.87}},
            {24, {68.59, 32.93}}, {28, {87.87, 38.03}}, {32, {109.53, 43.15}}, {34, {121.23, 45.70}}};
        for (ZernikePrecision p : {ZernikePrecision::Float, ZernikePrecision::Double}) {
            const DType t = p == ZernikePrecision::Double ? DType::F64 : DType::F32;
            emit("");
            emit(std::string("(b) All repetitions of one order, Auto method (") +
                 (p == ZernikePrecision::Double ? "qrecursive" : "kintner") + "), 8-fold, " + type_name(t) +
                 " image, " + type_name(t) + " precision: median ms (seed: K20c 2048², f32, spec Tables III and V)");
            emit("");
            std::string head = "| order |", rule = "|---|";
            for (int s : sizes) head += " " + std::to_string(s) + "² |", rule += "---|";
            emit(head + " floor 2048² | seed direct 2048² | seed q-rec 2048² |");
            emit(rule + "---|---|---|");
            for (int n : orders) {
                std::string line = "| A" + std::to_string(n) + ",* |";
                double floor2048 = NAN;
                for (int s : sizes) {
                    const Result r = measure("b-sweep", "order " + std::to_string(n), cube(s, s, 1, t),
                                             order_ask(n, ZernikeMethod::Auto, ZernikeRadial::Stable, p, true));
                    line += r.error.empty() ? fmt(" %.4f |", r.median) : " error |";
                    if (s == 2048) floor2048 = r.floor_ms();
                }
                emit(line + fmt(" %.4f |", floor2048) + fmt(" %.2f |", k20c.at(n).first) + fmt(" %.2f |", k20c.at(n).second));
            }
        }

        // (c) Table IV single moments (Auto = Direct, stable radial).
        const std::vector<int> tsizes = quick ? std::vector<int>{64, 1024} : std::vector<int>{64, 256, 1024};
        const std::map<std::pair<int, int>, std::vector<double>> table4 = {  // K20c 64, 256, 1024 (spec §4.4)
            {{0, 0}, {0.08, 0.10, 0.56}},   {{6, 2}, {0.08, 0.13, 0.93}},   {{12, 0}, {0.09, 0.16, 1.43}},
            {{25, 13}, {0.09, 0.17, 1.52}}, {{34, 0}, {0.12, 0.28, 3.07}},  {{34, 18}, {0.10, 0.19, 1.82}},
            {{34, 34}, {0.08, 0.10, 0.63}}};
        emit("");
        emit("(c) Single moments (spec Table IV), Auto = direct (stable), 8-fold: median ms, f64 image + precision | "
             "f32 image + precision | seed K20c f32 at 64, 256, 1024");
        emit("");
        {
            std::string head = "| moment |", rule = "|---|";
            for (const char* p : {"f64", "f32"})
                for (int s : tsizes) head += std::string(" ") + p + " " + std::to_string(s) + "² |", rule += "---|";
            emit(head + " seed 64² | seed 256² | seed 1024² | floor f64 1024² |");
            emit(rule + "---|---|---|---|");
        }
        for (const auto& [nm, seed] : table4) {
            std::string line = "| A" + std::to_string(nm.first) + "," + std::to_string(nm.second) + " |";
            double floor1024 = NAN;
            for (ZernikePrecision p : {ZernikePrecision::Double, ZernikePrecision::Float})
                for (int s : tsizes) {
                    const Result r = measure("c", "A(" + std::to_string(nm.first) + "," + std::to_string(nm.second) + ")",
                                             cube(s, s, 1, p == ZernikePrecision::Double ? DType::F64 : DType::F32),
                                             moment_ask(nm.first, nm.second, p));
                    line += r.error.empty() ? fmt(" %.4f |", r.median) : " error |";
                    if (s == 1024 && p == ZernikePrecision::Double) floor1024 = r.floor_ms();
                }
            emit(line + fmt(" %.2f |", seed[0]) + fmt(" %.2f |", seed[1]) + fmt(" %.2f |", seed[2]) +
                 fmt(" %.5f |", floor1024));
        }

        // Targets of the issue.
        emit("");
        auto target = [&](const char* what, const Result& r, double limit, const std::string& peer) {
            if (!r.error.empty()) return emit(std::string("Target ") + what + ": error (" + r.error + ")");
            emit(std::string("Target ") + what + ": " + fmt("%.4f ms", r.median) + " against ≤ " + fmt("%.1f ms", limit) +
                 (r.median <= limit ? ": **met**" : ": **missed**") + fmt(" (%.1f× the floor)", r.median / r.floor_ms()) +
                 peer);
        };
        target("(a) whole set n ≤ 34, 2048², f64, 8-fold", a_sym, 0.3,
               a_sym.error.empty() ? fmt("; the issue's PyTorch figure 299 ms / this = %.0f× (target ≥ 1000×)", 299.0 / a_sym.median)
                                   : std::string());
        target("(d) batch 1024 × 128², n ≤ 20, f64, 8-fold", batches[0], 2.0, "");
        int errors = 0;
        for (const Result& r : results) errors += !r.error.empty();
        if (errors) emit("**" + std::to_string(errors) + " measurement(s) failed; see stderr.**");

        if (!out_path.empty()) std::ofstream(out_path, std::ios::app) << report;
        if (!json_path.empty()) {
            std::ofstream j(json_path);
            j << "[\n";
            for (std::size_t i = 0; i < results.size(); ++i) {
                const Result& r = results[i];
                j << "  {\"group\": \"" << r.group << "\", \"workload\": \"" << json_escape(r.workload) << "\", \"image\": \""
                  << json_escape(r.image) << "\", \"precision\": \"" << r.precision << "\", \"method\": \""
                  << json_escape(r.method) << "\", \"symmetric\": " << (r.symmetric ? "true" : "false")
                  << ", \"images\": " << r.images << ", \"moments\": " << r.moments << ", \"points\": " << r.points;
                if (r.error.empty())
                    j << ", \"ms_median\": " << r.median << ", \"ms_min\": " << r.min << ", \"host_ms\": " << r.host_ms << ", \"compute_floor_ms\": " << r.compute_ms
                      << ", \"memory_floor_ms\": " << r.memory_ms;
                else
                    j << ", \"error\": \"" << json_escape(r.error) << "\"";
                j << ", \"runs\": " << runs << "}" << (i + 1 < results.size() ? "," : "") << "\n";
            }
            j << "]\n";
        }
        check(cudaEventDestroy(ev_start), "cudaEventDestroy");
        check(cudaEventDestroy(ev_stop), "cudaEventDestroy");
        return errors ? 1 : 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "zernike_bench: %s\n", e.what());
        return 1;
    }
#endif
}
