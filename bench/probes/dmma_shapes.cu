// Throughput of the f64 tensor-core shapes: m8n8k4 (sm_80) and m16n8k{4,8,16} (sm_90). Standalone:
//   nvcc -arch=sm_90 -O3 -o dmma_shapes bench/probes/dmma_shapes.cu && ./dmma_shapes
// H100 (2026-11-27): m8n8k4 33.3 TFLOP/s, the m16n8 shapes 66.0–66.8 (bench/results/2026-11-27-h100.md).
#include <cstdio>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)
constexpr int kAcc = 8, kIters = 4096;
template <int S> __global__ void probe(double* out, double seed) {
    double a[8], b[4], d[kAcc][4];
    for (int i = 0; i < 8; ++i) a[i] = seed + threadIdx.x * 1e-9 + i;
    for (int i = 0; i < 4; ++i) b[i] = seed - i * 1e-3;
    for (int m = 0; m < kAcc; ++m) for (int i = 0; i < 4; ++i) d[m][i] = 0;
    for (int it = 0; it < kIters; ++it) {
#pragma unroll
        for (int m = 0; m < kAcc; ++m) {
            if constexpr (S == 0)
                asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};" : "+d"(d[m][0]), "+d"(d[m][1]) : "d"(a[0]), "d"(b[0]));
            else if constexpr (S == 1)
                asm volatile("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};" : "+d"(d[m][0]), "+d"(d[m][1]), "+d"(d[m][2]), "+d"(d[m][3]) : "d"(a[0]), "d"(a[1]), "d"(b[0]));
            else if constexpr (S == 2)
                asm volatile("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};" : "+d"(d[m][0]), "+d"(d[m][1]), "+d"(d[m][2]), "+d"(d[m][3]) : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
            else
                asm volatile("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7,%8,%9,%10,%11}, {%12,%13,%14,%15}, {%0,%1,%2,%3};" : "+d"(d[m][0]), "+d"(d[m][1]), "+d"(d[m][2]), "+d"(d[m][3]) : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]), "d"(a[7]), "d"(b[0]), "d"(b[1]), "d"(b[2]), "d"(b[3]));
        }
    }
    double s = 0;
    for (int m = 0; m < kAcc; ++m) for (int i = 0; i < 4; ++i) s += d[m][i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
template <int S> int run(const char* name, long long mnk, int threads) {
    int sms = 0; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const int blocks = sms * 2048 / threads;
    double* out; CK(cudaMalloc(&out, sizeof(double) * blocks * threads));
    probe<S><<<blocks, threads>>>(out, 1.0); CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
    cudaEventRecord(a); probe<S><<<blocks, threads>>>(out, 1.0); cudaEventRecord(b); CK(cudaEventSynchronize(b));
    float ms = 0; cudaEventElapsedTime(&ms, a, b);
    const double flops = 2.0 * mnk * kAcc * kIters * (double(blocks) * threads / 32);
    printf("%-10s threads/block %4d: %.3f ms, %.1f TFLOP/s\n", name, threads, ms, flops / ms / 1e9);
    cudaFree(out); return 0;
}
int main() {
    for (int t : {128, 256, 512}) {
        run<0>("m8n8k4", 8 * 8 * 4, t); run<1>("m16n8k4", 16 * 8 * 4, t);
        run<2>("m16n8k8", 16 * 8 * 8, t); run<3>("m16n8k16", 16 * 8 * 16, t);
    }
}
