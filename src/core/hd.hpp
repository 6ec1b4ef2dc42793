#pragma once
// CUBEKIT_HD marks the small arithmetic functions that the CPU reference and the CUDA kernels share,
// so that both backends run the same operations in the same order.
#if defined(__CUDACC__)
#define CUBEKIT_HD __host__ __device__ __forceinline__
#else
#define CUBEKIT_HD inline
#endif
