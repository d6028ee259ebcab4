// Segment-recurrent multi-head attention: the fused kernels against a naive
// double-precision reference that materialises every score with the visibility
// rule, the backward against an analytic naive backward and against finite
// differences through the autograd op, and the properties of the segment
// recurrence (stop-gradient memory, causal invariance to seg_len).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "go/autograd/attention.hpp"
#include "harness.hpp"

namespace test_attention {
namespace {

using go::Shape;
using go::Tensor;
using go::Variable;
using go::kernels::SegAttention;

struct Cfg {
  std::int64_t n;
  int heads, head_dim;
  std::int64_t seg, mem;
  bool causal;
  float scale = 0.f;
};

std::string describe(const Cfg& c) {
  std::ostringstream os;
  os << "n=" << c.n << " heads=" << c.heads << " head_dim=" << c.head_dim << " seg_len=" << c.seg
     << " mem_len=" << c.mem << " causal=" << c.causal << " scale=" << c.scale;
  return os.str();
}

SegAttention params_of(const Cfg& c) {
  SegAttention p;
  p.n = c.n;
  p.heads = c.heads;
  p.head_dim = c.head_dim;
  p.seg_len = c.seg;
  p.mem_len = c.mem;
  p.causal = c.causal;
  p.scale = c.scale;
  return p;
}

double scale_of(const Cfg& c) { return c.scale != 0.f ? c.scale : 1.0 / std::sqrt(static_cast<double>(c.head_dim)); }

// Keys visible to query i: [lo, hi). `own` is the first key row of i's segment.
struct Visible {
  std::int64_t lo, hi, own;
};
Visible visible(const Cfg& c, std::int64_t i) {
  const std::int64_t b = i / c.seg * c.seg, e = std::min(c.n, b + c.seg);
  return {std::max<std::int64_t>(0, b - c.mem), c.causal ? i + 1 : e, b};
}

// Probabilities of query i (head h) over its visible keys, in double; also the lse.
std::vector<double> probs(const Cfg& c, const Tensor& q, const Tensor& k, std::int64_t i, int h, double* lse) {
  const std::int64_t ld = static_cast<std::int64_t>(c.heads) * c.head_dim,
                     hc = static_cast<std::int64_t>(h) * c.head_dim;
  const Visible vis = visible(c, i);
  std::vector<double> s;
  double mx = -INFINITY;
  for (std::int64_t j = vis.lo; j < vis.hi; ++j) {
    double dot = 0;
    for (int x = 0; x < c.head_dim; ++x)
      dot += static_cast<double>(q.f32()[i * ld + hc + x]) * k.f32()[j * ld + hc + x];
    s.push_back(dot * scale_of(c));
    mx = std::max(mx, s.back());
  }
  double sum = 0;
  for (double& x : s) sum += (x = std::exp(x - mx));
  for (double& x : s) x /= sum;
  if (lse) *lse = mx + std::log(sum);
  return s;
}

struct RefForward {
  std::vector<double> out, lse;  // [n, heads*head_dim], [heads, n]
};

RefForward ref_forward(const Cfg& c, const Tensor& q, const Tensor& k, const Tensor& v) {
  const std::int64_t ld = static_cast<std::int64_t>(c.heads) * c.head_dim;
  RefForward r{std::vector<double>(static_cast<std::size_t>(c.n * ld), 0.0),
               std::vector<double>(static_cast<std::size_t>(c.n * c.heads), 0.0)};
  for (int h = 0; h < c.heads; ++h)
    for (std::int64_t i = 0; i < c.n; ++i) {
      const std::int64_t hc = static_cast<std::int64_t>(h) * c.head_dim;
      const std::vector<double> p = probs(c, q, k, i, h, &r.lse[h * c.n + i]);
      const Visible vis = visible(c, i);
      for (std::int64_t j = vis.lo; j < vis.hi; ++j)
        for (int x = 0; x < c.head_dim; ++x) r.out[i * ld + hc + x] += p[j - vis.lo] * v.f32()[j * ld + hc + x];
    }
  return r;
}

struct RefGrads {
  std::vector<double> dq, dk, dv;
};

// Naive analytic backward: dS = P o (dP - D), memory rows (j < own) are stop-gradient.
RefGrads ref_backward(const Cfg& c, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout) {
  const std::int64_t ld = static_cast<std::int64_t>(c.heads) * c.head_dim;
  const std::size_t sz = static_cast<std::size_t>(c.n * ld);
  RefGrads g{std::vector<double>(sz, 0.0), std::vector<double>(sz, 0.0), std::vector<double>(sz, 0.0)};
  const double scale = scale_of(c);
  for (int h = 0; h < c.heads; ++h)
    for (std::int64_t i = 0; i < c.n; ++i) {
      const std::int64_t hc = static_cast<std::int64_t>(h) * c.head_dim;
      const std::vector<double> p = probs(c, q, k, i, h, nullptr);
      const Visible vis = visible(c, i);
      std::vector<double> dp(p.size());
      double dsum = 0;
      for (std::int64_t j = vis.lo; j < vis.hi; ++j) {
        double x = 0;
        for (int t = 0; t < c.head_dim; ++t)
          x += static_cast<double>(dout.f32()[i * ld + hc + t]) * v.f32()[j * ld + hc + t];
        dp[j - vis.lo] = x;
        dsum += p[j - vis.lo] * x;
      }
      for (std::int64_t j = vis.lo; j < vis.hi; ++j) {
        const double pj = p[j - vis.lo], ds = pj * (dp[j - vis.lo] - dsum) * scale;
        for (int t = 0; t < c.head_dim; ++t) {
          g.dq[i * ld + hc + t] += ds * k.f32()[j * ld + hc + t];
          if (j >= vis.own) {
            g.dk[j * ld + hc + t] += ds * q.f32()[i * ld + hc + t];
            g.dv[j * ld + hc + t] += pj * dout.f32()[i * ld + hc + t];
          }
        }
      }
    }
  return g;
}

// |got - want| <= atol + rtol * |want| elementwise, atol relative to the largest |want| (at least 1).
void require_close_ref(const Tensor& got, const std::vector<double>& want, double rtol, double atol,
                       const std::string& what) {
  INFO(what);
  REQUIRE(static_cast<std::size_t>(got.numel()) == want.size());
  double wmax = 1.0;
  for (double w : want) wmax = std::max(wmax, std::abs(w));
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double g = got.f32()[i];
    if (!(std::abs(g - want[i]) <= atol * wmax + rtol * std::abs(want[i]))) {
      std::ostringstream os;
      os << what << ": element " << i << " of " << got.shape().to_string() << " is " << g << ", expected " << want[i];
      FAIL(os.str());
    }
  }
}

Tensor rand(const Shape& s, std::uint64_t seed, float lo = -1.f, float hi = 1.f) {
  go::Rng rng(seed);
  return Tensor::uniform(s, rng, lo, hi);
}

// Configurations covering the edge cases of the kernel: ragged last segment,
// n = 0 and 1, mem_len = 0, mem_len >= n, seg_len = 1, seg_len > n, several query
// and key blocks (> 64), head_dim not a multiple of 16 (and > 64: several column
// chunks), heads > 1.
std::vector<Cfg> edge_configs() {
  std::vector<Cfg> base = {
      {0, 2, 8, 4, 4, false},       {1, 1, 4, 128, 128, false},    {1, 1, 4, 1, 0, false},
      {37, 2, 8, 8, 5, false},      {37, 1, 16, 1, 0, false},      {37, 1, 16, 1, 3, false},
      {50, 3, 5, 7, 0, false},      {100, 2, 17, 16, 200, false},  {130, 1, 33, 130, 0, false},
      {200, 2, 24, 150, 64, false}, {300, 1, 80, 128, 128, false}, {257, 4, 64, 100, 37, false},
      {70, 2, 1, 10, 10, false},    {20, 1, 130, 6, 4, false},     {150, 1, 16, 1000, 0, false},
      {90, 2, 32, 64, 64, false},   {129, 1, 48, 65, 65, false},
  };
  std::vector<Cfg> all;
  for (Cfg c : base) {
    all.push_back(c);
    c.causal = true;
    all.push_back(c);
  }
  all.push_back({60, 2, 12, 16, 8, false, 0.3f});
  all.push_back({60, 2, 12, 16, 8, true, 1.7f});
  return all;
}

}  // namespace

