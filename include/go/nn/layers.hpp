#pragma once
// Small modules built on the fused ops of go/nn/functional.hpp: LayerNorm,
// Embedding, Dense (a Linear applied through nn::linear with a fused activation).
#include <cmath>
#include <cstdint>
#include <memory>
#include <utility>

#include "go/autograd/autograd.hpp"
#include "go/nn/functional.hpp"
#include "go/nn/module.hpp"

namespace go::nn {

// Layer normalization over the last axis with learned gain (ones) and bias (zeros).
class LayerNorm : public Module {
 public:
  explicit LayerNorm(std::int64_t dim, float eps = 1e-5f) : eps_(eps) {
    GO_CHECK(dim >= 1, "LayerNorm: dim ", dim, " must be >= 1");
    gamma_ = register_parameter("gamma", Tensor::ones(Shape{dim}));
    beta_ = register_parameter("beta", Tensor::zeros(Shape{dim}));
  }
  Variable forward(const Variable& x) const { return layer_norm(x, gamma_, beta_, eps_); }
  const Variable& gamma() const { return gamma_; }
  const Variable& beta() const { return beta_; }

 private:
  Variable gamma_, beta_;
  float eps_;
};

// A [vocabulary, dim] table of N(0, stddev^2) rows.
class Embedding : public Module {
 public:
  Embedding(std::int64_t vocabulary, std::int64_t dim, Rng& rng, float stddev = 1.f) {
    GO_CHECK(vocabulary >= 1 && dim >= 1, "Embedding: vocabulary ", vocabulary, " and dim ", dim, " must be >= 1");
    table_ = register_parameter("table", Tensor::randn(Shape{vocabulary, dim}, rng, stddev));
  }
  Variable forward(const Tensor& ids) const { return embedding(table_, ids); }
  // x + table[ids] row by row.
  Variable add_to(const Variable& x, const Tensor& ids) const { return add_embedding(x, table_, ids); }
  const Variable& table() const { return table_; }
  std::int64_t vocabulary() const { return table_.dim(0); }

 private:
  Variable table_;
};

// y = act(x W + b) with W [in, out] (Glorot uniform times `gain`), b zeros; one fused autograd node.
// A list of inputs multiplies consecutive row blocks of W (a concat without the copy).
class Dense : public Module {
 public:
  Dense(std::int64_t in, std::int64_t out, Rng& rng, Activation act = Activation::none, bool bias = true,
        float gain = 1.f)
      : act_(act) {
    GO_CHECK(in >= 1 && out >= 1, "Dense: in ", in, " and out ", out, " must be >= 1");
    const float a = gain * std::sqrt(6.f / static_cast<float>(in + out));
    weight_ = register_parameter("weight", Tensor::uniform(Shape{in, out}, rng, -a, a));
    if (bias) bias_ = register_parameter("bias", Tensor::zeros(Shape{1, out}));
  }
  Variable forward(const Variable& x) const { return linear(x, weight_, bias_, act_); }
  Variable forward(const std::vector<Variable>& xs) const { return linear(xs, weight_, bias_, act_); }
  const Variable& weight() const { return weight_; }
  const Variable& bias() const { return bias_; }
  std::int64_t in_features() const { return weight_.dim(0); }
  std::int64_t out_features() const { return weight_.dim(1); }

 private:
  Variable weight_, bias_;
  Activation act_;
};

}  // namespace go::nn
