// Host-only builds: the CUDA entry points exist and report no device.
#ifndef GO_WITH_CUDA
#include "go/core/cuda.hpp"

namespace go {
bool cuda_compiled() { return false; }
int cuda_device_count() { return 0; }
std::string cuda_describe() { return "built without the CUDA backend"; }
}  // namespace go
#endif