TEST_CASE("seg_attention forward matches a naive reference (out and lse)", "[attention]") {
  for (const Cfg& c : edge_configs()) {
    for (std::uint64_t seed : {1u, 2u, 3u}) {
      INFO(describe(c) << " seed=" << seed);
      const Shape s{c.n, static_cast<std::int64_t>(c.heads) * c.head_dim};
      const Tensor q = rand(s, seed * 31 + 1, -2.f, 2.f), k = rand(s, seed * 31 + 2, -2.f, 2.f),
                   v = rand(s, seed * 31 + 3);
      const go::SegAttentionOutput got = go::seg_attention_forward(q, k, v, params_of(c));
      REQUIRE(got.out.shape() == s);
      REQUIRE(got.lse.shape() == Shape({c.heads, c.n}));
      const RefForward want = ref_forward(c, q, k, v);
      require_close_ref(got.out, want.out, 1e-4, 2e-6, "out");
      require_close_ref(got.lse, want.lse, 2e-6, 2e-6, "lse");
    }
  }
}

TEST_CASE("seg_attention is stable with large scores (online softmax rescaling)", "[attention]") {
  // Scores of several hundred: exp overflows without the running max; keys in later
  // tiles beat earlier maxima, so the accumulator must be rescaled correctly.
  for (const Cfg& c :
       std::vector<Cfg>{{200, 2, 24, 150, 100, false}, {200, 2, 24, 150, 100, true}, {130, 1, 16, 130, 0, false}}) {
    INFO(describe(c));
    const Shape s{c.n, static_cast<std::int64_t>(c.heads) * c.head_dim};
    const Tensor q = rand(s, 91, -12.f, 12.f), k = rand(s, 92, -12.f, 12.f), v = rand(s, 93);
    const go::SegAttentionOutput got = go::seg_attention_forward(q, k, v, params_of(c));
    const RefForward want = ref_forward(c, q, k, v);
    double lmax = 0;
    for (double x : want.lse) lmax = std::max(lmax, std::abs(x));
    REQUIRE(lmax > 100);  // the test really exercises large scores
    require_close_ref(got.out, want.out, 1e-3, 1e-4, "out");
    require_close_ref(got.lse, want.lse, 1e-5, 1e-6, "lse");
  }
}

