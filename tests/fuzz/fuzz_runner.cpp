// The body of every libFuzzer driver, compiled once for all targets (the loaders are header-only
// and heavy to compile): runs one input through the named target of targets.hpp.
//
// Rejecting an input with go::Error is the expected outcome; any other exception (or a broken
// invariant of a loaded object) prints what it was and aborts, which libFuzzer reports as a crash
// and saves as crash-<sha1> in the artifact folder. A bug listed in known_open_issues() (targets.hpp)
// is passed over, once reported, unless GO_FUZZ_STRICT=1.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <typeinfo>

#include "fuzz/targets.hpp"

extern "C" int go_fuzz_init(const char* name) {
  if (!go::fuzz::find_target(name)) {
    std::fprintf(stderr, "fuzz: no target named '%s' in tests/fuzz/targets.hpp\n", name);
    std::abort();
  }
  return 0;
}

extern "C" int go_fuzz_run(const char* name, const std::uint8_t* data, std::size_t size) {
  static const go::fuzz::Target* target = go::fuzz::find_target(name);
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    std::string why;
    if (go::fuzz::run(*target, bytes, &why) == go::fuzz::Outcome::known_open) {
      static bool said = false;
      if (!said) std::fprintf(stderr, "\nfuzz_%s: hit a known open bug (not reported again): %s\n", name, why.c_str());
      said = true;
    }
  } catch (const go::fuzz::InvariantBroken& e) {
    std::fprintf(stderr, "\nfuzz_%s: BROKEN INVARIANT: %s\n", name, e.what());
    std::abort();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "\nfuzz_%s: the loader threw %s instead of go::Error: %s\n", name, typeid(e).name(),
                 e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "\nfuzz_%s: the loader threw something that is not a std::exception\n", name);
    std::abort();
  }
  return 0;
}
