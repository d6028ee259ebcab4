#pragma once
// Shared by the PPO tests (test_rl, test_mpi): the smallest policy network worth training.
#include <cstdint>

#include "go/policy/config.hpp"

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

}  // namespace go::test
