#pragma once
// PPO's clipped surrogate over several decisions of one network pass, as one autograd op.
//
// With chain "hidden" every decision of a graph reads the same three log-softmax tensors
// (GoPolicy::backward_shared). Built from elementwise ops, the loss of each of K decisions is a
// dozen [n] ops (three picks, their sum, the ratio, the clip, the min, the mean) and as many
// backward steps: with 64 decisions, most of a heads-only fine-tuning step. Here one
// op computes sum_k pg_k and, in its backward, adds each decision's gradient straight into the
// three log-softmax gradients, with the same derivative conventions as that composite
// (minimum's ties split the gradient in halves, clamp passes it on its bounds).
//
//   node: pg_k = -mean_i min(r_ki A_k, clamp(r_ki, 1 - c, 1 + c) A_k),  r_ki = exp(lp_ki - old_ki)
//   plan: pg_k = -min(R_k A_k, clamp(R_k, 1 - c, 1 + c) A_k),  R_k = exp(clamp(sum_i lp_ki - sum_i old_ki, -20, 20))
// lp_ki = log_softmax[0][i, device] + log_softmax[1][i, priority] + log_softmax[2][i, fuse] of
// decision k. Rows are split over threads in the backward and decisions in the forward, each
// summed in a fixed order, so the result does not depend on the thread count.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "go/autograd/autograd.hpp"
#include "go/core/error.hpp"
#include "go/policy/policy.hpp"

