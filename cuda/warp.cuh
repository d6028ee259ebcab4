#pragma once
// Private to the CUDA sources: launch sizes and warp-wide reductions shared by the kernels.
#include <cuda_runtime.h>

#include <cstdint>

namespace go::cuda::detail {

constexpr int kWarp = 32;
constexpr int kBlock = 256;                              // threads per block everywhere
constexpr int kWarpsPerBlock = kBlock / kWarp;
constexpr std::int64_t kMaxGrid = 65535LL * 32;          // grid-stride loops cover the rest

// Blocks for `work` items at `per_block` per block, at least 1 and at most kMaxGrid.
inline unsigned grid_for(std::int64_t work, std::int64_t per_block) {
  const std::int64_t g = (work + per_block - 1) / per_block;
  return static_cast<unsigned>(g < 1 ? 1 : (g > kMaxGrid ? kMaxGrid : g));
}

// Every lane gets the warp's sum (max).
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

}  // namespace go::cuda::detail
