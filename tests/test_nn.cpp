// go/nn: fused ops against compositions of the generic autograd ops, their
// gradients against finite differences, and the layers built from them.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "go/autograd/autograd.hpp"
#include "go/nn/functional.hpp"
#include "go/nn/graph_sage.hpp"
#include "go/nn/layers.hpp"
#include "go/nn/segment_attention.hpp"
#include "go/nn/superposition.hpp"
#include "harness.hpp"

namespace test_nn {
using namespace go;
using go::test::check_gradients;
using go::test::random_tensor;
using go::test::require_close;

namespace {

CsrPair random_dag(std::int64_t n, Rng& rng, bool reverse) {
  std::vector<std::int32_t> dst, src;
  for (std::int64_t i = 1; i < n; ++i) {
    const int k = 1 + static_cast<int>(rng.uniform_int(3));
    for (int j = 0; j < k; ++j) {
      const auto p = static_cast<std::int32_t>(rng.uniform_int(static_cast<std::uint64_t>(i)));
      dst.push_back(static_cast<std::int32_t>(i));
      src.push_back(p);
    }
  }
  return reverse ? CsrPair::from_edges(n, n, src, dst) : CsrPair::from_edges(n, n, dst, src);
}

}  // namespace

TEST_CASE("nn::linear matches matmul + bias + activation, with several inputs", "[nn]") {
  Rng rng(1);
  for (nn::Activation act : {nn::Activation::none, nn::Activation::relu, nn::Activation::gelu}) {
    INFO("activation " << nn::activation_name(act));
    const Tensor x1 = random_tensor(Shape{9, 5}, rng), x2 = random_tensor(Shape{9, 3}, rng);
    const Tensor W = random_tensor(Shape{8, 6}, rng), b = random_tensor(Shape{1, 6}, rng);
    Variable y = nn::linear({Variable(x1), Variable(x2)}, Variable(W), Variable(b), act);
    Variable ref = matmul(concat({Variable(x1), Variable(x2)}, 1), Variable(W)) + Variable(b);
    if (act == nn::Activation::relu) ref = relu(ref);
    if (act == nn::Activation::gelu) ref = gelu(ref);
    require_close(y.value(), ref.value(), 1e-5, 1e-5, "forward");
    check_gradients(
        [act](const std::vector<Variable>& v) { return nn::linear({v[0], v[1]}, v[2], v[3], act); },
        {x1, x2, W, b});
  }
  // no bias
  const Tensor x = random_tensor(Shape{4, 3}, rng), W = random_tensor(Shape{3, 2}, rng);
  check_gradients([](const std::vector<Variable>& v) { return nn::linear(v[0], v[1], Variable()); }, {x, W});
}

TEST_CASE("nn::add_same, mul_row and add_embedding: forward and gradients", "[nn]") {
  Rng rng(2);
  const Tensor a = random_tensor(Shape{7, 4}, rng), b = random_tensor(Shape{7, 4}, rng);
  require_close(nn::add_same(Variable(a), Variable(b)).value(), (Variable(a) + Variable(b)).value(), 0, 0, "add");
  check_gradients([](const std::vector<Variable>& v) { return nn::add_same(v[0], v[1]); }, {a, b});
  // the same variable on both sides accumulates
  check_gradients([](const std::vector<Variable>& v) { return nn::add_same(v[0], v[0]); }, {a});
  const Tensor g = random_tensor(Shape{1, 4}, rng);
  require_close(nn::mul_row(Variable(a), Variable(g)).value(), (Variable(a) * Variable(g)).value(), 0, 0, "mul_row");
  check_gradients([](const std::vector<Variable>& v) { return nn::mul_row(v[0], v[1]); }, {a, g});
  const Tensor table = random_tensor(Shape{3, 4}, rng);
  const Tensor ids = Tensor::from_vector(std::vector<std::int32_t>{0, 2, 2, 1, 0, 2, 1});
  require_close(nn::add_embedding(Variable(a), Variable(table), ids).value(),
                (Variable(a) + gather_rows(Variable(table), ids)).value(), 0, 0, "add_embedding");
  check_gradients([ids](const std::vector<Variable>& v) { return nn::add_embedding(v[0], v[1], ids); }, {a, table});
  CHECK_THROWS_WITH(nn::add_embedding(Variable(a), Variable(table), Tensor::from_vector(std::vector<std::int32_t>{0})),
                    Catch::Contains("one id per row"));
  CHECK_THROWS_WITH(nn::mul_row(Variable(a), Variable(b)), Catch::Contains("must be one row"));
  CHECK_THROWS_WITH(nn::linear(Variable(a), Variable(random_tensor(Shape{5, 2}, rng)), Variable()),
                    Catch::Contains("4 columns"));
}

TEST_CASE("nn::mlp_gelu equals two linears with gelu between, gradients included", "[nn]") {
  Rng rng(7);
  const Tensor x = random_tensor(Shape{6, 4}, rng), W1 = random_tensor(Shape{4, 7}, rng),
               b1 = random_tensor(Shape{1, 7}, rng), W2 = random_tensor(Shape{7, 3}, rng),
               b2 = random_tensor(Shape{1, 3}, rng);
  Variable y = nn::mlp_gelu(Variable(x), Variable(W1), Variable(b1), Variable(W2), Variable(b2));
  Variable ref = nn::linear(nn::linear(Variable(x), Variable(W1), Variable(b1), nn::Activation::gelu), Variable(W2),
                            Variable(b2));
  require_close(y.value(), ref.value(), 1e-5, 1e-5, "forward");
  check_gradients([](const std::vector<Variable>& v) { return nn::mlp_gelu(v[0], v[1], v[2], v[3], v[4]); },
                  {x, W1, b1, W2, b2});
  const Tensor r = random_tensor(Shape{6, 3}, rng);
  require_close(nn::mlp_gelu(Variable(x), Variable(W1), Variable(b1), Variable(W2), Variable(b2), Variable(r)).value(),
                (ref + Variable(r)).value(), 1e-5, 1e-5, "with a residual");
  check_gradients(
      [](const std::vector<Variable>& v) { return nn::mlp_gelu(v[0], v[1], v[2], v[3], v[4], v[5]); },
      {x, W1, b1, W2, b2, r});
  check_gradients([](const std::vector<Variable>& v) { return nn::linear(v[0], v[1], v[2], nn::Activation::none, v[3]); },
                  {x, random_tensor(Shape{4, 3}, rng), random_tensor(Shape{1, 3}, rng), r});
  CHECK_THROWS_WITH(nn::linear(Variable(x), Variable(W1), Variable(b1), nn::Activation::relu, Variable(x)),
                    Catch::Contains("without an activation"));
  CHECK_THROWS_WITH(nn::mlp_gelu(Variable(x), Variable(W2), Variable(b1), Variable(W2), Variable(b2)),
                    Catch::Contains("do not chain"));
}

// A kept graph (retain_graph) back-propagated again must see the same saved pre-activation and add
// the same gradients: the backward only reads it.
TEST_CASE("nn::mlp_gelu back-propagated twice through a kept graph, and once through a freed one", "[nn]") {
  Rng rng(11);
  const Tensor x = random_tensor(Shape{300, 8}, rng), W1 = random_tensor(Shape{8, 200}, rng),  // 60,000 > 2^15: parallel
      b1 = random_tensor(Shape{1, 200}, rng), W2 = random_tensor(Shape{200, 5}, rng), b2 = random_tensor(Shape{1, 5}, rng);
  auto grads = [&](bool twice) {
    std::vector<Variable> v{Variable(x, true), Variable(W1, true), Variable(b1, true), Variable(W2, true), Variable(b2, true)};
    Variable loss = sum(nn::mlp_gelu(v[0], v[1], v[2], v[3], v[4]) * nn::mlp_gelu(v[0], v[1], v[2], v[3], v[4]));
    CHECK_FALSE(retaining_graph());
    if (twice) loss.backward(true);
    CHECK_FALSE(retaining_graph());  // reset after the pass
    loss.backward();
    std::vector<Tensor> g;
    for (const Variable& p : v) g.push_back(p.grad().clone());
    return g;
  };
  const std::vector<Tensor> once = grads(false), two = grads(true);
  for (std::size_t i = 0; i < once.size(); ++i) {
    const float* a = once[i].f32();
    const float* b = two[i].f32();
    for (std::int64_t k = 0; k < once[i].numel(); ++k) REQUIRE(b[k] == 2.f * a[k]);  // exact: x + x = 2x
  }
}

TEST_CASE("nn::linear on large inputs (parallel paths) matches the generic ops", "[nn]") {
  Rng rng(3);
  const Tensor x = random_tensor(Shape{3000, 32}, rng), W = random_tensor(Shape{32, 48}, rng),
               b = random_tensor(Shape{1, 48}, rng);
  Variable xv(x, true), Wv(W, true), bv(b, true);
  Variable y = nn::linear(xv, Wv, bv, nn::Activation::gelu);
  Variable x2(x, true), W2(W, true), b2(b, true);
  Variable ref = gelu(matmul(x2, W2) + b2);
  require_close(y.value(), ref.value(), 1e-5, 1e-5, "forward");
  const Tensor seed = random_tensor(y.shape(), rng);
  y.backward(seed);
  ref.backward(seed);
  require_close(xv.grad(), x2.grad(), 1e-4, 1e-4, "dx");
  require_close(Wv.grad(), W2.grad(), 1e-4, 1e-3, "dW");
  require_close(bv.grad(), b2.grad(), 1e-4, 1e-3, "db");
}

TEST_CASE("GraphSage layer: max-pool aggregation over both directions, gradient check", "[nn]") {
  Rng rng(4);
  const std::int64_t n = 12, d = 6;
  const CsrPair preds = random_dag(n, rng, false);
  // successors: the transpose of the predecessor lists
  std::vector<std::int32_t> dst, src;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t e = preds.fwd.row_ptr.data<std::int64_t>()[i]; e < preds.fwd.row_ptr.data<std::int64_t>()[i + 1]; ++e) {
      dst.push_back(preds.fwd.col_idx.data<std::int32_t>()[e]);
      src.push_back(static_cast<std::int32_t>(i));
    }
  const CsrPair succs = CsrPair::from_edges(n, n, dst, src);
  nn::GraphSage sage(d, 2, rng);
  CHECK(sage.named_parameters().size() == 8);
  CHECK(sage.named_parameters()[0].first == "layer0.pool.weight");
  const Tensor h = random_tensor(Shape{n, d}, rng);
  Variable out = sage.forward(Variable(h), preds, succs);
  CHECK(out.shape() == Shape({n, d}));
  go::test::GradCheckOptions gopt;
  gopt.eps = 2e-4;  // a larger step crosses relu / max kinks of this draw
  check_gradients([&](const std::vector<Variable>& v) { return sage.forward(v[0], preds, succs); }, {h}, gopt);
  CHECK_THROWS_WITH(sage.forward(Variable(random_tensor(Shape{n + 1, d}, rng)), preds, succs),
                    Catch::Contains("does not match the graph"));
}

