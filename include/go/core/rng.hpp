#pragma once
// Seeded, platform-independent random numbers. The standard library's
// distributions differ between implementations, so every draw used by the
// library goes through this generator: the same seed gives the same numbers
// with any compiler.
#include <cmath>
#include <cstdint>

#include "go/core/error.hpp"

namespace go {

class Rng {
 public:
  explicit Rng(std::uint64_t seed = 0) { reseed(seed); }

  void reseed(std::uint64_t seed) {
    std::uint64_t x = seed;
    for (auto& s : s_) s = splitmix64(x);
    has_spare_ = false;
  }

  // An independent stream derived from this generator's seed state and a
  // stream id; used to give each worker thread its own reproducible stream.
  Rng fork(std::uint64_t stream) const {
    std::uint64_t x = s_[0] ^ (s_[1] << 1) ^ (stream * 0xD1B54A32D192ED03ull);
    Rng r(splitmix64(x));
    return r;
  }

  std::uint64_t next_u64() {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 24 random bits (exactly representable floats).
  float uniform() { return static_cast<float>(next_u64() >> 40) * 0x1.0p-24f; }
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }
  // Uniform in [0, 1) with 53 random bits.
  double uniform_double() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

  // Uniform integer in [0, n), unbiased (Lemire's multiply-and-reject).
  std::uint64_t uniform_int(std::uint64_t n) {
    GO_CHECK(n > 0, "Rng::uniform_int needs n > 0");
    unsigned __int128 m = static_cast<unsigned __int128>(next_u64()) * n;
    auto low = static_cast<std::uint64_t>(m);
    if (low < n) {
      const std::uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(next_u64()) * n;
        low = static_cast<std::uint64_t>(m);
      }
    }
    return static_cast<std::uint64_t>(m >> 64);
  }

  // Standard normal (Box-Muller, computed in double for portability).
  float normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u1 = uniform_double();
    while (u1 <= 0.0) u1 = uniform_double();
    const double u2 = uniform_double();
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double a = 6.283185307179586476925 * u2;
    spare_ = static_cast<float>(r * std::sin(a));
    has_spare_ = true;
    return static_cast<float>(r * std::cos(a));
  }
  float normal(float mean, float stddev) { return mean + stddev * normal(); }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static std::uint64_t splitmix64(std::uint64_t& x) {
    std::uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  std::uint64_t s_[4];
  float spare_ = 0.f;
  bool has_spare_ = false;
};

}  // namespace go
