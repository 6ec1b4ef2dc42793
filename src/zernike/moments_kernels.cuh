#pragma once
// The moment kernels of the CUDA Zernike implementation (included by cuda.cu only): the Kintner
// chain kernel (the main path) and the generic kernel for the q-recursion and the explicit sums,
// with their slot tables and the fixed-order block reduction.
#include <cstdint>
#include <type_traits>

#include "zernike/zernike_internal.hpp"

namespace cubekit::zernike {
namespace {

constexpr int kThreads = 128;

struct Geometry {  // structure of arrays, P entries each
    double* X;
    double* Y;
    double* t;
    int2* at;  // centred: (u, v); Custom: (x, y)
};

// A plan slot with the coefficients of its own recurrence step, so that the common case (one
// step per slot: dense chains and orders) reads three doubles from shared memory.
struct SlotInfo {
    double a, b, c;  // Chain: R̃n = (a·t + b)·R̃(n−2) + c·R̃(n−4); QRec: S(m) = a·t²·S(m+4) + (b·t + c)·S(m+2)
    int n, m;
    int kind;  // kStep, kStart, or kSlow / kSlowStart: several steps from `from` with the global tables
    int from;  // slow path: Chain: the order r1 holds (m after a start); QRec: the repetition s2 holds
};
enum SlotKind : int { kStep = 0, kStart = 1, kSlow = 2, kSlowStart = 3 };

struct Tables {  // device pointers into the uploaded blob
    const SlotInfo* slots;
    const int* slot_count;
    const KintnerCoef* kintner;
    const QRecCoef* qrec;
    const double* beta;
    const std::int32_t* beta_offset;
};

template <typename T>
__device__ Cplx<double> to_double(Cplx<T> w) {
    return {double(w.re), double(w.im)};
}

__device__ double warp_sum(double x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_down_sync(0xffffffffu, x, o);
    return x;
}

template <bool Sym>
__device__ Folded load_folded(const double* fimg, std::int64_t P, std::int64_t p) {
    if constexpr (Sym)
        return {fimg[p], fimg[P + p], fimg[2 * P + p], fimg[3 * P + p],
                fimg[4 * P + p], fimg[5 * P + p], fimg[6 * P + p], fimg[7 * P + p]};
    else
        return plain_point(fimg[p]);
}

// Fixed-order block reduction of the slot accumulators into this block's partial:
// partial[block][slot][re, im]. Each warp transposes its accumulators through shared memory and
// lane v adds value v over the 32 lanes in lane order (about a quarter of the instructions of a
// shuffle tree per value), then the warp partials are added in warp order.
__device__ void reduce_block(const double (&acc_re)[kMaxSlots], const double (&acc_im)[kMaxSlots], int nslots,
                             double (&red)[kThreads / 32][kMaxSlots][2], double* partial) {
    __shared__ double lanes[kThreads / 32][2 * kMaxSlots][33];  // 33: no bank conflicts on the column reads
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
    for (int i = 0; i < kMaxSlots; ++i) {
        lanes[warp][2 * i][lane] = acc_re[i];
        lanes[warp][2 * i + 1][lane] = acc_im[i];
    }
    __syncwarp();
    for (int v = lane; v < 2 * nslots; v += 32) {
        double s = 0.0;
        for (int j = 0; j < 32; ++j) s += lanes[warp][v][j];
        red[warp][v / 2][v % 2] = s;
    }
    __syncthreads();
    if (threadIdx.x < 2 * nslots) {
        const int i = threadIdx.x / 2, c = threadIdx.x % 2;
        double s = 0.0;
        for (int w = 0; w < kThreads / 32; ++w) s += red[w][i][c];
        const std::size_t block = (std::size_t(blockIdx.z) * gridDim.y + std::size_t(blockIdx.y)) * gridDim.x + blockIdx.x;
        partial[block * (2 * kMaxSlots) + std::size_t(threadIdx.x)] = s;
    }
}

// Stages the task's slot infos in shared memory.
__device__ void stage_slots(const SlotInfo* slots, double* slot_raw) {
    for (int q = threadIdx.x; q < int(kMaxSlots * sizeof(SlotInfo) / sizeof(double)); q += blockDim.x)
        slot_raw[q] = reinterpret_cast<const double*>(slots + std::size_t(blockIdx.y) * kMaxSlots)[q];
    __syncthreads();
}

// The double-precision chain kernel contracts its products into FMAs (explicit __fma_rn; the
// build otherwise forbids contraction): about 40% fewer FP64 instructions on the main path. Its
// per-point values then differ from the CPU reference's by rounding (the spec promises CPU = GPU
// to e ≤ 1e-12, not bitwise); in float the kernel keeps the shared arithmetic exactly.
__device__ Cplx<double> cmul_fma(Cplx<double> a, Cplx<double> b) {
    return {__fma_rn(a.re, b.re, -(a.im * b.im)), __fma_rn(a.re, b.im, a.im * b.re)};
}

// angular_sum with FMAs: w·Sa + conj(w)·Sb.
__device__ Cplx<double> angular_sum_fma(Cplx<double> wm, const Folded& f, int m) {
    double ar, ai, br, bi;
    folded_sums(f, m, ar, ai, br, bi);
    const double sr = ar + br, si = ai + bi, dr = ar - br, di = ai - bi;  // w·Sa + conj(w)·Sb
    return {__fma_rn(wm.re, sr, -(wm.im * di)), __fma_rn(wm.re, si, wm.im * dr)};
}

template <typename T>
__device__ Cplx<double> angular_of(Cplx<T> w, const Folded& f, int m) {
    if constexpr (std::is_same_v<T, double>)
        return angular_sum_fma(cpow(w, m, [](Cplx<double> a, Cplx<double> b) { return cmul_fma(a, b); }), f, m);
    else return angular_sum(to_double(cpow(w, m)), f, m);
}

template <typename T>
__device__ T step_of(T a, T b, T c, T t, T r1, T r2) {
    if constexpr (std::is_same_v<T, double>) return __fma_rn(__fma_rn(a, t, b), r1, c * r2);
    else return (a * t + b) * r1 + c * r2;  // kintner_step
}

__device__ double accumulate(double acc, double r, double a) { return __fma_rn(r, a, acc); }

// Kintner chains (whole sets, Direct + Stable): the main path. Each thread takes kIlp points per
// iteration (p, p + stride, ...) and advances their chains side by side, so that the dependent
// recurrence steps of one point overlap those of the other; the points still reach each
// accumulator in grid-stride order. The folded values are read only when a chain starts.
// Occupancy measured on the H100: 3 blocks per SM (≤ 170 registers) is best in double, 4 (≤ 128
// registers, a few spills) in float.
__device__ void prefetch_l1(const void* p) { asm volatile("prefetch.global.L1 [%0];" ::"l"(p)); }

template <typename T, bool Sym, int kIlp>
__global__ void __launch_bounds__(kThreads, std::is_same_v<T, double> ? 3 : 4)
    chain_kernel(Geometry geo, const double* folded, std::int64_t P, Tables tab, double* partial) {
    __shared__ double slot_raw[kMaxSlots * sizeof(SlotInfo) / sizeof(double)];
    __shared__ double red[kThreads / 32][kMaxSlots][2];
    stage_slots(tab.slots, slot_raw);
    // volatile: read per use; hoisted out of the point loop, 20 slots' coefficients would take
    // 120 registers and spill.
    const volatile SlotInfo* slot = reinterpret_cast<const volatile SlotInfo*>(slot_raw);
    const int nslots = tab.slot_count[blockIdx.y];

    double acc_re[kMaxSlots], acc_im[kMaxSlots];
#pragma unroll
    for (int i = 0; i < kMaxSlots; ++i) acc_re[i] = acc_im[i] = 0.0;

    const double* fimg = folded + std::size_t(blockIdx.z) * (Sym ? 8 : 1) * std::size_t(P);
    const std::int64_t stride = std::int64_t(gridDim.x) * kThreads;
    for (std::int64_t p0 = blockIdx.x * std::int64_t(kThreads) + threadIdx.x; p0 < P; p0 += kIlp * stride) {
        // The next iteration's points into L1 while this one computes (measured: −10% on the plain
        // path, neutral on the 8-fold one).
#pragma unroll
        for (int q = 0; q < kIlp; ++q) {
            const std::int64_t pn = p0 + (kIlp + q) * stride;
            if (pn < P) {
                prefetch_l1(geo.t + pn);
                prefetch_l1(geo.X + pn);
                prefetch_l1(geo.Y + pn);
#pragma unroll
                for (int k = 0; k < (Sym ? 8 : 1); ++k) prefetch_l1(fimg + k * P + pn);
            }
        }
        std::int64_t at[kIlp];
        bool valid[kIlp];
        T tt[kIlp], r1[kIlp], r2[kIlp];
        Cplx<T> w[kIlp];
        Cplx<double> A[kIlp];
#pragma unroll
        for (int q = 0; q < kIlp; ++q) {
            valid[q] = p0 + q * stride < P;
            at[q] = valid[q] ? p0 + q * stride : p0;  // a missing point contributes exactly 0 (A = 0)
            tt[q] = T(geo.t[at[q]]);
            w[q] = {T(geo.X[at[q]]), T(-geo.Y[at[q]])};  // X − jY
            r1[q] = T(1);
            r2[q] = T(0);
            A[q] = {0.0, 0.0};
        }
        int m = 0;
        // Every slot runs (unused ones are zero steps, padded by slot_infos): no bounds test. The
        // next slot's kind and coefficients are read one slot ahead, hiding the shared-memory latency.
        int next_kind = slot[0].kind;
        T next_a = T(slot[0].a), next_b = T(slot[0].b), next_c = T(slot[0].c);
#pragma unroll
        for (int i = 0; i < kMaxSlots; ++i) {
            {
                const int kind = next_kind;
                const T a = next_a, b = next_b, c = next_c;
                if (i + 1 < kMaxSlots) {
                    next_kind = slot[i + 1].kind;
                    next_a = T(slot[i + 1].a);
                    next_b = T(slot[i + 1].b);
                    next_c = T(slot[i + 1].c);
                }
                if (kind == kStep) {  // kintner_step with this slot's coefficients
#pragma unroll
                    for (int q = 0; q < kIlp; ++q) {
                        const T r = step_of(a, b, c, tt[q], r1[q], r2[q]);
                        r2[q] = r1[q];
                        r1[q] = r;
                    }
                } else {
                    if (kind != kSlow) {  // a chain starts: R̃(m,m) = 1 and the angular factor of m
                        m = slot[i].m;
#pragma unroll
                        for (int q = 0; q < kIlp; ++q) {
                            r1[q] = T(1);
                            r2[q] = T(0);
                            const Folded f = load_folded<Sym>(fimg, P, at[q]);
                            A[q] = valid[q] ? angular_of(w[q], f, m) : Cplx<double>{0.0, 0.0};
                        }
                    }
                    for (int n = slot[i].from + 2; n <= slot[i].n; n += 2) {
#pragma unroll
                        for (int q = 0; q < kIlp; ++q) {
                            const T r = n == m + 2 ? kintner_second(m, tt[q])
                                                   : kintner_step(tab.kintner[set_index(n, m)], tt[q], r1[q], r2[q]);
                            r2[q] = r1[q];
                            r1[q] = r;
                        }
                    }
                }
#pragma unroll
                for (int q = 0; q < kIlp; ++q) {
                    if constexpr (std::is_same_v<T, double>) {
                        acc_re[i] = accumulate(acc_re[i], r1[q], A[q].re);
                        acc_im[i] = accumulate(acc_im[i], r1[q], A[q].im);
                    } else {
                        acc_re[i] += double(r1[q]) * A[q].re;
                        acc_im[i] += double(r1[q]) * A[q].im;
                    }
                }
            }
        }
    }
    reduce_block(acc_re, acc_im, nslots, red, partial);
}

template <typename T, PlanKind Kind, bool Sym>
__global__ void __launch_bounds__(kThreads, 3) moments_kernel(Geometry geo, const double* folded, std::int64_t P,
                                                          Tables tab, double* partial) {
    __shared__ double slot_raw[kMaxSlots * sizeof(SlotInfo) / sizeof(double)];
    __shared__ double red[kThreads / 32][kMaxSlots][2];
    stage_slots(tab.slots, slot_raw);
    const volatile SlotInfo* slot = reinterpret_cast<const volatile SlotInfo*>(slot_raw);
    const int task = blockIdx.y, image = blockIdx.z;
    const int nslots = tab.slot_count[task];

    double acc_re[kMaxSlots], acc_im[kMaxSlots];
#pragma unroll
    for (int i = 0; i < kMaxSlots; ++i) acc_re[i] = acc_im[i] = 0.0;

    const double* fimg = folded + std::size_t(image) * (Sym ? 8 : 1) * std::size_t(P);
    for (std::int64_t p = blockIdx.x * std::int64_t(kThreads) + threadIdx.x; p < P;
         p += std::int64_t(gridDim.x) * kThreads) {
        const T tt = T(geo.t[p]);
        const Cplx<T> w{T(geo.X[p]), T(-geo.Y[p])};  // X − jY
        const Folded f = load_folded<Sym>(fimg, P, p);
        if constexpr (Kind == PlanKind::Explicit) {
#pragma unroll
            for (int i = 0; i < kMaxSlots; ++i) {
                if (i < nslots) {
                    const int sn = slot[i].n, sm = slot[i].m;
                    const Cplx<double> A = angular_sum(to_double(cpow(w, sm)), f, sm);
                    const double* beta = tab.beta + tab.beta_offset[set_index(sn, sm)];
                    T r = T(beta[0]);
                    for (int k = 1; k <= (sn - sm) / 2; ++k) r = r * tt + T(beta[k]);
                    acc_re[i] += double(r) * A.re;
                    acc_im[i] += double(r) * A.im;
                }
            }
        } else {  // QRec: one order n, slots in descending m
            const int n = slot[0].n;
            const T tt2 = tt * tt;
            T sv[kMaxSlots];
            T s2 = T(1), s4 = T(0);  // S(cur), S(cur + 2)
#pragma unroll
            for (int i = 0; i < kMaxSlots; ++i) {
                if (i < nslots) {
                    const int kind = slot[i].kind;
                    if (kind == kStep) {  // qrec_step with this slot's coefficients
                        const T v = T(slot[i].a) * tt2 * s4 + (T(slot[i].b) * tt + T(slot[i].c)) * s2;
                        s4 = s2;
                        s2 = v;
                    } else if (kind != kStart) {
                        for (int mm = slot[i].from - 2; mm >= slot[i].m; mm -= 2) {
                            const T v = mm == n - 2 ? qrec_second(n, tt)
                                                    : qrec_step(tab.qrec[set_index(n, mm)], tt, s4, s2);
                            s4 = s2;
                            s2 = v;
                        }
                    }
                    sv[i] = s2;
                }
            }
            const Cplx<T> w2 = cmul(w, w);
            Cplx<T> wm{T(1), T(0)};
            int wm_m = -1;
#pragma unroll
            for (int i = kMaxSlots - 1; i >= 0; --i) {
                if (i < nslots) {
                    const int m = slot[i].m;
                    wm = wm_m >= 0 && m == wm_m + 2 ? cmul(wm, w2) : cpow(w, m);
                    wm_m = m;
                    const Cplx<double> A = angular_sum(to_double(wm), f, m);
                    acc_re[i] += double(sv[i]) * A.re;
                    acc_im[i] += double(sv[i]) * A.im;
                }
            }
        }
    }

    reduce_block(acc_re, acc_im, nslots, red, partial);
}

}  // namespace
}  // namespace cubekit::zernike
