#pragma once
// Shared by the PPO tests (test_rl, test_mpi): the smallest policy network worth training.
#include <cstdint>
#include <cstring>

#include "go/policy/config.hpp"
#include "go/policy/policy.hpp"

namespace go::test {

inline policy::PolicyConfig tiny_policy_config(std::uint64_t seed) {
  policy::PolicyConfig c;
  c.hidden = 16;
  c.heads = 2;
  c.sage_layers = 1;
  c.segment_length = 8;
  c.memory_length = 8;
  c.ffn_dim = 32;
  c.max_devices = 2;
  c.priority_levels = 2;
  c.value_hidden = 16;
  c.seed = seed;
  return c;
}

// The two networks' parameters, bit for bit.
inline bool same_parameters(const policy::GoPolicy& a, const policy::GoPolicy& b) {
  const auto pa = a.named_parameters(), pb = b.named_parameters();
  if (pa.size() != pb.size()) return false;
  for (std::size_t i = 0; i < pa.size(); ++i) {
    const Tensor &x = pa[i].second.value(), &y = pb[i].second.value();
    if (x.shape() != y.shape() || std::memcmp(x.raw(), y.raw(), x.nbytes()) != 0) return false;
  }
  return true;
}

}  // namespace go::test