TEST_CASE("SegmentAttentionBlock: shapes, gate, gradient check", "[nn]") {
  Rng rng(5);
  nn::SegmentAttentionOptions o;
  o.dim = 8;
  o.heads = 2;
  o.seg_len = 4;
  o.mem_len = 4;
  o.causal = true;
  o.ffn_dim = 12;
  nn::SegmentAttentionBlock block(o, rng);
  const Tensor x = random_tensor(Shape{10, 8}, rng), gate = random_tensor(Shape{1, 8}, rng, 0.5f, 1.5f);
  CHECK(block.forward(Variable(x)).shape() == Shape({10, 8}));
  // Only gradients within a segment flow (the memory is stop-gradient), so check through inputs
  // whose effect the finite differences see the same way: a single segment.
  o.seg_len = 16;
  nn::SegmentAttentionBlock one(o, rng);
  check_gradients([&](const std::vector<Variable>& v) { return one.forward(v[0], v[1]); }, {x, gate});
  CHECK_THROWS_WITH(block.forward(Variable(random_tensor(Shape{3, 5}, rng))), Catch::Contains("must be [n, 8]"));
}

TEST_CASE("Superposition gates are 2 sigmoid(c W + b), differentiable in c", "[nn]") {
  Rng rng(6);
  nn::Superposition sp(5, 4, 3, rng);
  CHECK(sp.num_gates() == 3);
  const Tensor c = random_tensor(Shape{1, 5}, rng);
  Variable g = sp.gate(1, Variable(c));
  CHECK(g.shape() == Shape({1, 4}));
  for (int i = 0; i < 4; ++i) CHECK((g.value().f32()[i] > 0.f && g.value().f32()[i] < 2.f));
  check_gradients([&](const std::vector<Variable>& v) { return sp.gate(2, v[0]); }, {c});
  CHECK_THROWS_WITH(sp.gate(3, Variable(c)), Catch::Contains("out of range"));
}

