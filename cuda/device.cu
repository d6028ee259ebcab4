// Device memory and error checks (go/cuda/device.hpp).
#include <cuda_runtime.h>

#include <string>

#include "check.cuh"
#include "go/core/error.hpp"
#include "go/cuda/device.hpp"

namespace go::cuda {

void check_status(int status, const char* what, const char* file, int line) {
  if (status == static_cast<int>(cudaSuccess)) return;
  const auto err = static_cast<cudaError_t>(status);
  cudaGetLastError();  // clear a non-sticky error so later calls do not report it again
  GO_FAIL(what, " failed at ", file, ":", line, ": ", cudaGetErrorName(err), ": ", cudaGetErrorString(err));
}

void* device_malloc(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    GO_FAIL("cudaMalloc of ", bytes, " bytes failed: ", cudaGetErrorName(err), ": ", cudaGetErrorString(err));
  }
  return p;
}

void device_free(void* p) noexcept {
  if (p && cudaFree(p) != cudaSuccess) cudaGetLastError();
}

void copy_to_device(void* dst, const void* src, std::size_t bytes) {
  if (bytes) GO_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}

void copy_to_host(void* dst, const void* src, std::size_t bytes) {
  if (bytes) GO_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

void copy_device_to_device(void* dst, const void* src, std::size_t bytes) {
  if (bytes) GO_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
}

void memset_zero(void* p, std::size_t bytes) {
  if (bytes) GO_CUDA_CHECK(cudaMemset(p, 0, bytes));
}

void synchronize() {
  GO_CUDA_CHECK(cudaGetLastError());
  GO_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace go::cuda
