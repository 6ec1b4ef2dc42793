#pragma once
// The CUDA kernels of the classification (svm_cuda.cu, vote_cuda.cu); the front doors in
// svm_predict.cpp and vote.cpp choose them for a CUDA context.
#include <cstdint>
#include <optional>

#include "cubekit/classify.hpp"

namespace cubekit::detail {

/// The most classes the GPU SVM prediction keeps in registers (more: the CPU twin runs).
inline constexpr int kSvmGpuMaxClasses = 16;

/// SVM prediction of every pixel of `cube` (a dense BSQ view on the context's device, any element
/// type) into device arrays: classes (W·H i32) and, unless null, dec (W·H × K(K−1)/2 f64). Returns
/// the pixels with a non-finite band (class 0, decision values NaN). Waits for the result.
std::int64_t predict_svm_cuda(const Context& ctx, const CubeView& cube, const SvmModel& model, std::int32_t* classes,
                              double* dec);

/// The vote on device label arrays of n pixels (values checked ≥ 0 by the caller) into `out`
/// (device, n i32). Returns the statistics, or nothing when the labels are too sparse for dense
/// counters (the largest class above 2^20, or the largest region above 4n): the caller runs the CPU.
std::optional<VoteStats> region_vote_cuda(const Context& ctx, const std::int32_t* regions, const std::int32_t* classes,
                                          std::int64_t n, double tau, std::int32_t* out);

}  // namespace cubekit::detail