TEST_CASE("seg_attention writes gradients in place or accumulates, matching the tensor-level backward", "[nn]") {
  Rng rng(8);
  kernels::SegAttention p;
  p.heads = 2;
  p.head_dim = 4;
  p.seg_len = 5;
  p.mem_len = 3;
  p.causal = true;
  const Tensor q = random_tensor(Shape{13, 8}, rng), k = random_tensor(Shape{13, 8}, rng),
               v = random_tensor(Shape{13, 8}, rng), seed = random_tensor(Shape{13, 8}, rng);
  const SegAttentionOutput fwd = seg_attention_forward(q, k, v, p);
  const SegAttentionGrads want = seg_attention_backward(q, k, v, fwd.out, fwd.lse, seed, p);
  // Fresh, distinct inputs: the in-place path.
  Variable a(q, true), b(k, true), c(v, true);
  Variable y = seg_attention(a, b, c, p);
  require_close(y.value(), fwd.out, 0, 0, "forward");
  y.backward(seed);
  require_close(a.grad(), want.dq, 0, 0, "dq");
  require_close(b.grad(), want.dk, 0, 0, "dk");
  require_close(c.grad(), want.dv, 0, 0, "dv");
  // A second backward accumulates (the generic path).
  seg_attention(a, b, c, p).backward(seed);
  Tensor twice = want.dq.clone();
  for (std::int64_t i = 0; i < twice.numel(); ++i) twice.f32()[i] *= 2.f;
  require_close(a.grad(), twice, 1e-6, 1e-6, "dq accumulated");
  // Self-attention on one variable: the three gradients add up.
  Variable s(q, true);
  const SegAttentionOutput self_fwd = seg_attention_forward(q, q, q, p);
  const SegAttentionGrads self_g = seg_attention_backward(q, q, q, self_fwd.out, self_fwd.lse, seed, p);
  seg_attention(s, s, s, p).backward(seed);
  Tensor sum3 = self_g.dq.clone();
  for (std::int64_t i = 0; i < sum3.numel(); ++i) sum3.f32()[i] += self_g.dk.f32()[i] + self_g.dv.f32()[i];
  require_close(s.grad(), sum3, 1e-6, 1e-6, "self-attention on one variable");
}