namespace go::rl {

// One decision of the loss: its actions, the log-probabilities it was drawn with ([n] f32) and
// its advantage.
struct SurrogateInput {
  const policy::Actions* actions = nullptr;
  const Tensor* old_log_prob = nullptr;
  float advantage = 0;
};

// Per decision: its pg_k, and the approximate KL ((r - 1) - log r) and clipped fraction
// (|r - 1| > clip) over its rows (node) or of its plan's ratio (plan).
struct SurrogateStats {
  double loss = 0, kl = 0, clip_fraction = 0;
};

namespace detail {
// d min(x A, clamp(x) A) / dx, as minimum and clamp's backward give it.
inline float clipped_min_slope(float x, float A, float lo, float hi) {
  const float a = x * A;
  const float b = (x < lo ? lo : (x > hi ? hi : x)) * A;
  const float wa = a < b ? 1.f : (a == b ? 0.5f : 0.f);
  const float wb = b < a ? 1.f : (a == b ? 0.5f : 0.f);
  return wa * A + (x >= lo && x <= hi ? wb * A : 0.f);
}
inline float clipped_min(float x, float A, float lo, float hi) {
  const float a = x * A;
  const float b = (x < lo ? lo : (x > hi ? hi : x)) * A;
  return a < b ? a : b;
}
}  // namespace detail

// sum_k pg_k (a scalar). `stats`, where given, gets one entry per decision.
inline Variable clipped_surrogate(const std::array<Variable, 3>& log_softmax, const std::vector<SurrogateInput>& in,
                                  float clip, bool per_node, std::vector<SurrogateStats>* stats = nullptr) {
  GO_CHECK(!in.empty(), "clipped_surrogate: no decisions");
  const std::int64_t n = log_softmax[0].dim(0);
  std::array<std::int64_t, 3> width{};
  for (int t = 0; t < 3; ++t) {
    const Tensor& v = log_softmax[static_cast<std::size_t>(t)].value();
    GO_CHECK(v.rank() == 2 && v.dim(0) == n && v.dtype() == DType::f32, "clipped_surrogate: log-softmax ", t, " is ",
             v.describe(), ", expected f32 [", n, ", a]");
    width[static_cast<std::size_t>(t)] = v.dim(1);
  }
  for (const SurrogateInput& s : in) {
    GO_CHECK(s.actions && s.old_log_prob && s.actions->size() == n && s.old_log_prob->numel() == n &&
                 s.old_log_prob->dtype() == DType::f32,
             "clipped_surrogate: a decision's actions or old log-probabilities (f32) do not have ", n, " rows");
    const Tensor* acts[3] = {&s.actions->device, &s.actions->priority, &s.actions->fuse};
    for (int t = 0; t < 3; ++t) {
      GO_CHECK(acts[t]->dtype() == DType::i32 && acts[t]->numel() == n, "clipped_surrogate: a decision's task ", t,
               " actions are ", acts[t]->describe(), ", expected i32 [", n, "]");
      const std::int32_t* a = acts[t]->data<std::int32_t>();
      for (std::int64_t i = 0; i < n; ++i)
        GO_CHECK(a[i] >= 0 && a[i] < width[static_cast<std::size_t>(t)], "clipped_surrogate: action ", a[i],
                 " of row ", i, " out of range [0, ", width[static_cast<std::size_t>(t)], ")");
    }
  }
  const float lo = 1.f - clip, hi = 1.f + clip;
  // what the backward reads, held by handle: the caller's decisions need not outlive the op
  struct Decision {
    policy::Actions actions;
    Tensor old;
    float advantage;
  };
  std::vector<Decision> dec;
  dec.reserve(in.size());
  for (const SurrogateInput& s : in) dec.push_back({*s.actions, *s.old_log_prob, s.advantage});
  const std::array<const float*, 3> ls{log_softmax[0].value().f32(), log_softmax[1].value().f32(),
                                       log_softmax[2].value().f32()};
  const auto K = static_cast<std::int64_t>(dec.size());
  const bool record = Variable::records(log_softmax);  // then the backward reads ratio
  std::vector<SurrogateStats> st(dec.size());
  std::vector<float> plan_slope(dec.size());  // plan: d (min(R A, clamp(R) A)) / d (sum_i lp_ki)
  // node: r_ki at [k * n + i], kept for the backward (one exp per decision and row in all)
  std::vector<float> ratio(record && per_node ? static_cast<std::size_t>(K * n) : 0);
#pragma omp parallel for schedule(static) if (K * n > (1 << 15))
  for (std::int64_t k = 0; k < K; ++k) {
    const Decision& s = dec[static_cast<std::size_t>(k)];
    const float* old = s.old.f32();
    SurrogateStats& o = st[static_cast<std::size_t>(k)];
    if (per_node) {
      double surr = 0, kl = 0, cf = 0;
      float* rk = ratio.empty() ? nullptr : ratio.data() + k * n;
      for (std::int64_t i = 0; i < n; ++i) {
        const float x = policy::joint_log_prob(ls, width, s.actions, i) - old[i];
        const float r = std::exp(x);
        if (rk) rk[i] = r;
        surr += detail::clipped_min(r, s.advantage, lo, hi);
        // log r is x (no log per row), floored as the composite floors r at 1e-30
        kl += (r - 1.0) - std::max(static_cast<double>(x), -69.07755278982137);
        cf += std::abs(r - 1.0) > clip ? 1.0 : 0.0;
      }
      o = {-surr / static_cast<double>(n), kl / static_cast<double>(n), cf / static_cast<double>(n)};
    } else {
      double lp = 0, ol = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        lp += policy::joint_log_prob(ls, width, s.actions, i);
        ol += old[i];
      }
      const float x = static_cast<float>(lp) - static_cast<float>(ol);
      const float R = std::exp(std::clamp(x, -20.f, 20.f));
      plan_slope[static_cast<std::size_t>(k)] =
          x >= -20.f && x <= 20.f ? detail::clipped_min_slope(R, s.advantage, lo, hi) * R : 0.f;
      o = {-static_cast<double>(detail::clipped_min(R, s.advantage, lo, hi)),
           (R - 1.0) - std::log(std::max(static_cast<double>(R), 1e-30)), std::abs(R - 1.0) > clip ? 1.0 : 0.0};
    }
  }
  double total = 0;
  for (const SurrogateStats& o : st) total += o.loss;
  if (stats) *stats = st;
  std::vector<Variable> inputs(log_softmax.begin(), log_softmax.end());
  return Variable::make(
      Tensor::scalar(static_cast<float>(total)), std::move(inputs),
      [dec = std::move(dec), per_node, lo, hi, width, n, ratio = std::move(ratio),
       plan_slope = std::move(plan_slope)](std::vector<Variable>& in, const Tensor& g) {
        std::array<float*, 3> grad{};
        for (std::size_t t = 0; t < 3; ++t) {
          if (!in[t].requires_grad()) continue;
          bool acc = false;
          Tensor& d = in[t].grad_slot(acc);
          if (!acc) std::memset(d.f32(), 0, static_cast<std::size_t>(n * width[t]) * sizeof(float));
          grad[t] = d.f32();
        }
        const float seed = g.f32()[0];
        const float inv_n = 1.f / static_cast<float>(n);
        // Blocks of rows over threads; in each, the decisions in order over the block's rows: every
        // gradient entry sums its decisions in the same order on any thread count.
        constexpr std::int64_t kBlock = 1024;
        const std::int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (static_cast<std::int64_t>(dec.size()) * n > (1 << 15))
        for (std::int64_t b = 0; b < blocks; ++b) {
          const std::int64_t i0 = b * kBlock, i1 = std::min(n, i0 + kBlock);
          for (std::size_t k = 0; k < dec.size(); ++k) {
            const Decision& s = dec[k];
            const policy::Actions& act = s.actions;
            const std::int32_t* a[3] = {act.device.data<std::int32_t>(), act.priority.data<std::int32_t>(),
                                        act.fuse.data<std::int32_t>()};
            const float* rk = per_node ? ratio.data() + static_cast<std::int64_t>(k) * n : nullptr;
            for (std::int64_t i = i0; i < i1; ++i) {
              float dl;
              if (per_node) {
                const float r = rk[i];
                dl = -seed * inv_n * detail::clipped_min_slope(r, s.advantage, lo, hi) * r;
              } else {
                dl = -seed * plan_slope[k];
              }
              for (std::size_t t = 0; t < 3; ++t)
                if (grad[t]) grad[t][i * width[t] + a[t][i]] += dl;
            }
          }
        }
      });
}

