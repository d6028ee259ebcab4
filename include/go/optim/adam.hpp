#pragma once
// Adam (with optional decoupled weight decay) and global-norm gradient clipping.
#include <cmath>
#include <vector>

#include "go/autograd/variable.hpp"
#include "go/kernels/rowwise.hpp"

namespace go {

struct AdamOptions {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.f;  // decoupled (AdamW) when > 0
};

class Adam {
 public:
  Adam(std::vector<Variable> params, AdamOptions opt = {}) : params_(std::move(params)), opt_(opt) {
    for (const auto& p : params_) {
      GO_CHECK(p.defined() && p.requires_grad(), "Adam: every parameter must require a gradient");
      m_.push_back(Tensor::zeros(p.shape()));
      v_.push_back(Tensor::zeros(p.shape()));
    }
  }

  // One update from the accumulated gradients; parameters without a gradient are left alone.
  void step() {
    ++t_;
    const float bc1 = 1.f - std::pow(opt_.beta1, static_cast<float>(t_));
    const float bc2 = 1.f - std::pow(opt_.beta2, static_cast<float>(t_));
    for (std::size_t i = 0; i < params_.size(); ++i) {
      Variable& p = params_[i];
      if (!p.has_grad()) continue;
      kernels::adam_step(p.value().f32(), p.grad().f32(), m_[i].f32(), v_[i].f32(), p.numel(), opt_.lr, opt_.beta1,
                         opt_.beta2, opt_.eps, opt_.weight_decay, bc1, bc2);
    }
  }

  void zero_grad() {
    for (auto& p : params_) p.zero_grad();
  }

  float lr() const { return opt_.lr; }
  void set_lr(float lr) { opt_.lr = lr; }
  const AdamOptions& options() const { return opt_; }
  long long step_count() const { return t_; }
  void set_step_count(long long t) { t_ = t; }
  const std::vector<Variable>& params() const { return params_; }
  // Moment estimates, one per parameter, for checkpointing.
  std::vector<Tensor>& first_moments() { return m_; }
  std::vector<Tensor>& second_moments() { return v_; }

 private:
  std::vector<Variable> params_;
  AdamOptions opt_;
  std::vector<Tensor> m_, v_;
  long long t_ = 0;
};

// Scales all gradients so that their global L2 norm is at most max_norm;
// returns the norm before clipping. Parameters without a gradient count as 0.
inline float clip_grad_norm(const std::vector<Variable>& params, float max_norm) {
  GO_CHECK(max_norm > 0.f, "clip_grad_norm: max_norm must be positive, got ", max_norm);
  double total = 0;
  for (const auto& p : params) {
    if (!p.has_grad()) continue;
    const float* g = p.grad().f32();
    for (std::int64_t i = 0; i < p.numel(); ++i) total += static_cast<double>(g[i]) * g[i];
  }
  const double norm = std::sqrt(total);
  if (norm > max_norm) {
    const float s = static_cast<float>(max_norm / (norm + 1e-6));
    for (auto p : params) {
      if (!p.has_grad()) continue;
      float* g = p.grad().f32();
      for (std::int64_t i = 0; i < p.numel(); ++i) g[i] *= s;
    }
  }
  return static_cast<float>(norm);
}

}  // namespace go
