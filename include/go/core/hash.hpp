#pragma once
// FNV-1a, 64 bits: a checksum of bytes (checkpoint data, a graph's or a cluster's contents) that is
// the same on every machine and build. Not for adversaries: it detects edits and mix-ups.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace go {

inline constexpr std::uint64_t kFnvOffset = 0xcbf29ce484222325ull;

// Continues the hash `h` over n bytes at p (start with kFnvOffset).
inline std::uint64_t fnv1a64(const void* p, std::size_t n, std::uint64_t h = kFnvOffset) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i) {
    h ^= b[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

inline std::string hex64(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace go