TEST_CASE("seg_attention lse is the log of each query's softmax normaliser", "[attention]") {
  const Cfg c{80, 2, 20, 24, 10, true};
  const Shape s{c.n, 40};
  const Tensor q = rand(s, 5, -3.f, 3.f), k = rand(s, 6, -3.f, 3.f), v = rand(s, 7);
  const go::SegAttentionOutput got = go::seg_attention_forward(q, k, v, params_of(c));
  // sum_j exp(scale q.k_j - lse) over the visible keys is 1 for every query and head.
  for (int h = 0; h < c.heads; ++h)
    for (std::int64_t i = 0; i < c.n; ++i) {
      const Visible vis = visible(c, i);
      double total = 0;
      for (std::int64_t j = vis.lo; j < vis.hi; ++j) {
        double dot = 0;
        for (int x = 0; x < c.head_dim; ++x) dot += double(q.at(i, h * 20 + x)) * k.at(j, h * 20 + x);
        total += std::exp(dot * scale_of(c) - got.lse.at(h, i));
      }
      INFO("head " << h << " query " << i);
      REQUIRE(total == Approx(1.0).epsilon(1e-5));
    }
}

TEST_CASE("seg_attention with seg_len 1 and no memory returns v and lse = scale q.k", "[attention]") {
  const Cfg c{33, 3, 7, 1, 0, false};
  const Shape s{c.n, 21};
  const Tensor q = rand(s, 11), k = rand(s, 12), v = rand(s, 13);
  const go::SegAttentionOutput got = go::seg_attention_forward(q, k, v, params_of(c));
  for (std::int64_t i = 0; i < v.numel(); ++i) REQUIRE(got.out.f32()[i] == v.f32()[i]);
  for (int h = 0; h < 3; ++h)
    for (std::int64_t i = 0; i < c.n; ++i) {
      double dot = 0;
      for (int x = 0; x < 7; ++x) dot += double(q.at(i, h * 7 + x)) * k.at(i, h * 7 + x);
      REQUIRE(got.lse.at(h, i) == Approx(dot / std::sqrt(7.0)).margin(1e-6));
    }
}