TEST_CASE("nn::ln_linear and the pre-norm mlp_gelu equal layer_norm followed by the op", "[nn]") {
  Rng rng(9);
  const Tensor x = random_tensor(Shape{7, 5}, rng), gm = random_tensor(Shape{5}, rng, 0.5f, 1.5f),
               bt = random_tensor(Shape{5}, rng), W = random_tensor(Shape{5, 3}, rng),
               b = random_tensor(Shape{1, 3}, rng);
  Variable ref = nn::linear(layer_norm(Variable(x), Variable(gm), Variable(bt)), Variable(W), Variable(b));
  require_close(nn::ln_linear(Variable(x), Variable(gm), Variable(bt), Variable(W), Variable(b)).value(), ref.value(),
                1e-6, 1e-6, "ln_linear forward");
  check_gradients([](const std::vector<Variable>& v) { return nn::ln_linear(v[0], v[1], v[2], v[3], v[4]); },
                  {x, gm, bt, W, b});
  const Tensor W1 = random_tensor(Shape{5, 6}, rng), b1 = random_tensor(Shape{1, 6}, rng),
               W2 = random_tensor(Shape{6, 5}, rng), b2 = random_tensor(Shape{1, 5}, rng);
  Variable mref = nn::add_same(Variable(x), nn::mlp_gelu(layer_norm(Variable(x), Variable(gm), Variable(bt)),
                                                         Variable(W1), Variable(b1), Variable(W2), Variable(b2)));
  Variable m = nn::mlp_gelu(Variable(x), Variable(W1), Variable(b1), Variable(W2), Variable(b2), Variable(x),
                            Variable(gm), Variable(bt));
  require_close(m.value(), mref.value(), 1e-5, 1e-5, "pre-norm mlp forward");
  // x is both the residual and the normalized input: its gradient accumulates both paths
  check_gradients([](const std::vector<Variable>& v) { return nn::mlp_gelu(v[0], v[1], v[2], v[3], v[4], v[0], v[5], v[6]); },
                  {x, W1, b1, W2, b2, gm, bt});
  CHECK_THROWS_WITH(nn::ln_linear(Variable(x), Variable(b), Variable(bt), Variable(W), Variable(b)),
                    Catch::Contains("must have 5 elements"));
}

