#pragma once
// Parameter superposition (GO, Zhou et al. 2020; Cheung et al. 2019): a graph
// embedding c [1, d_c] produces one elementwise gate per gated layer,
//
//   gate_l = 2 * sigmoid(c W_l + b_l)    [1, d]     (1 where c W_l + b_l = 0)
//
// and each layer's input is multiplied by its gate (nn::mul_row), so one set
// of weights is modulated differently for different graphs.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "go/nn/layers.hpp"

namespace go::nn {

class Superposition : public Module {
 public:
  Superposition(std::int64_t context_dim, std::int64_t dim, int num_gates, Rng& rng, float gain = 1.f) {
    GO_CHECK(num_gates >= 0, "Superposition: num_gates ", num_gates, " must be >= 0");
    for (int l = 0; l < num_gates; ++l)
      gates_.push_back(register_module("gate" + std::to_string(l),
                                       std::make_shared<Dense>(context_dim, dim, rng, Activation::none, true, gain)));
  }
  // context [1, context_dim] -> gate l [1, dim].
  Variable gate(int l, const Variable& context) const {
    GO_CHECK(l >= 0 && l < num_gates(), "Superposition: gate ", l, " out of range (", num_gates(), " gates)");
    return scale(sigmoid(gates_[static_cast<std::size_t>(l)]->forward(context)), 2.f);
  }
  int num_gates() const { return static_cast<int>(gates_.size()); }

 private:
  std::vector<std::shared_ptr<Dense>> gates_;
};

}  // namespace go::nn