TEST_CASE("causal seg_attention with memory covering the graph does not depend on seg_len", "[attention]") {
  for (int head_dim : {8, 19}) {
    const std::int64_t n = 150;
    const Shape s{n, 2 * head_dim};
    const Tensor q = rand(s, 21, -2.f, 2.f), k = rand(s, 22, -2.f, 2.f), v = rand(s, 23);
    const Cfg full{n, 2, head_dim, n, n, true};
    const go::SegAttentionOutput ref = go::seg_attention_forward(q, k, v, params_of(full));
    for (std::int64_t seg : {1, 2, 5, 16, 63, 64, 65, 100, 149, 1000}) {
      for (std::int64_t mem : {n, 10 * n}) {
        INFO("head_dim=" << head_dim << " seg_len=" << seg << " mem_len=" << mem);
        const go::SegAttentionOutput got =
            go::seg_attention_forward(q, k, v, params_of({n, 2, head_dim, seg, mem, true}));
        go::test::require_close(got.out, ref.out, 1e-5, 1e-6, "out");
        go::test::require_close(got.lse, ref.lse, 1e-6, 1e-5, "lse");
      }
    }
    // Without causal, a query of an early segment does not see the later rows, so seg_len matters.
    const go::SegAttentionOutput a = go::seg_attention_forward(q, k, v, params_of({n, 2, head_dim, 16, n, false}));
    const go::SegAttentionOutput b = go::seg_attention_forward(q, k, v, params_of({n, 2, head_dim, n, n, false}));
    double diff = 0;
    for (std::int64_t i = 0; i < a.out.numel(); ++i)
      diff = std::max<double>(diff, std::abs(a.out.f32()[i] - b.out.f32()[i]));
    REQUIRE(diff > 1e-2);
  }
}

TEST_CASE("seg_attention backward kernel matches a naive analytic backward", "[attention]") {
  std::vector<Cfg> cfgs = {
      {37, 2, 8, 8, 5, false},     {100, 2, 17, 16, 200, false},  {200, 2, 24, 150, 64, false},
      {130, 1, 33, 130, 0, false}, {300, 1, 80, 128, 128, false}, {37, 1, 16, 1, 3, false},
      {20, 1, 130, 6, 4, false},   {70, 2, 1, 10, 10, false},     {129, 1, 48, 65, 65, false},
      {1, 1, 4, 128, 128, false},  {0, 2, 8, 4, 4, false},        {60, 2, 12, 16, 8, false, 0.3f},
  };
  const std::size_t base = cfgs.size();
  for (std::size_t i = 0; i < base; ++i) {
    Cfg c = cfgs[i];
    c.causal = true;
    cfgs.push_back(c);
  }
  for (const Cfg& c : cfgs) {
    for (std::uint64_t seed : {4u, 5u}) {
      INFO(describe(c) << " seed=" << seed);
      const Shape s{c.n, static_cast<std::int64_t>(c.heads) * c.head_dim};
      const Tensor q = rand(s, seed * 17 + 1, -2.f, 2.f), k = rand(s, seed * 17 + 2, -2.f, 2.f),
                   v = rand(s, seed * 17 + 3), dout = rand(s, seed * 17 + 4);
      const go::kernels::SegAttention p = params_of(c);
      const go::SegAttentionOutput fwd = go::seg_attention_forward(q, k, v, p);
      const go::SegAttentionGrads got = go::seg_attention_backward(q, k, v, fwd.out, fwd.lse, dout, p);
      const RefGrads want = ref_backward(c, q, k, v, dout);
      require_close_ref(got.dq, want.dq, 1e-4, 1e-5, "dq");
      require_close_ref(got.dk, want.dk, 1e-4, 1e-5, "dk");
      require_close_ref(got.dv, want.dv, 1e-4, 1e-5, "dv");
    }
  }
}

