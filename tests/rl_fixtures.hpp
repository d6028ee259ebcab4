#pragma once
// Shared by the PPO and policy tests (test_rl, test_mpi, test_policy): the smallest policy
// network worth training, and which of its parameters are heads.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <string>

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

// Whether a GoPolicy parameter is one of the heads that heads-only training moves (the final layer
// norms, device query and embeddings, priority, fusion and value heads, the anchor's bias), named
// here independently of GoPolicy, so that the tests state what the header comment promises.
inline bool is_policy_head(const std::string& name) {
  static const char* const heads[] = {"placement.ln.",      "priority.ln.",  "fusion.ln.",   "placement.query.",
                                      "placement.devices.", "priority.head.", "fusion.head.", "value.fc1.",
                                      "value.fc2.",         "anchor.bias"};
  return std::any_of(std::begin(heads), std::end(heads), [&](const char* h) { return name.rfind(h, 0) == 0; });
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
