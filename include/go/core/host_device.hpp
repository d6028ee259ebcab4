#pragma once
// GO_HOST_DEVICE marks per-element math bodies shared by the CPU loops and the
// CUDA kernels, so the CPU tests also check the math that runs on the GPU.
#if defined(__CUDACC__)
#define GO_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define GO_HOST_DEVICE inline
#endif
