#include <cuda_runtime.h>

#include <string>

#include "go/core/cuda.hpp"

namespace go {

bool cuda_compiled() { return true; }

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

std::string cuda_describe() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return std::string("no usable CUDA device: ") + cudaGetErrorString(err);
  }
  std::string s = std::to_string(n) + " CUDA device(s)";
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) == cudaSuccess) s += (i ? ", " : ": ") + std::string(p.name);
  }
  return s;
}

}  // namespace go
