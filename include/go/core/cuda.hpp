#pragma once
// Whether CUDA devices can be used. Always callable: a build without the CUDA
// backend, or a machine without a GPU, reports 0 devices.
#include <string>

namespace go {

bool cuda_compiled();
int cuda_device_count();
// "<n> device(s): <name>, ..." or why none is usable.
std::string cuda_describe();

}  // namespace go
