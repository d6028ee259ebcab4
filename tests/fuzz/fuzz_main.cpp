// libFuzzer driver of one target of targets.hpp, named at compile time by GO_FUZZ_TARGET
// (tests/fuzz/CMakeLists.txt builds one binary fuzz_<name> per target; the work is in
// fuzz_runner.cpp, compiled once).
#include <cstddef>
#include <cstdint>

#ifndef GO_FUZZ_TARGET
#error "GO_FUZZ_TARGET must name a target of tests/fuzz/targets.hpp"
#endif

extern "C" int go_fuzz_init(const char* name);
extern "C" int go_fuzz_run(const char* name, const std::uint8_t* data, std::size_t size);

extern "C" int LLVMFuzzerInitialize(int*, char***) { return go_fuzz_init(GO_FUZZ_TARGET); }

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return go_fuzz_run(GO_FUZZ_TARGET, data, size);
}