TEST_CASE("seg_attention gradients match finite differences through the autograd op", "[attention]") {
  go::test::GradCheckOptions opt;
  // Without memory the op is an ordinary function of q, k and v: plain finite differences
  // through the generic harness, for every input.
  for (const Cfg& c : std::vector<Cfg>{{7, 2, 3, 3, 0, false},
                                       {7, 2, 3, 3, 0, true},
                                       {9, 1, 4, 4, 0, true},
                                       {6, 1, 5, 1, 0, false},
                                       {8, 2, 2, 8, 0, false},
                                       {11, 1, 17, 5, 0, true}}) {
    INFO(describe(c));
    const SegAttention p = params_of(c);
    const Shape s{c.n, static_cast<std::int64_t>(c.heads) * c.head_dim};
    go::test::check_gradients(
        [&](const std::vector<Variable>& in) { return go::seg_attention(in[0], in[1], in[2], p); },
        {rand(s, 41), rand(s, 42), rand(s, 43)}, opt);
    // Self-attention: one variable used as q, k and v accumulates three gradients.
    go::test::check_gradients(
        [&](const std::vector<Variable>& in) { return go::seg_attention(in[0], in[0], in[0], p); }, {rand(s, 44)}, opt);
  }
  // With memory, q's gradient is still the plain derivative (a query row affects only its own output).
  for (const Cfg& c : std::vector<Cfg>{{7, 2, 3, 3, 2, false}, {10, 1, 3, 4, 100, true}, {6, 1, 5, 1, 2, false}}) {
    INFO(describe(c));
    const SegAttention p = params_of(c);
    const Shape s{c.n, static_cast<std::int64_t>(c.heads) * c.head_dim};
    go::test::check_gradients(
        [&](const std::vector<Variable>& in) { return go::seg_attention(in[0], in[1], in[2], p); },
        {rand(s, 45), rand(s, 46), rand(s, 47)}, opt, {true, false, false});
  }
}

TEST_CASE("seg_attention k/v gradients with memory are the finite differences of their own segment's loss",
          "[attention]") {
  // Stop-gradient semantics: a key/value row j of segment s gets d(loss of segment s's
  // outputs)/d row j; its use as memory by later segments contributes nothing. Finite
  // differences restricted to the outputs of the row's own segment check exactly that.
  for (const Cfg& c : std::vector<Cfg>{
           {7, 2, 3, 3, 2, false}, {10, 1, 3, 4, 100, true}, {9, 1, 4, 2, 3, true}, {6, 1, 5, 1, 2, false}}) {
    INFO(describe(c));
    const SegAttention p = params_of(c);
    const std::int64_t cols = static_cast<std::int64_t>(c.heads) * c.head_dim;
    const Shape s{c.n, cols};
    const Tensor q0 = rand(s, 81), k0 = rand(s, 82), v0 = rand(s, 83), w = rand(s, 84);
    Variable q(q0.clone(), true), k(k0.clone(), true), v(v0.clone(), true);
    go::seg_attention(q, k, v, p).backward(w);
    auto seg_loss = [&](const Tensor& kk, const Tensor& vv, std::int64_t seg) {
      const Tensor o = go::seg_attention_forward(q0, kk, vv, p).out;
      double l = 0;
      for (std::int64_t i = seg * c.seg; i < std::min(c.n, (seg + 1) * c.seg); ++i)
        for (std::int64_t x = 0; x < cols; ++x) l += double(o.at(i, x)) * w.at(i, x);
      return l;
    };
    const double eps = 1e-3;
    for (int which = 0; which < 2; ++which) {
      Tensor numeric = Tensor::zeros(s);
      for (std::int64_t j = 0; j < c.n; ++j)
        for (std::int64_t x = 0; x < cols; ++x) {
          Tensor up = (which ? v0 : k0).clone(), down = up.clone();
          up.at(j, x) += static_cast<float>(eps);
          down.at(j, x) -= static_cast<float>(eps);
          const std::int64_t seg = j / c.seg;
          const double d =
              which ? seg_loss(k0, up, seg) - seg_loss(k0, down, seg) : seg_loss(up, v0, seg) - seg_loss(down, v0, seg);
          numeric.at(j, x) = static_cast<float>(d / (2 * eps));
        }
      go::test::require_close(which ? v.grad() : k.grad(), numeric, 2e-2, 2e-3, which ? "dv" : "dk");
    }
  }
}