// ---- PPO's loss per decision: surrogate, entropy bonus and value error -------------------------

struct PpoLossTerms {
  float clip = 0.2f;
  bool per_node = true;  // ratio "node" (else "plan")
  float entropy_coef = 0, value_coef = 0;
};
// One decision in the loss: its actions, old log-probabilities, advantage and reward.
struct PpoDecision {
  const policy::Actions* actions = nullptr;
  const Tensor* old_log_prob = nullptr;
  float advantage = 0;
  double reward = 0;
};
// Sums over the decisions a loss took (for the update's means).
struct PpoLossStats {
  double entropy = 0, policy_loss = 0, value_loss = 0, kl = 0, clip_fraction = 0;
  std::int64_t decisions = 0;
  PpoLossStats& operator+=(const PpoLossStats& o) {
    entropy += o.entropy, policy_loss += o.policy_loss, value_loss += o.value_loss, kl += o.kl;
    clip_fraction += o.clip_fraction, decisions += o.decisions;
    return *this;
  }
};

// pg - entropy_coef * mean entropy + value_coef * (V - r)^2 of one decision, from its own output
// (any chain; chain "action" needs it: each decision has its own logits).
inline Variable ppo_loss(const policy::PolicyOutput& out, const PpoDecision& d, const PpoLossTerms& c,
                         PpoLossStats& st) {
  const float A = d.advantage;
  Variable old(*d.old_log_prob);
  Variable pg_loss;
  double kl = 0, cf = 0;
  if (c.per_node) {
    Variable ratio = exp(out.log_prob - old);  // [n]
    pg_loss = -mean(minimum(scale(ratio, A), scale(clamp(ratio, 1.f - c.clip, 1.f + c.clip), A)));
    const float* rp = ratio.value().f32();
    const std::int64_t n = ratio.numel();
    for (std::int64_t i = 0; i < n; ++i) {
      kl += (rp[i] - 1.0) - std::log(std::max(static_cast<double>(rp[i]), 1e-30));
      cf += std::abs(rp[i] - 1.0) > c.clip ? 1.0 : 0.0;
    }
    kl /= static_cast<double>(n);
    cf /= static_cast<double>(n);
  } else {
    Variable ratio = exp(clamp(sum(out.log_prob) - sum(old), -20.f, 20.f));
    pg_loss = -minimum(scale(ratio, A), scale(clamp(ratio, 1.f - c.clip, 1.f + c.clip), A));
    const double rv = ratio.value().item();
    kl = (rv - 1.0) - std::log(std::max(rv, 1e-30));
    cf = std::abs(rv - 1.0) > c.clip ? 1.0 : 0.0;
  }
  Variable target(Tensor::full(Shape{1, 1}, static_cast<float>(d.reward)));
  Variable v_loss = mean(square(out.value - target));
  st.entropy += out.entropy_mean.value().item();
  st.policy_loss += pg_loss.value().item();
  st.value_loss += v_loss.value().item();
  st.kl += kl;
  st.clip_fraction += cf;
  ++st.decisions;
  return pg_loss - scale(out.entropy_mean, c.entropy_coef) + scale(v_loss, c.value_coef);
}

