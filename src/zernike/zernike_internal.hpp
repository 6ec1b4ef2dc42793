#pragma once
// Pieces of the Zernike moments shared by the front door, the CPU reference and the CUDA
// implementation: the pixel layout (rows of representatives), exact recurrence coefficients, the
// request after validation, and the work plan of the fused CUDA kernel.
#include <complex>
#include <cstdint>
#include <vector>

#include "cubekit/zernike.hpp"
#include "zernike/zernike_math.hpp"

namespace cubekit::zernike {

/// What to compute, after validation: every method resolved (never Auto).
struct Request {
    std::vector<ZernikeIndex> wanted;
    ZernikeMethod method = ZernikeMethod::Kintner;
    ZernikeRadial radial = ZernikeRadial::Stable;
    ZernikePrecision precision = ZernikePrecision::Double;
    bool symmetric = false;  ///< the 8-fold path runs
    int max_order() const;
};

/// One row of the points a sum visits. Centred geometry: v, and u = first + 2j for j < count
/// (symmetric path: representatives u ≥ v ≥ 0 of row v; plain path: the inside pixels of one
/// image row). Custom: y, and x = first + j.
struct PointRow {
    int v;
    int first;
    int count;
};

/// Every point of a sum, row by row; offsets[r] is the index of row r's first point.
struct PointLayout {
    int width = 0, height = 0;
    bool symmetric = false;
    bool custom = false;
    CentredGeometry centred{0, 0.0};
    double cx = 0.0, cy = 0.0, rho = 0.0;  ///< Custom
    std::vector<PointRow> rows;
    std::vector<std::int64_t> offsets;  ///< rows.size() + 1 entries
    std::int64_t points() const { return offsets.empty() ? 0 : offsets.back(); }
};

/// The layout of `disk`; symmetric = the 8-fold path (requires disk.symmetric).
PointLayout point_layout(const ZernikeDisk& disk, bool symmetric);

/// Exact pixel count of the disk (§3.11: integers for centred mappings, the double test for Custom).
std::int64_t disk_pixel_count(const ZernikeDisk& disk);

/// Recurrence coefficients for every (n, m) with n ≤ nmax, by zernike_set_index(n, m); each is an
/// exact rational rounded once to double. kintner[i] is meaningful for n ≥ m + 4, qrec[i] for
/// m ≤ n − 4 (computed only with qrec). With explicit_beta, beta[beta_offset[i] + k] = β(n, m, k), k = 0..(n − m)/2.
struct Coefficients {
    int nmax = -1;
    std::vector<KintnerCoef> kintner;
    std::vector<QRecCoef> qrec;
    std::vector<double> beta;
    std::vector<std::int32_t> beta_offset;
};
Coefficients coefficients(int nmax, bool explicit_beta, bool qrec = true);

/// Σ f·V*(n, m) over the disk for every wanted moment of every band (not yet scaled by
/// (n + 1) / disk.denominator): result[image * wanted.size() + k]. `images`: host view, any
/// element type, any strides (read where it is).
std::vector<std::complex<double>> sums_cpu(const Context& ctx, const CubeView& images, const ZernikeDisk& disk,
                                           const Request& request);
/// The moments A = Σ f·V* · (n + 1) / disk.denominator of every band into `out` (count × images × 2
/// f64, any strides; see zernike_moments_shape), queued on the context's stream. `images` and `out`:
/// device views on the context's device, any element type and strides; disk.pixel_count ≥ 1.
void moments_cuda(const Context& ctx, const CubeView& images, const ZernikeDisk& disk, const Request& request,
                  const MutableCubeView& out);

/// Reconstruction to order K: `set` holds, per image, the whole set n ≤ K in canonical order.
/// Writes every sample of `out` (W×H×images f64, any strides; 0 outside the disk): a host view for
/// the CPU, a device view on the context's device for CUDA (queued on its stream).
void reconstruct_cpu(const Context& ctx, const std::vector<std::complex<double>>& set, int images, int K,
                     const ZernikeDisk& disk, const MutableCubeView& out);
void reconstruct_cuda(const Context& ctx, const std::vector<std::complex<double>>& set, int images, int K,
                      const ZernikeDisk& disk, const MutableCubeView& out);

/// Work plan of the fused CUDA kernel. Every block runs one task: up to kMaxSlots moments, each
/// with its register accumulator ("slot"). Chain kind (Kintner, Direct + Stable): a slot with
/// `start` begins a Kintner chain at R̃(m, m) and angular factor w^m; the chain then advances
/// until it reaches the slot's n. Explicit kind: every slot starts and evaluates the β sum.
/// QRec kind: a task is one order n; its slots hold repetitions in descending m.
constexpr int kMaxSlots = 20;
enum class PlanKind { Chain, Explicit, QRec };
struct PlanSlot {
    int n = 0, m = 0;
    int start = 0;  ///< 1: (re)start the chain / angular factor here
    int out = -1;   ///< index into Request::wanted
};
struct Plan {
    PlanKind kind = PlanKind::Chain;
    int tasks = 0;
    std::vector<int> slot_count;  ///< per task, 1..kMaxSlots
    std::vector<PlanSlot> slots;  ///< tasks × kMaxSlots; unused slots have out = −1
};
Plan make_plan(const Request& request);

}  // namespace cubekit::zernike

namespace cubekit::detail {

/// What a call with this automatic method (zernike_moment: Direct, zernike_order: QRecursive,
/// zernike_set and zernike_moments: Kintner) computes for `images` (width × height × bands), checked.
ZernikeMomentsInfo zernike_plan_info(const char* function, const CubeShape& images, const std::vector<ZernikeIndex>& wanted,
                                     ZernikeMethod auto_choice, const ZernikeOptions& options);
/// The _into call with that automatic method (the moments bit for bit as that call's).
ZernikeMomentsInfo zernike_into_with(const char* function, const Context& ctx, const CubeView& images,
                                     const std::vector<ZernikeIndex>& wanted, ZernikeMethod auto_choice,
                                     const MutableCubeView& out, const ZernikeOptions& options);
/// The _tiled calls' work (tiled.cpp): the stack in groups, each by zernike_into_with.
ZernikeTiled zernike_in_groups(const char* function, const Context& ctx, const ImageStack& stack,
                               const std::vector<ZernikeIndex>& wanted, ZernikeMethod auto_choice,
                               const MutableCubeView& out, const ZernikeOptions& options, TileOptions tiles);

}  // namespace cubekit::detail