TEST_CASE("seg_attention memory rows are stop-gradient", "[attention]") {
  // 3 segments of 4 rows, memory of 4 rows: segment 2 (rows 8..11) reads rows 4..7 as memory.
  const Cfg c{12, 1, 4, 4, 4, false};
  const SegAttention p = params_of(c);
  const Shape s{12, 4};
  const Tensor q0 = rand(s, 51), k0 = rand(s, 52), v0 = rand(s, 53);
  // The loss reads only segment 2's output.
  Tensor w = Tensor::zeros(s);
  {
    go::Rng rng(54);
    for (std::int64_t i = 8; i < 12; ++i)
      for (int x = 0; x < 4; ++x) w.at(i, x) = rng.uniform(-1.f, 1.f);
  }
  Variable q(q0.clone(), true), k(k0.clone(), true), v(v0.clone(), true);
  Variable out = go::seg_attention(q, k, v, p);
  out.backward(w);
  for (std::int64_t j = 0; j < 8; ++j)
    for (int x = 0; x < 4; ++x) {
      INFO("row " << j << " column " << x);
      REQUIRE(k.grad().at(j, x) == 0.f);
      REQUIRE(v.grad().at(j, x) == 0.f);
      REQUIRE(q.grad().at(j, x) == 0.f);
    }
  double own = 0;
  for (std::int64_t j = 8; j < 12; ++j)
    for (int x = 0; x < 4; ++x) own += std::abs(k.grad().at(j, x)) + std::abs(v.grad().at(j, x));
  REQUIRE(own > 1e-3);
  // The memory is really read: the loss changes with the memory rows' keys and values,
  // so the zero gradient above is the stop-gradient, not an absence of dependence.
  auto loss = [&](const Tensor& kk, const Tensor& vv) {
    const go::SegAttentionOutput o = go::seg_attention_forward(q0, kk, vv, p);
    double l = 0;
    for (std::int64_t i = 0; i < o.out.numel(); ++i) l += double(o.out.f32()[i]) * w.f32()[i];
    return l;
  };
  const double l0 = loss(k0, v0);
  for (std::int64_t j = 4; j < 8; ++j) {
    Tensor v1 = v0.clone();
    v1.at(j, 0) += 0.5f;
    Tensor k1 = k0.clone();
    k1.at(j, 1) += 0.5f;
    INFO("memory row " << j);
    REQUIRE(std::abs(loss(k0, v1) - l0) > 1e-4);
    REQUIRE(std::abs(loss(k1, v0) - l0) > 1e-6);
  }
  // Rows outside the window (0..3) do not influence segment 2 at all.
  Tensor v2 = v0.clone();
  v2.at(1, 0) += 0.5f;
  REQUIRE(loss(k0, v2) == l0);
}

TEST_CASE("seg_attention on a larger graph: threads, determinism, both passes", "[attention]") {
  const Cfg c{1000, 4, 32, 128, 128, false};
  const Shape s{c.n, 128};
  const Tensor q = rand(s, 61), k = rand(s, 62), v = rand(s, 63), dout = rand(s, 64);
  const SegAttention p = params_of(c);
  const go::SegAttentionOutput a = go::seg_attention_forward(q, k, v, p);
  const go::SegAttentionOutput b = go::seg_attention_forward(q, k, v, p);
  for (std::int64_t i = 0; i < a.out.numel(); ++i) REQUIRE(a.out.f32()[i] == b.out.f32()[i]);
  const RefForward want = ref_forward(c, q, k, v);
  require_close_ref(a.out, want.out, 1e-4, 2e-6, "out");
  require_close_ref(a.lse, want.lse, 2e-6, 2e-6, "lse");
  const go::SegAttentionGrads g = go::seg_attention_backward(q, k, v, a.out, a.lse, dout, p);
  const RefGrads wg = ref_backward(c, q, k, v, dout);
  require_close_ref(g.dq, wg.dq, 1e-4, 1e-5, "dq");
  require_close_ref(g.dk, wg.dk, 1e-4, 1e-5, "dk");
  require_close_ref(g.dv, wg.dv, 1e-4, 1e-5, "dv");
}

