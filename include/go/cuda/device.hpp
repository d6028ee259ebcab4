#pragma once
// Device memory for the CUDA backend: an owning buffer (cudaMalloc / cudaFree, never managed
// memory), explicit synchronous copies and the error check every CUDA call goes through.
//
// This header compiles without CUDA: the functions are implemented in cuda/device.cu when the
// library is built with the CUDA backend (GO_WITH_CUDA), and in kernels/cuda_nocuda.cpp
// otherwise, where each throws go::Error("this build has no CUDA backend ..."). Call
// go::cuda_device_count() (go/core/cuda.hpp) first to know whether a device can be used.
//
// Every entry point works on the current device and the default stream; copies are synchronous.
// A failing CUDA call throws go::Error naming the call and CUDA's error string.
#include <cstddef>
#include <cstdint>
#include <utility>

#include "go/core/cuda.hpp"

namespace go::cuda {

// Throws go::Error("<what> failed at <file>:<line>: <CUDA error name>: <CUDA error string>") when
// status (a cudaError_t) is not cudaSuccess; no-op otherwise.
void check_status(int status, const char* what, const char* file, int line);

// Raw memory on the current device.
void* device_malloc(std::size_t bytes);  // nullptr for 0 bytes
void device_free(void* p) noexcept;      // nullptr is fine; errors are swallowed (destructors)
void copy_to_device(void* dst, const void* src, std::size_t bytes);
void copy_to_host(void* dst, const void* src, std::size_t bytes);
void copy_device_to_device(void* dst, const void* src, std::size_t bytes);
void memset_zero(void* p, std::size_t bytes);
// Waits for every kernel launched so far and reports an asynchronous launch error, if any.
void synchronize();

// An owning device allocation; move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes) : ptr_(device_malloc(bytes)), bytes_(bytes) {}
  ~DeviceBuffer() { device_free(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      device_free(ptr_);
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }

  void* get() { return ptr_; }
  const void* get() const { return ptr_; }
  template <class T>
  T* as() {
    return static_cast<T*>(ptr_);
  }
  template <class T>
  const T* as() const {
    return static_cast<const T*>(ptr_);
  }
  std::size_t bytes() const { return bytes_; }
  bool empty() const { return bytes_ == 0; }

  void upload(const void* src, std::size_t bytes) { copy_to_device(ptr_, src, bytes); }
  void download(void* dst, std::size_t bytes) const { copy_to_host(dst, ptr_, bytes); }
  void zero() { memset_zero(ptr_, bytes_); }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace go::cuda