// The sum of ppo_loss over several decisions of one pass (chain "hidden"), from what they share:
// clipped_surrogate for the policy terms, the entropy once, and the value's sum_k (V - r_k)^2 as
// k (V - mean r)^2 + sum_k (r_k - mean r)^2. The same loss and gradients as the per-decision sum, to
// float summation order (tests/test_policy.cpp).
inline Variable ppo_loss(const policy::GoPolicy::SharedOutput& so, const std::vector<PpoDecision>& ds,
                         const PpoLossTerms& c, PpoLossStats& st) {
  GO_CHECK(!ds.empty(), "ppo_loss: no decisions");
  std::vector<SurrogateInput> in;
  in.reserve(ds.size());
  double rsum = 0, vl = 0;
  const float V = so.value.value().item();
  for (const PpoDecision& d : ds) {
    in.push_back({d.actions, d.old_log_prob, d.advantage});
    rsum += d.reward;
    const float dv = V - static_cast<float>(d.reward);
    vl += dv * dv;
  }
  std::vector<SurrogateStats> ss;
  Variable pg = clipped_surrogate(so.log_softmax, in, c.clip, c.per_node, &ss);
  const auto k = static_cast<float>(ds.size());
  const double rbar = rsum / static_cast<double>(ds.size());
  double spread = 0;  // sum_k (r_k - mean r)^2: sum_k (V - r_k)^2 = k (V - mean r)^2 + spread
  for (const PpoDecision& d : ds) spread += (d.reward - rbar) * (d.reward - rbar);
  Variable mean_r(Tensor::full(Shape{1, 1}, static_cast<float>(rbar)));
  Variable v_loss = affine_scalar(mean(square(so.value - mean_r)), k, static_cast<float>(spread));
  st.entropy += static_cast<double>(so.entropy_mean.value().item()) * static_cast<double>(ds.size());
  st.value_loss += vl;
  for (const SurrogateStats& x : ss) {
    st.policy_loss += x.loss;
    st.kl += x.kl;
    st.clip_fraction += x.clip_fraction;
  }
  st.decisions += static_cast<std::int64_t>(ds.size());
  return pg - scale(so.entropy_mean, c.entropy_coef * k) + scale(v_loss, c.value_coef);
}

}  // namespace go::rl
