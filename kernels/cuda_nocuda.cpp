// Builds without the CUDA backend (GO_WITH_CUDA undefined): the entry points of go/cuda/*.hpp
// exist so that code using them links, and each throws go::Error. go::cuda_device_count()
// (kernels/cuda_stub.cpp) reports 0 devices in such builds, so callers that check it first
// never get here. With CUDA on, cuda/device.cu and cuda/kernels.cu define them instead.
#ifndef GO_WITH_CUDA
#include "go/core/error.hpp"
#include "go/cuda/device.hpp"
#include "go/cuda/kernels.hpp"

namespace go::cuda {
namespace {
[[noreturn]] void no_cuda(const char* what) {
  GO_FAIL("go::cuda::", what, ": this build has no CUDA backend (configure with nvcc available, GO_CUDA=AUTO or ON)");
}
}  // namespace

void check_status(int status, const char* what, const char*, int) {
  if (status != 0) no_cuda(what);
}
void* device_malloc(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  no_cuda("device_malloc");
}
void device_free(void*) noexcept {}
void copy_to_device(void*, const void*, std::size_t) { no_cuda("copy_to_device"); }
void copy_to_host(void*, const void*, std::size_t) { no_cuda("copy_to_host"); }
void copy_device_to_device(void*, const void*, std::size_t) { no_cuda("copy_device_to_device"); }
void memset_zero(void*, std::size_t) { no_cuda("memset_zero"); }
void synchronize() { no_cuda("synchronize"); }

void gemm(bool, bool, std::int64_t, std::int64_t, std::int64_t, float, const float*, std::int64_t, const float*,
          std::int64_t, float, float*, std::int64_t) {
  no_cuda("gemm");
}
void csr_aggregate_forward(kernels::Reduce, const std::int64_t*, const std::int32_t*, std::int64_t, const float*,
                           std::int64_t, float*, std::int32_t*) {
  no_cuda("csr_aggregate_forward");
}
void csr_aggregate_backward(kernels::Reduce, const std::int64_t*, const std::int64_t*, const std::int32_t*,
                            std::int64_t, std::int64_t, const float*, std::int64_t, const std::int32_t*, float*) {
  no_cuda("csr_aggregate_backward");
}
void unary_forward(kernels::Unary, const float*, float*, std::int64_t) { no_cuda("unary_forward"); }
void unary_backward(kernels::Unary, const float*, const float*, const float*, float*, std::int64_t, bool) {
  no_cuda("unary_backward");
}
void layer_norm_forward(const float*, const float*, const float*, float*, float*, float*, std::int64_t, std::int64_t,
                        float) {
  no_cuda("layer_norm_forward");
}
void layer_norm_backward(const float*, const float*, const float*, const float*, const float*, float*, float*, float*,
                         std::int64_t, std::int64_t) {
  no_cuda("layer_norm_backward");
}
void softmax_forward(const float*, float*, std::int64_t, std::int64_t, bool) { no_cuda("softmax_forward"); }
void softmax_backward(const float*, const float*, float*, std::int64_t, std::int64_t, bool) {
  no_cuda("softmax_backward");
}
void adam_step(float*, const float*, float*, float*, std::int64_t, float, float, float, float, float, float, float) {
  no_cuda("adam_step");
}
void seg_attention_forward(const kernels::SegAttention&, const float*, const float*, const float*, float*, float*) {
  no_cuda("seg_attention_forward");
}
void seg_attention_backward(const kernels::SegAttention&, const float*, const float*, const float*, const float*,
                            const float*, const float*, float*, float*, float*) {
  no_cuda("seg_attention_backward");
}

struct CsrSpmm::Impl {};
CsrSpmm::CsrSpmm(const std::int32_t*, const std::int32_t*, const float*, std::int64_t, std::int64_t, std::int64_t,
                 const float*, std::int64_t, float*) {
  no_cuda("CsrSpmm");
}
CsrSpmm::~CsrSpmm() = default;
void CsrSpmm::run() { no_cuda("CsrSpmm::run"); }

}  // namespace go::cuda
#endif