TEST_CASE("seg_attention records no graph without gradients and only needed inputs get gradients", "[attention]") {
  const Cfg c{10, 1, 4, 4, 4, true};
  const Shape s{10, 4};
  Variable q(rand(s, 71), true), k(rand(s, 72), false), v(rand(s, 73), true);
  {
    go::NoGradGuard guard;
    REQUIRE_FALSE(go::seg_attention(q, k, v, params_of(c)).requires_grad());
  }
  Variable out = go::seg_attention(q, k, v, params_of(c));
  REQUIRE(out.requires_grad());
  out.backward(Tensor::ones(s));
  REQUIRE(q.has_grad());
  REQUIRE(v.has_grad());
  REQUIRE_FALSE(k.has_grad());
  // The output of the autograd op equals the tensor-level forward.
  go::test::require_close(out.value(), go::seg_attention_forward(q.value(), k.value(), v.value(), params_of(c)).out, 0,
                          0, "autograd out");
}

TEST_CASE("seg_attention rejects bad shapes, dtypes and parameters with messages naming them", "[attention]") {
  using Catch::Contains;
  SegAttention p;
  p.heads = 2;
  p.head_dim = 4;
  p.seg_len = 4;
  p.mem_len = 4;
  const Tensor a = rand({5, 8}, 1), b = rand({6, 8}, 2);
  REQUIRE_THROWS_AS(go::seg_attention_forward(a, a, b, p), go::Error);
  REQUIRE_THROWS_WITH(go::seg_attention_forward(a, a, b, p),
                      Contains("[6, 8]") && Contains("[5, 8]") && Contains("same shape"));
  REQUIRE_THROWS_WITH(go::seg_attention_forward(a, b, a, p), Contains("k [6, 8]"));
  SegAttention p3 = p;
  p3.heads = 3;
  REQUIRE_THROWS_WITH(go::seg_attention_forward(a, a, a, p3),
                      Contains("[5, 8]") && Contains("heads * head_dim") && Contains("3 * 4 = 12"));
  const Tensor r1 = rand({40}, 3);
  REQUIRE_THROWS_WITH(go::seg_attention_forward(r1, r1, r1, p), Contains("[40]") && Contains("matrix"));
  const Tensor ints = Tensor::zeros({5, 8}, go::DType::i32);
  REQUIRE_THROWS_WITH(go::seg_attention_forward(ints, a, a, p), Contains("f32") && Contains("i32"));
  SegAttention p0 = p;
  p0.seg_len = 0;
  REQUIRE_THROWS_WITH(go::seg_attention_forward(a, a, a, p0), Contains("seg_len = 0"));
  SegAttention pm = p;
  pm.mem_len = -1;
  REQUIRE_THROWS_WITH(go::seg_attention_forward(a, a, a, pm), Contains("mem_len = -1"));
  SegAttention pn = p;
  pn.n = 7;
  REQUIRE_THROWS_WITH(go::seg_attention_forward(a, a, a, pn), Contains("params.n = 7") && Contains("[5, 8]"));
  pn.n = 5;  // a matching n is accepted
  REQUIRE_NOTHROW(go::seg_attention_forward(a, a, a, pn));
  // The autograd op checks too.
  REQUIRE_THROWS_WITH(go::seg_attention(Variable(a), Variable(b), Variable(a), p), Contains("[6, 8]"));
  // The backward checks the saved tensors.
  const go::SegAttentionOutput f = go::seg_attention_forward(a, a, a, p);
  REQUIRE_THROWS_WITH(go::seg_attention_backward(a, a, a, f.out, rand({5, 2}, 4), a, p),
                      Contains("lse [5, 2]") && Contains("[2, 5]"));
  REQUIRE_THROWS_WITH(go::seg_attention_backward(a, a, a, f.out, f.lse, b, p), Contains("dout [6, 8]"));
  // The raw kernel validates its parameters as well.
  SegAttention bad = p;
  bad.n = 5;
  bad.heads = 0;
  REQUIRE_THROWS_WITH(go::kernels::seg_attention_forward(bad, a.f32(), a.f32(), a.f32(), nullptr, nullptr),
                      Contains("heads = 0"));
}

}  // namespace test_attention