TEST_CASE("nn::linear_embedding_relu equals relu(linear + embedding)", "[nn]") {
  Rng rng(10);
  const Tensor x = random_tensor(Shape{9, 4}, rng), W = random_tensor(Shape{4, 6}, rng),
               b = random_tensor(Shape{1, 6}, rng), table = random_tensor(Shape{3, 6}, rng);
  const Tensor ids = Tensor::from_vector(std::vector<std::int32_t>{0, 1, 2, 2, 1, 0, 0, 2, 1});
  Variable ref = relu(nn::add_embedding(nn::linear(Variable(x), Variable(W), Variable(b)), Variable(table), ids));
  require_close(nn::linear_embedding_relu(Variable(x), Variable(W), Variable(b), Variable(table), ids).value(),
                ref.value(), 1e-6, 1e-6, "forward");
  check_gradients(
      [ids](const std::vector<Variable>& v) { return nn::linear_embedding_relu(v[0], v[1], v[2], v[3], ids); },
      {x, W, b, table});
}

// Fused ops must ADD into a parameter's existing gradient (minibatches backpropagate several
// samples before one optimizer step; one pass may use a parameter twice). A bug read the
// "accumulate" flag before grad_slot() set it (unspecified argument order) and overwrote instead.
TEST_CASE("nn fused ops accumulate gradients across backward passes and uses", "[nn]") {
  Rng rng(21);
  const std::int64_t n = 7, d = 5, h = 6, V = 4;
  Variable x(random_tensor(Shape{n, d}, rng), true), gamma(random_tensor(Shape{1, d}, rng), true),
      beta(random_tensor(Shape{1, d}, rng), true), W(random_tensor(Shape{d, d}, rng), true),
      b(random_tensor(Shape{1, d}, rng), true), W1(random_tensor(Shape{d, h}, rng), true),
      b1(random_tensor(Shape{1, h}, rng), true), W2(random_tensor(Shape{h, d}, rng), true),
      b2(random_tensor(Shape{1, d}, rng), true), table(random_tensor(Shape{V, d}, rng), true);
  Tensor ids = Tensor::zeros(Shape{n}, DType::i32);
  for (std::int64_t i = 0; i < n; ++i) ids.data<std::int32_t>()[i] = static_cast<std::int32_t>(rng.uniform_int(V));
  const Variable R(random_tensor(Shape{n, d}, rng));
  const std::vector<Variable> params = {x, gamma, beta, W, b, W1, b1, W2, b2, table};
  auto loss = [&] {
    Variable y = nn::ln_linear(x, gamma, beta, W, b);
    y = nn::mlp_gelu(y, W1, b1, W2, b2);
    y = nn::add_embedding(y, table, ids);
    y = nn::linear_embedding_relu(y, W, b, table, ids);  // W, b and table used a second time
    return sum(y * R);
  };
  for (auto p : params) p.zero_grad();
  loss().backward();
  std::vector<Tensor> once;
  for (const auto& p : params) once.push_back(p.grad().clone());
  loss().backward();  // no zero_grad: every gradient must double
  for (std::size_t i = 0; i < params.size(); ++i) {
    INFO("parameter " << i);
    const float* g1 = once[i].f32();
    const float* g2 = params[i].grad().f32();
    double worst = 0, scale = 0;
    for (std::int64_t k = 0; k < once[i].numel(); ++k) {
      worst = std::max(worst, std::abs(static_cast<double>(g2[k]) - 2.0 * g1[k]));
      scale = std::max(scale, std::abs(static_cast<double>(g1[k])));
    }
    CHECK(scale > 0);
    CHECK(worst <= 1e-5 * (1 + scale));
  }
}

}  // namespace test_nn
