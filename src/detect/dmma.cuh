#pragma once
// The sm_90 f64 tensor-core shapes (mma.sync m16n8k4 and m16n8k8: 66.7 TFLOP/s on the H100, twice the
// sm_80 m8n8k4; bench/probes/dmma_shapes.cu), shared by the classical detectors' kernels. Fragments,
// g = lane / 4, t = lane % 4:
//   A 16×4: a0 = A[g][t], a1 = A[g + 8][t];  A 16×8: those, then a2 = A[g][t + 4], a3 = A[g + 8][t + 4];
//   B 4×8: b0 = B[t][g];                     B 8×8: b0, then b1 = B[t + 4][g];
//   D 16×8: d0 = D[g][2t], d1 = D[g][2t + 1], d2 = D[g + 8][2t], d3 = D[g + 8][2t + 1].
// Compiled for an older GPU they trap: the host entry points refuse such GPUs first.

namespace cubekit::detail {

/// D += A·B, A 16×4, B 4×8.
__device__ __forceinline__ void mma16x8x4(double (&d)[4], double a0, double a1, double b0) {
#if __CUDA_ARCH__ >= 900
    asm volatile("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
                 : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
                 : "d"(a0), "d"(a1), "d"(b0));
#else
    __trap();
#endif
}

/// D += A·B, A 16×8, B 8×8: half the instructions of two k4 steps.
__device__ __forceinline__ void mma16x8x8(double (&d)[4], const double (&a)[4], const double (&b)[2]) {
#if __CUDA_ARCH__ >= 900
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
                 : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
#else
    __trap();
#endif
}

}  // namespace cubekit::detail
