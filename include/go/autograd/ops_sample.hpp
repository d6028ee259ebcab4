#pragma once
// Categorical distributions over the rows of a logits matrix [n, a]: seeded
// sampling, greedy choice, log-probability of chosen actions and entropy, the
// last two differentiable (what a policy-gradient loss needs).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "go/autograd/ops_norm.hpp"
#include "go/autograd/variable.hpp"
#include "go/core/rng.hpp"

namespace go {

namespace detail {
inline void check_logits(const Tensor& logits, const char* op) {
  GO_CHECK(logits.rank() == 2 && logits.dtype() == DType::f32 && logits.dim(1) > 0, op,
           " needs f32 logits [n, actions] with at least one action, got ", logits.describe());
}
}  // namespace detail

// Row-wise softmax probabilities of logits [n, a] (what sample_from_probs draws from).
inline Tensor categorical_probs(const Tensor& logits) {
  detail::check_logits(logits, "categorical_probs");
  Tensor probs = Tensor::empty(logits.shape());
  kernels::softmax_forward(logits.f32(), probs.f32(), logits.dim(0), logits.dim(1), false);
  return probs;
}

namespace detail {
// Rounding can leave a row's cumulative sum below u, so the scan ends at the last action: take the
// last action with mass. (The test of p first: it is rarely true, while pick > 0 is as random as
// the draw, and a branch taken at random costs.)
inline std::int32_t last_with_mass(const float* p, std::int32_t pick) {
  while (p[pick] == 0.f && pick > 0) --pick;
  return pick;
}
// The action of one row with probabilities p[0, a) for the uniform draw u.
inline std::int32_t draw_row(const float* p, std::int64_t a, float u) {
  std::int32_t pick = static_cast<std::int32_t>(a - 1);
  float c = 0.f;
  for (std::int64_t j = 0; j < a; ++j) {
    c += p[j];
    if (u < c) {
      pick = static_cast<std::int32_t>(j);
      break;
    }
  }
  return last_with_mass(p, pick);
}
}  // namespace detail

// One action per row, drawn from probs[row] with rng (rows in order, one uniform draw each: the
// same seed gives the same actions). i32 [n].
inline Tensor sample_from_probs(const Tensor& probs, Rng& rng) {
  detail::check_logits(probs, "sample_from_probs");
  const std::int64_t n = probs.dim(0), a = probs.dim(1);
  Tensor out = Tensor::empty(Shape{n}, DType::i32);
  std::int32_t* o = out.data<std::int32_t>();
  for (std::int64_t i = 0; i < n; ++i) o[i] = detail::draw_row(probs.f32() + i * a, a, rng.uniform());
  return out;
}

// sample_from_probs(probs, rngs[k]) for every k, the same actions (each rng takes its uniforms in
// row order, as there), drawn row by row for a block of outputs at once: a row's cumulative sums
// are made once for the block's draws, and with probabilities >= 0 (categorical_probs') they
// never decrease, so the first sum above u is at the count of sums not above it: no branch per
// action, where the scan mispredicts about once a draw. Blocks of at most kDrawBlock outputs keep
// their output rows in cache and run side by side, at least one per thread (zero-shot's 16
// samples on 2 threads: two blocks of 8, each making the sums again). An rng is one block's, so
// the actions are the same whatever the blocks and the thread count.
inline std::vector<Tensor> sample_from_probs(const Tensor& probs, std::span<Rng> rngs) {
  detail::check_logits(probs, "sample_from_probs");
  constexpr std::int64_t kDrawBlock = 16;
  const std::int64_t n = probs.dim(0), a = probs.dim(1), K = static_cast<std::int64_t>(rngs.size());
  std::vector<Tensor> out;
  std::vector<std::int32_t*> o;
  for (std::int64_t k = 0; k < K; ++k) {
    out.push_back(Tensor::empty(Shape{n}, DType::i32));
    o.push_back(out.back().data<std::int32_t>());
  }
#if defined(_OPENMP)
  const std::int64_t threads = n * K > (1 << 16) ? omp_get_max_threads() : 1;
#else
  const std::int64_t threads = 1;
#endif
  const std::int64_t want = std::min(K, std::max((K + kDrawBlock - 1) / kDrawBlock, threads));
  const std::int64_t per_block = want > 0 ? (K + want - 1) / want : 0;
  const std::int64_t blocks = per_block > 0 ? (K + per_block - 1) / per_block : 0;
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (std::int64_t b = 0; b < blocks; ++b) {
    // the block's sums and rngs are its own copies: side by side in shared arrays, two blocks'
    // would share a cache line written at every row
    std::vector<float> c(static_cast<std::size_t>(a));
    const std::int64_t k0 = b * per_block, k1 = std::min(K, k0 + per_block);
    std::vector<Rng> r(rngs.begin() + k0, rngs.begin() + k1);
    for (std::int64_t i = 0; i < n; ++i) {
      const float* p = probs.f32() + i * a;
      float acc = 0.f;
      for (std::int64_t j = 0; j < a; ++j) c[static_cast<std::size_t>(j)] = acc += p[j];
      for (std::int64_t k = k0; k < k1; ++k) {
        const float u = r[static_cast<std::size_t>(k - k0)].uniform();
        std::int32_t below = 0;
        for (std::int64_t j = 0; j < a; ++j) below += u < c[static_cast<std::size_t>(j)] ? 0 : 1;
        o[static_cast<std::size_t>(k)][i] = detail::last_with_mass(p, std::min(below, static_cast<std::int32_t>(a - 1)));
      }
    }
    std::copy(r.begin(), r.end(), rngs.begin() + k0);
  }
  return out;
}

// One action per row, drawn from softmax(logits[row]) with rng. i32 [n].
inline Tensor sample_categorical(const Tensor& logits, Rng& rng) {
  return sample_from_probs(categorical_probs(logits), rng);
}

// x[i, index[i]] for each row of x [n, a]: [n]. With x = log_softmax(logits) this is
// categorical_log_prob, sharing one log-softmax among several action sets (the GO policy's samples).
inline Variable pick_columns(const Variable& x, const Tensor& index) {
  const Tensor& v = x.value();
  GO_CHECK(v.rank() == 2 && v.dtype() == DType::f32, "pick_columns needs f32 [n, a], got ", v.describe());
  const std::int64_t n = v.dim(0), a = v.dim(1);
  GO_CHECK(index.dtype() == DType::i32 && index.numel() == n, "pick_columns: index ", index.describe(),
           " must be i32 with one entry per row of ", v.shape().to_string());
  const std::int32_t* idx = index.data<std::int32_t>();
  for (std::int64_t i = 0; i < n; ++i)
    GO_CHECK(idx[i] >= 0 && idx[i] < a, "pick_columns: index ", idx[i], " of row ", i, " out of range [0, ", a, ")");
  Tensor out = Tensor::empty(Shape{n});
  for (std::int64_t i = 0; i < n; ++i) out.f32()[i] = v.f32()[i * a + idx[i]];
  return Variable::make(std::move(out), {x}, [index](std::vector<Variable>& in, const Tensor& g) {
    if (!in[0].requires_grad()) return;
    const std::int64_t n = in[0].dim(0), a = in[0].dim(1);
    bool acc = false;
    Tensor& d = in[0].grad_slot(acc);  // written in place: no [n, a] temporary per pick
    if (!acc) std::memset(d.f32(), 0, static_cast<std::size_t>(n * a) * sizeof(float));
    const std::int32_t* idx = index.data<std::int32_t>();
    for (std::int64_t i = 0; i < n; ++i) d.f32()[i * a + idx[i]] += g.f32()[i];
  });
}

// The most likely action of each row (first on ties). i32 [n].
inline Tensor argmax_rows(const Tensor& logits) {
  detail::check_logits(logits, "argmax_rows");
  const std::int64_t n = logits.dim(0), a = logits.dim(1);
  Tensor out = Tensor::empty(Shape{n}, DType::i32);
  for (std::int64_t i = 0; i < n; ++i) {
    const float* l = logits.f32() + i * a;
    std::int64_t best = 0;
    for (std::int64_t j = 1; j < a; ++j)
      if (l[j] > l[best]) best = j;
    out.data<std::int32_t>()[i] = static_cast<std::int32_t>(best);
  }
  return out;
}

// log softmax(logits)[i, actions[i]] for each row: [n].
inline Variable categorical_log_prob(const Variable& logits, const Tensor& actions) {
  detail::check_logits(logits.value(), "categorical_log_prob");
  const std::int64_t n = logits.dim(0), a = logits.dim(1);
  GO_CHECK(actions.dtype() == DType::i32 && actions.numel() == n, "categorical_log_prob: actions ",
           actions.describe(), " must be i32 with one entry per row of ", logits.shape().to_string());
  const std::int32_t* act = actions.data<std::int32_t>();
  for (std::int64_t i = 0; i < n; ++i)
    GO_CHECK(act[i] >= 0 && act[i] < a, "categorical_log_prob: action ", act[i], " of row ", i,
             " out of range [0, ", a, ")");
  Tensor lsm = Tensor::empty(logits.shape());
  kernels::softmax_forward(logits.value().f32(), lsm.f32(), n, a, true);
  Tensor out = Tensor::empty(Shape{n});
  for (std::int64_t i = 0; i < n; ++i) out.f32()[i] = lsm.f32()[i * a + act[i]];
  return Variable::make(std::move(out), {logits}, [lsm, actions](std::vector<Variable>& in, const Tensor& g) {
    // d log p_k / d z_j = [j == k] - p_j.
    const std::int64_t n = lsm.dim(0), a = lsm.dim(1);
    Tensor d = Tensor::empty(lsm.shape());
    const std::int32_t* act = actions.data<std::int32_t>();
#pragma omp parallel for if (n * a > (1 << 15))
    for (std::int64_t i = 0; i < n; ++i) {
      for (std::int64_t j = 0; j < a; ++j)
        d.f32()[i * a + j] = g.f32()[i] * ((j == act[i] ? 1.f : 0.f) - std::exp(lsm.f32()[i * a + j]));
    }
    in[0].add_grad(d);
  });
}

// Entropy -sum_j p_j log p_j of each row: [n].
inline Variable categorical_entropy(const Variable& logits) {
  detail::check_logits(logits.value(), "categorical_entropy");
  const std::int64_t n = logits.dim(0), a = logits.dim(1);
  Tensor lsm = Tensor::empty(logits.shape());
  kernels::softmax_forward(logits.value().f32(), lsm.f32(), n, a, true);
  Tensor out = Tensor::empty(Shape{n});
  for (std::int64_t i = 0; i < n; ++i) {
    double h = 0;
    for (std::int64_t j = 0; j < a; ++j) {
      const float l = lsm.f32()[i * a + j];
      if (std::isfinite(l)) h -= std::exp(static_cast<double>(l)) * l;
    }
    out.f32()[i] = static_cast<float>(h);
  }
  return Variable::make(out, {logits}, [lsm, out](std::vector<Variable>& in, const Tensor& g) {
    // dH/dz_j = -p_j (log p_j + H).
    const std::int64_t n = lsm.dim(0), a = lsm.dim(1);
    Tensor d = Tensor::empty(lsm.shape());
#pragma omp parallel for if (n * a > (1 << 15))
    for (std::int64_t i = 0; i < n; ++i) {
      for (std::int64_t j = 0; j < a; ++j) {
        const float l = lsm.f32()[i * a + j];
        const float p = std::exp(l);
        d.f32()[i * a + j] = p == 0.f ? 0.f : -g.f32()[i] * p * (l + out.f32()[i]);
      }
    }
    in[0].add_grad(d);
  });
}

}  // namespace go
