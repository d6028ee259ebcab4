#pragma once
// Private to the CUDA sources: the check macros over go::cuda::check_status.
#include <cuda_runtime.h>

#include "go/cuda/device.hpp"

#define GO_CUDA_CHECK(expr) ::go::cuda::check_status(static_cast<int>(expr), #expr, __FILE__, __LINE__)
// After a kernel launch: reports a bad launch configuration right away.
#define GO_CUDA_CHECK_LAUNCH() ::go::cuda::check_status(static_cast<int>(cudaGetLastError()), "kernel launch", __FILE__, __LINE__)
