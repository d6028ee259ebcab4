// go/policy: features, the GO policy network (shapes, whole-network finite-difference
// gradients, segment-length invariance with a full memory, save/load), decoding into
// valid plans.
#include <catch2/catch.hpp>
#include <omp.h>
#include <algorithm>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "go/baselines/fusion.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/load.hpp"
#include "go/graph/training.hpp"
#include "go/policy/all.hpp"
#include "go/rl/ppo_loss.hpp"
#include "go/policy/to_plan.hpp"
#include "go/sim/sim.hpp"
#include "harness.hpp"
#include "rl_fixtures.hpp"
#include "tiny_graph.hpp"

namespace test_policy {
using namespace go;
using namespace go::policy;

namespace {

// A random op graph: op i reads 1-3 earlier ops among the previous `window`; some ops own
// parameters and share a colocation group (ids 0, 1, 2 times `colocation_step`); some get a
// measured time.
OpGraph random_op_graph(std::int32_t n, std::uint64_t seed, std::int32_t window = 8, std::int32_t colocation_step = 1) {
  Rng rng(seed);
  GraphInfo info;
  info.name = "random" + std::to_string(n);
  GraphBuilder b(info);
  for (std::int32_t i = 0; i < n; ++i) {
    OpSpec s;
    s.name = "op" + std::to_string(i);
    s.kind = static_cast<OpKind>(rng.uniform_int(kNumOpKinds));
    s.flops = i % 3 == 0 ? 0.0 : std::pow(10.0, rng.uniform(2.f, 10.f));
    s.param_bytes = i % 5 == 0 ? static_cast<std::int64_t>(rng.uniform_int(1 << 20)) : 0;
    s.time = i % 4 == 0 ? rng.uniform(1e-6f, 1e-3f) : kNoTime;
    s.colocation = i % 7 == 0 ? static_cast<std::int32_t>(i % 3) * colocation_step : -1;
    TensorSpec t;
    t.shape = {static_cast<std::int64_t>(1 + rng.uniform_int(64)), 16};
    s.outputs.push_back(t);
    if (i > 0) {
      const int k = 1 + static_cast<int>(rng.uniform_int(3));
      for (int j = 0; j < k; ++j) {
        const std::int32_t lo = std::max(0, i - window);
        s.inputs.push_back(TensorRef{lo + static_cast<std::int64_t>(rng.uniform_int(static_cast<std::uint64_t>(i - lo))), 0});
      }
    }
    b.add_op(std::move(s));
  }
  return b.build();
}

// Actions for n rows: devices in runs of about 40 rows, so that groups form; priority levels
// drawn from [0, levels) (none drawn when 0); "fuse into producers" with probability fuse.
Actions run_actions(std::int32_t n, int D, Rng& rng, int levels, float fuse) {
  Actions a{Tensor::zeros(Shape{n}, DType::i32), Tensor::zeros(Shape{n}, DType::i32), Tensor::zeros(Shape{n}, DType::i32)};
  for (std::int32_t r = 0; r < n; ++r) {
    a.device.data<std::int32_t>()[r] = static_cast<std::int32_t>((r / 40 + rng.uniform_int(2)) % static_cast<std::uint64_t>(D));
    if (levels > 0) a.priority.data<std::int32_t>()[r] = static_cast<std::int32_t>(rng.uniform_int(static_cast<std::uint64_t>(levels)));
    a.fuse.data<std::int32_t>()[r] = fuse >= 1.f || rng.uniform() < fuse ? 1 : 0;
  }
  return a;
}

PolicyConfig small_config() {
  PolicyConfig c;
  c.hidden = 8;
  c.heads = 2;
  c.sage_layers = 2;
  c.segment_length = 8;
  c.memory_length = 8;
  c.layers_per_task = 1;
  c.ffn_dim = 12;
  c.max_devices = 4;
  c.priority_levels = 3;
  c.value_hidden = 6;
  c.head_gain = 1.f;  // non-trivial logits for the gradient check
  c.seed = 7;
  return c;
}

bool bit_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// An anchor on every row: devices 0, 1, 2 in turn, levels 0, 1 in turn, nothing fused.
void set_round_robin_anchor(PolicyGraph& pg) {
  Tensor dev = Tensor::zeros(Shape{pg.num_nodes}, DType::i32), pri = dev.clone(), fuse = dev.clone();
  for (std::int64_t r = 0; r < pg.num_nodes; ++r) {
    dev.data<std::int32_t>()[r] = static_cast<std::int32_t>(r % 3);
    pri.data<std::int32_t>()[r] = static_cast<std::int32_t>(r % 2);
  }
  pg.set_anchor(dev, pri, fuse);
}

// Every parameter moved by a uniform draw in [-0.3, 0.3] (seeded by its name and `salt`): away
// from the near-uniform initial heads.
void perturb_parameters(GoPolicy& net, std::uint64_t salt) {
  for (auto& [name, p] : net.named_parameters()) {
    Rng r(std::hash<std::string>{}(name) + salt);
    float* x = p.value().f32();
    for (std::int64_t i = 0; i < p.numel(); ++i) x[i] += r.uniform(-0.3f, 0.3f);
  }
}

// A chain "hidden" network of small_config with perturbed parameters, anchored (round robin on
// pg) where asked.
std::unique_ptr<GoPolicy> hidden_net(PolicyGraph& pg, bool anchored, std::uint64_t salt) {
  PolicyConfig cfg = small_config();
  cfg.chain = "hidden";
  cfg.anchor = anchored;
  if (anchored) set_round_robin_anchor(pg);
  auto net = std::make_unique<GoPolicy>(cfg);
  perturb_parameters(*net, salt);
  return net;
}

// K sampling streams Rng(seed).fork(k).
std::vector<Rng> sample_rngs(std::uint64_t seed, int K) {
  std::vector<Rng> rngs;
  for (int k = 0; k < K; ++k) rngs.push_back(Rng(seed).fork(static_cast<std::uint64_t>(k)));
  return rngs;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("go_test_policy_" + name)).string();
}

}  // namespace

TEST_CASE("PolicyGraph: rows in topological order, graph-independent features, CSRs, fusion mask", "[policy]") {
  const OpGraph g = random_op_graph(40, 1);
  const PolicyGraph pg = PolicyGraph::from_graph(g);
  REQUIRE(pg.num_nodes == 40);
  CHECK(pg.numeric.shape() == Shape({40, kNumNumericFeatures}));
  for (std::int64_t r = 0; r < 40; ++r) {
    const OpId op = pg.order[static_cast<std::size_t>(r)];
    CHECK(pg.row_of[static_cast<std::size_t>(op)] == r);
    CHECK(pg.kinds.data<std::int32_t>()[r] == static_cast<std::int32_t>(g.op(op).kind));
    CHECK(pg.preds.fwd.degree(r) == g.in_degree(op));
    CHECK(pg.succs.fwd.degree(r) == g.out_degree(op));
    const float* f = pg.numeric.f32() + r * kNumNumericFeatures;
    CHECK(f[7] == Approx(static_cast<double>(r) / 39.0));
    CHECK(f[3] == (g.op(op).has_time() ? 1.f : 0.f));
    CHECK(f[8] == 1.f);  // forward role
    for (int k = 0; k < kNumNumericFeatures; ++k) CHECK((f[k] >= 0.f && f[k] <= 2.f));
    // a row's predecessors are earlier rows
    const auto* rp = pg.preds.fwd.row_ptr.data<std::int64_t>();
    for (std::int64_t e = rp[r]; e < rp[r + 1]; ++e) CHECK(pg.preds.fwd.col_idx.data<std::int32_t>()[e] < r);
    CHECK(pg.fusion_mask.f32()[r * 2 + 1] ==
          (g.in_degree(op) == 0 || !fusion_action_possible(g, op) ? kMaskedLogit : 0.f));
  }
  CHECK_THROWS_WITH(PolicyGraph::from_arrays("bad", Tensor::zeros(Shape{3}, DType::i32),
                                             Tensor::zeros(Shape{3, kNumNumericFeatures}),
                                             std::vector<std::int32_t>{0}, std::vector<std::int32_t>{1}),
                    Catch::Contains("not forward in topological order"));
}

TEST_CASE("PolicyConfig: JSON round trip, defaults, errors naming the key", "[policy]") {
  const PolicyConfig d;
  CHECK(d.hidden == 128);
  CHECK(d.sage_layers == 2);
  CHECK(d.segment_length == 128);
  const PolicyConfig c = PolicyConfig::parse(R"({"type": "go_policy", "hidden": 64, "heads": 8, "causal": false})");
  CHECK(c.hidden == 64);
  CHECK(c.heads == 8);
  CHECK_FALSE(c.causal);
  CHECK(PolicyConfig::from_json(c.to_json()).to_json() == c.to_json());
  CHECK_THROWS_WITH(PolicyConfig::parse(R"({"hiden": 64})"), Catch::Contains("unknown key \"hiden\""));
  CHECK_THROWS_WITH(PolicyConfig::parse(R"({"hidden": 30, "heads": 4})"), Catch::Contains("\"heads\" 4 must divide"));
  CHECK_THROWS_WITH(PolicyConfig::parse(R"({"causal": 1})"), Catch::Contains("\"causal\" must be true or false"));
  CHECK_THROWS_WITH(PolicyConfig::parse("{"), Catch::Contains("invalid JSON"));
}

TEST_CASE("GoPolicy: output shapes for 1 to max_devices devices, sampling and greedy decoding", "[policy]") {
  const OpGraph g = random_op_graph(50, 2);
  const PolicyGraph pg = PolicyGraph::from_graph(g);
  PolicyConfig cfg = small_config();
  cfg.max_devices = 8;
  GoPolicy net(cfg);
  for (int D : {1, 2, 5, 8}) {
    Rng rng(11);
    const PolicyOutput out = net.forward(pg, D, Decode::sample, nullptr, &rng);
    CHECK(out.device_logits.shape() == Shape({50, D}));
    CHECK(out.priority_logits.shape() == Shape({50, 3}));
    CHECK(out.fusion_logits.shape() == Shape({50, 2}));
    CHECK(out.log_prob.shape() == Shape({50}));
    CHECK(out.entropy.shape() == Shape({50}));
    CHECK(out.value.shape() == Shape({1, 1}));
    CHECK(out.log_prob_sum.numel() == 1);
    for (std::int64_t r = 0; r < 50; ++r) {
      CHECK(out.actions.device.data<std::int32_t>()[r] < D);
      CHECK(out.actions.priority.data<std::int32_t>()[r] < 3);
      CHECK(out.log_prob.value().f32()[r] <= 0.f);
      CHECK(out.entropy.value().f32()[r] >= 0.f);
      // rows without a producer never fuse
      if (pg.preds.fwd.degree(r) == 0) CHECK(out.actions.fuse.data<std::int32_t>()[r] == 0);
    }
    // the same seed gives the same actions; teacher forcing reproduces the log-probabilities
    Rng rng2(11);
    const Actions again = net.act(pg, D, &rng2);
    CHECK(bit_equal(again.device, out.actions.device));
    CHECK(bit_equal(again.priority, out.actions.priority));
    CHECK(bit_equal(again.fuse, out.actions.fuse));
    const PolicyOutput forced = net.forward(pg, D, Decode::given, &out.actions);
    CHECK(bit_equal(forced.log_prob.value(), out.log_prob.value()));
    // greedy = argmax of each task's logits given the previous greedy choices
    const PolicyOutput gr = net.forward(pg, D, Decode::greedy);
    CHECK(bit_equal(gr.actions.device, argmax_rows(gr.device_logits.value())));
    CHECK(bit_equal(gr.actions.fuse, argmax_rows(gr.fusion_logits.value())));
  }
  Rng rng(1);
  CHECK_THROWS_WITH(net.forward(pg, 9, Decode::sample, nullptr, &rng), Catch::Contains("num_devices 9 out of range"));
  CHECK_THROWS_WITH(net.forward(pg, 2, Decode::sample), Catch::Contains("needs an Rng"));
  Actions bad = net.act(pg, 4, &rng);
  CHECK_THROWS_WITH(net.forward(pg, 2, Decode::given, &bad), Catch::Contains("out of range [0, 2)"));
}

TEST_CASE("GoPolicy: finite-difference gradient of the whole network", "[policy]") {
  const OpGraph g = random_op_graph(20, 3, 6);
  PolicyGraph pg = PolicyGraph::from_graph(g);
  {  // an anchor plan, so that its embedding and biases are checked too
    Rng ar(11);
    Tensor dev = Tensor::zeros(Shape{20}, DType::i32), pri = Tensor::zeros(Shape{20}, DType::i32),
           fuse = Tensor::zeros(Shape{20}, DType::i32);
    for (int r = 0; r < 20; ++r) {
      dev.data<std::int32_t>()[r] = static_cast<std::int32_t>(ar.uniform_int(3));
      pri.data<std::int32_t>()[r] = static_cast<std::int32_t>(ar.uniform_int(3));
      fuse.data<std::int32_t>()[r] = pg.fusion_mask.f32()[r * 2 + 1] == 0.f ? static_cast<std::int32_t>(ar.uniform_int(2)) : 0;
    }
    pg.set_anchor(dev, pri, fuse);
  }
  PolicyConfig cfg = small_config();
  cfg.chain = GENERATE(as<std::string>{}, "hidden", "action");
  INFO("chain " << cfg.chain);
  cfg.anchor_bias = 1.f;  // logits in a range where the finite differences see the softmax curve
  cfg.segment_length = 32;  // one segment: the stop-gradient memory would make finite differences
                            // see paths the gradient deliberately ignores
  cfg.memory_length = 0;
  GoPolicy net(cfg);
  Rng rng(5);
  const Actions actions = net.act(pg, 3, &rng);
  const Tensor w = Tensor::uniform(Shape{20}, rng, -1.f, 1.f);
  auto loss_of = [&](const PolicyOutput& o) {  // double, outside the network
    double s = 0;
    for (int i = 0; i < 20; ++i)
      s += static_cast<double>(o.log_prob.value().f32()[i]) * w.f32()[i] + 0.3 * o.entropy.value().f32()[i];
    return s + 2.0 * o.value.item();
  };
  PolicyOutput out = net.forward(pg, 3, Decode::given, &actions);
  Variable loss = sum(out.log_prob * Variable(w)) + sum(out.entropy) * 0.3f + out.value * 2.f;
  net.zero_grad();
  loss.backward();
  const double eps = 5e-4;
  int checked = 0, bad = 0;
  double diff2 = 0, num2 = 0;
  Rng pick(9);
  for (auto& [name, p] : net.named_parameters()) {
    const Tensor analytic = p.grad().clone();
    float* x = p.value().f32();
    const std::int64_t m = p.numel();
    for (int k = 0; k < 4; ++k) {
      const std::int64_t i = static_cast<std::int64_t>(pick.uniform_int(static_cast<std::uint64_t>(m)));
      const float x0 = x[i];
      double up, down;
      {
        NoGradGuard ng;
        x[i] = static_cast<float>(x0 + eps);
        up = loss_of(net.forward(pg, 3, Decode::given, &actions));
        x[i] = static_cast<float>(x0 - eps);
        down = loss_of(net.forward(pg, 3, Decode::given, &actions));
        x[i] = x0;
      }
      const double num = (up - down) / (2 * eps), an = analytic.f32()[i];
      diff2 += (an - num) * (an - num);
      num2 += num * num;
      ++checked;
      if (std::abs(an - num) > 5e-3 + 5e-2 * std::abs(num)) {
        ++bad;
        WARN(name << "[" << i << "]: analytic " << an << ", numeric " << num);
      }
    }
  }
  INFO(checked << " parameter elements checked; ||analytic - numeric|| = " << std::sqrt(diff2)
               << ", ||numeric|| = " << std::sqrt(num2));
  CHECK(std::sqrt(diff2) <= 2e-2 * std::sqrt(num2));
  CHECK(bad <= checked / 50);  // a step can cross a relu / max kink
  CHECK(checked > 100);
}

TEST_CASE("GoPolicy: one shared pass gives every sample's outputs, losses and gradients", "[policy]") {
  const std::string chain = GENERATE(as<std::string>{}, "hidden", "action");
  INFO("chain " << chain);
  const OpGraph g = random_op_graph(70, 12);
  const PolicyGraph pg = PolicyGraph::from_graph(g);
  PolicyConfig cfg = small_config();
  cfg.chain = chain;
  GoPolicy net(cfg);
  perturb_parameters(net, 0);
  const int K = 5, D = 3;
  std::vector<Rng> rngs, single_rngs;
  for (int k = 0; k < K; ++k) rngs.push_back(Rng(7).fork(static_cast<std::uint64_t>(k)));
  single_rngs = rngs;
  std::vector<PolicyOutput> outs;
  {
    NoGradGuard ng;
    outs = net.forward_many(pg, D, Decode::sample, K, nullptr, &rngs);
  }
  REQUIRE(outs.size() == static_cast<std::size_t>(K));
  // what is shared is computed once: the outputs hold the same Variables
  CHECK(outs[0].device_logits.id() == outs[K - 1].device_logits.id());
  CHECK(outs[0].value.id() == outs[K - 1].value.id());
  CHECK((outs[0].priority_logits.id() == outs[K - 1].priority_logits.id()) == (chain == "hidden"));
  int distinct = 0;
  for (int k = 0; k < K; ++k) {
    NoGradGuard ng;
    const PolicyOutput one = net.forward(pg, D, Decode::sample, nullptr, &single_rngs[static_cast<std::size_t>(k)]);
    CHECK(bit_equal(one.actions.device, outs[k].actions.device));
    CHECK(bit_equal(one.actions.priority, outs[k].actions.priority));
    CHECK(bit_equal(one.actions.fuse, outs[k].actions.fuse));
    CHECK(bit_equal(one.log_prob.value(), outs[k].log_prob.value()));
    CHECK(bit_equal(one.entropy.value(), outs[k].entropy.value()));
    CHECK(bit_equal(one.value.value(), outs[k].value.value()));
    distinct += k > 0 && !bit_equal(outs[k].actions.device, outs[0].actions.device) ? 1 : 0;
  }
  CHECK(distinct == K - 1);  // the samples differ, so the test compares K different decisions
  if (chain == "hidden") {
    const Actions gr = net.greedy_actions(outs[2]);
    NoGradGuard ng;
    const PolicyOutput greedy = net.forward(pg, D, Decode::greedy);
    CHECK(bit_equal(gr.device, greedy.actions.device));
    CHECK(bit_equal(gr.priority, greedy.actions.priority));
    CHECK(bit_equal(gr.fuse, greedy.actions.fuse));
  } else {
    CHECK_THROWS_WITH(net.greedy_actions(outs[0]), Catch::Contains("chain"));
  }

  // a PPO-shaped loss per sample: backward_many over all of them against K separate passes
  std::vector<Actions> given;
  for (const auto& o : outs) given.push_back(o.actions);
  std::vector<double> losses_shared(K), losses_single(K);
  auto loss_of = [&](std::size_t k, const PolicyOutput& o) {
    const float A = 0.5f - 0.3f * static_cast<float>(k);
    Variable ratio = exp(o.log_prob - Variable(outs[k].log_prob.value()) * 0.9f);
    Variable l = -mean(minimum(ratio * A, clamp(ratio, 0.8f, 1.2f) * A)) - o.entropy_mean * 0.01f +
                 mean(square(o.value - Variable(Tensor::full(Shape{1, 1}, -1.f + 0.1f * static_cast<float>(k)))));
    return l * 0.2f;
  };
  net.zero_grad();
  net.backward_many(pg, D, given, [&](std::size_t k, const PolicyOutput& o) {
    Variable l = loss_of(k, o);
    losses_shared[k] = l.item();
    return l;
  });
  std::vector<Tensor> shared;
  for (auto& p : net.parameters()) shared.push_back(p.has_grad() ? p.grad().clone() : Tensor::zeros(p.shape()));
  net.zero_grad();
  for (int k = 0; k < K; ++k) {
    const PolicyOutput o = net.forward(pg, D, Decode::given, &given[static_cast<std::size_t>(k)]);
    Variable l = loss_of(static_cast<std::size_t>(k), o);
    losses_single[static_cast<std::size_t>(k)] = l.item();
    l.backward();
  }
  for (int k = 0; k < K; ++k) CHECK(losses_shared[k] == Approx(losses_single[k]).epsilon(1e-6));
  const auto params = net.named_parameters();
  double norm = 0;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Variable& p = params[i].second;
    const Tensor single = p.has_grad() ? p.grad() : Tensor::zeros(p.shape());
    go::test::require_close(shared[i], single, 1e-4, 1e-6, params[i].first);
    for (std::int64_t j = 0; j < single.numel(); ++j) norm += static_cast<double>(single.f32()[j]) * single.f32()[j];
  }
  CHECK(norm > 1e-6);
}

TEST_CASE("GoPolicy: backward through the sampling pass gives backward_many's gradients bit for bit", "[policy]") {
  const OpGraph g = random_op_graph(90, 21);
  PolicyGraph pg = PolicyGraph::from_graph(g);
  const bool anchored = GENERATE(false, true);
  INFO("anchored " << anchored);
  const auto net_ptr = hidden_net(pg, anchored, 1);
  GoPolicy& net = *net_ptr;
  const int K = 4, D = 3;
  std::vector<Rng> rngs = sample_rngs(11, K);
  // the pass PPO samples from, recorded with gradients
  std::vector<PolicyOutput> drawn = net.forward_many(pg, D, Decode::sample, K, nullptr, &rngs);
  std::vector<Actions> given;
  for (const auto& o : drawn) given.push_back(o.actions);
  std::reverse(given.begin(), given.end());  // not in the order drawn: any decisions may be given
  auto loss_of = [&](std::size_t k, const PolicyOutput& o) {
    const float A = 0.7f - 0.4f * static_cast<float>(k);
    Variable ratio = exp(o.log_prob - Variable(drawn[K - 1 - k].log_prob.value()));
    return (-mean(minimum(ratio * A, clamp(ratio, 0.8f, 1.2f) * A)) - o.entropy_mean * 0.01f +
            mean(square(o.value - Variable(Tensor::full(Shape{1, 1}, -0.5f))))) *
           0.25f;
  };
  std::vector<double> loss_from(K), loss_many(K);
  net.zero_grad();
  net.backward_from(pg, drawn[1], given, [&](std::size_t k, const PolicyOutput& o) {
    Variable l = loss_of(k, o);
    loss_from[k] = l.item();
    return l;
  });
  std::vector<Tensor> from;
  for (auto& p : net.parameters()) from.push_back(p.has_grad() ? p.grad().clone() : Tensor::zeros(p.shape()));
  // a pass serves one backward
  CHECK_THROWS_WITH(net.backward_from(pg, drawn[0], given, loss_of), Catch::Contains("already back-propagated"));
  net.zero_grad();
  net.backward_many(pg, D, given, [&](std::size_t k, const PolicyOutput& o) {
    Variable l = loss_of(k, o);
    loss_many[k] = l.item();
    return l;
  });
  for (int k = 0; k < K; ++k) CHECK(loss_from[k] == loss_many[k]);
  const auto params = net.named_parameters();
  double norm = 0;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Tensor many = params[i].second.has_grad() ? params[i].second.grad() : Tensor::zeros(params[i].second.shape());
    INFO(params[i].first);
    CHECK(bit_equal(from[i], many));
    for (std::int64_t j = 0; j < many.numel(); ++j) norm += static_cast<double>(many.f32()[j]) * many.f32()[j];
  }
  CHECK(norm > 1e-6);  // the comparison is not between two zero gradients

  // refused: a pass recorded without gradients, chain "action", actions the graph cannot take
  {
    std::vector<Rng> r1{Rng(3)};
    std::vector<PolicyOutput> nograd;
    {
      NoGradGuard ng;
      nograd = net.forward_many(pg, D, Decode::sample, 1, nullptr, &r1);
    }
    CHECK_THROWS_WITH(net.backward_from(pg, nograd[0], given, loss_of), Catch::Contains("gradients recorded"));
    std::vector<Rng> r2{Rng(4)};
    std::vector<PolicyOutput> fresh = net.forward_many(pg, D, Decode::sample, 1, nullptr, &r2);
    std::vector<Actions> bad{given[0].clone()};
    bad[0].device.data<std::int32_t>()[5] = D;
    CHECK_THROWS_WITH(net.backward_from(pg, fresh[0], bad, loss_of), Catch::Contains("out of range"));
    const PolicyGraph other = PolicyGraph::from_graph(random_op_graph(40, 3));
    CHECK_THROWS_WITH(net.backward_from(other, fresh[0], given, loss_of), Catch::Contains("rows but graph"));
  }
  PolicyConfig acfg = small_config();
  acfg.chain = "action";
  GoPolicy action_net(acfg);
  std::vector<Rng> r3{Rng(5)};
  std::vector<PolicyOutput> a_out = action_net.forward_many(pg, D, Decode::sample, 1, nullptr, &r3);
  CHECK_THROWS_WITH(action_net.backward_from(pg, a_out[0], given, loss_of), Catch::Contains("chain \"hidden\""));
}

// PPO's batched loss (go/rl/ppo_loss.hpp), what the trainer uses with chain "hidden": over one
// pass's shared log-softmax, the same loss, statistics and gradients as the sum of each decision's
// loss built from its own output (backward_many), to float summation order. The old
// log-probabilities put the decisions' ratios at exactly 1 (ties inside the surrogate's min), on
// both sides of the clip, and just off 1; the advantages are positive, negative and zero.
TEST_CASE("GoPolicy: PPO's batched loss over the shared pass gives the per-decision losses and gradients",
          "[policy][rl]") {
  const OpGraph g = random_op_graph(90, 21);
  PolicyGraph pg = PolicyGraph::from_graph(g);
  const bool anchored = GENERATE(false, true);
  const bool per_node = GENERATE(true, false);
  INFO("anchored " << anchored << ", ratio " << (per_node ? "node" : "plan"));
  const auto net_ptr = hidden_net(pg, anchored, 3);
  GoPolicy& net = *net_ptr;
  const int K = 6, D = 3;
  std::vector<Rng> rngs = sample_rngs(17, K);
  std::vector<Actions> given;
  std::vector<Tensor> old;
  {
    NoGradGuard ng;
    const auto drawn = net.forward_many(pg, D, Decode::sample, K, nullptr, &rngs);
    Rng noise(23);
    for (int k = 0; k < K; ++k) {
      given.push_back(drawn[static_cast<std::size_t>(k)].actions);
      Tensor o = drawn[static_cast<std::size_t>(k)].log_prob.value().clone();
      const float spread = k % 3 == 0 ? 0.f : k % 3 == 1 ? 0.4f : 0.002f;
      for (std::int64_t i = 0; i < o.numel(); ++i)
        o.f32()[i] += spread * static_cast<float>(2 * noise.uniform_double() - 1);
      old.push_back(o);
    }
  }
  const float adv[K] = {0.9f, -0.6f, 0.f, 1.3f, -1.1f, 0.4f};
  const double reward[K] = {-0.8, -1.2, -0.9, -1.0, -1.5, -0.7};
  std::vector<go::rl::PpoDecision> ds;
  for (int k = 0; k < K; ++k)
    ds.push_back({&given[static_cast<std::size_t>(k)], &old[static_cast<std::size_t>(k)], adv[k], reward[k]});
  const go::rl::PpoLossTerms terms{0.2f, per_node, 0.01f, 0.5f};
  const float w = 1.f / K;
  auto grads = [&] {
    std::vector<Tensor> out;
    for (auto& p : net.parameters()) out.push_back(p.has_grad() ? p.grad().clone() : Tensor::zeros(p.shape()));
    return out;
  };
  // each decision's loss from its own output
  go::rl::PpoLossStats st_each;
  double loss_each = 0;
  net.zero_grad();
  net.backward_many(pg, D, given, [&](std::size_t k, const PolicyOutput& o) {
    Variable l = go::rl::ppo_loss(o, ds[k], terms, st_each);
    loss_each += l.item();
    return scale(l, w);
  });
  const std::vector<Tensor> each = grads();
  // all of them from the shared pass
  go::rl::PpoLossStats st_all;
  double loss_all = 0;
  auto batched = [&](const GoPolicy::SharedOutput& so) {
    Variable l = go::rl::ppo_loss(so, ds, terms, st_all);
    loss_all = l.item();
    return scale(l, w);
  };
  net.zero_grad();
  net.backward_shared(pg, D, nullptr, given, batched);
  const std::vector<Tensor> all = grads();
  CHECK(loss_all == Approx(loss_each).epsilon(1e-5));
  CHECK(st_all.decisions == K);
  CHECK(st_each.decisions == K);
  CHECK(st_all.entropy == Approx(st_each.entropy).epsilon(1e-6));
  CHECK(st_all.policy_loss == Approx(st_each.policy_loss).epsilon(1e-5).margin(1e-7));
  CHECK(st_all.value_loss == Approx(st_each.value_loss).epsilon(1e-6));
  CHECK(st_all.kl == Approx(st_each.kl).epsilon(1e-4).margin(1e-9));
  CHECK(st_all.clip_fraction == Approx(st_each.clip_fraction).margin(1e-9));
  // the clip is met, and not everywhere: both branches of the min are compared
  CHECK(st_each.clip_fraction > 0);
  CHECK(st_each.clip_fraction < K);
  const auto params = net.named_parameters();
  double norm = 0;
  for (std::size_t i = 0; i < params.size(); ++i) {
    go::test::require_close(all[i], each[i], 1e-4, 1e-6, params[i].first);
    for (std::int64_t j = 0; j < each[i].numel(); ++j) norm += static_cast<double>(each[i].f32()[j]) * each[i].f32()[j];
  }
  CHECK(norm > 1e-6);
  // through the recorded sampling pass (PPO's: sample_many's) a new pass's gradients, bit for bit
  std::vector<Rng> again = sample_rngs(17, K);
  const GoPolicy::Samples sampled = net.sample_many(pg, D, again);
  const std::vector<PolicyOutput> recorded{sampled.pass};
  go::rl::PpoLossStats st_rec;
  double loss_rec = 0;
  net.zero_grad();
  net.backward_shared(pg, D, &recorded[0], given, [&](const GoPolicy::SharedOutput& so) {
    Variable l = go::rl::ppo_loss(so, ds, terms, st_rec);
    loss_rec = l.item();
    return scale(l, w);
  });
  CHECK(loss_rec == loss_all);
  const std::vector<Tensor> rec = grads();
  for (std::size_t i = 0; i < params.size(); ++i) {
    INFO(params[i].first);
    CHECK(bit_equal(rec[i], all[i]));
  }
  CHECK_THROWS_WITH(net.backward_shared(pg, D, &recorded[0], given, batched), Catch::Contains("already back-propagated"));
  // decisions the graph cannot take are refused before any pass, and so is chain "action"
  std::vector<Actions> bad{given[0].clone()};
  bad[0].device.data<std::int32_t>()[5] = D;
  CHECK_THROWS_WITH(net.backward_shared(pg, D, nullptr, bad, batched), Catch::Contains("out of range"));
  PolicyConfig acfg = small_config();
  acfg.chain = "action";
  GoPolicy action_net(acfg);
  CHECK_THROWS_WITH(action_net.backward_shared(pg, D, nullptr, given, batched), Catch::Contains("chain \"hidden\""));
}

// sample_many, PPO's sampling: forward_many's draws and per-row log-probabilities bit for bit,
// on either chain, with the pass's logits, value and entropy in `pass`.
TEST_CASE("GoPolicy: sample_many gives forward_many's actions and log-probabilities bit for bit", "[policy]") {
  const OpGraph g = random_op_graph(70, 5);
  PolicyGraph pg = PolicyGraph::from_graph(g);
  const std::string chain = GENERATE(std::string("hidden"), std::string("action"));
  const bool anchored = GENERATE(false, true);
  INFO("chain " << chain << ", anchored " << anchored);
  PolicyConfig cfg = small_config();
  cfg.chain = chain;
  cfg.anchor = anchored;
  if (anchored) set_round_robin_anchor(pg);
  GoPolicy net(cfg);
  perturb_parameters(net, 5);
  const int K = 5, D = 3;
  NoGradGuard ng;
  std::vector<Rng> a = sample_rngs(29, K), b = sample_rngs(29, K);
  const std::vector<PolicyOutput> outs = net.forward_many(pg, D, Decode::sample, K, nullptr, &a);
  const GoPolicy::Samples s = net.sample_many(pg, D, b);
  REQUIRE(s.actions.size() == static_cast<std::size_t>(K));
  REQUIRE(s.log_prob.size() == static_cast<std::size_t>(K));
  int differ = 0;  // the draws are not all one decision
  for (int k = 0; k < K; ++k) {
    const auto j = static_cast<std::size_t>(k);
    CHECK(same_actions(s.actions[j], outs[j].actions));
    CHECK(bit_equal(s.log_prob[j], outs[j].log_prob.value()));
    differ += same_actions(s.actions[j], s.actions[0]) ? 0 : 1;
  }
  CHECK(differ > 0);
  for (int k = 0; k < K; ++k) CHECK(a[static_cast<std::size_t>(k)].next_u64() == b[static_cast<std::size_t>(k)].next_u64());
  CHECK(s.pass.value.item() == outs[0].value.item());
  CHECK(bit_equal(s.pass.device_logits.value(), outs[0].device_logits.value()));
  CHECK(bit_equal(s.pass.entropy.value(), outs[0].entropy.value()));
  if (chain == "hidden") CHECK(same_actions(net.greedy_actions(s.pass), net.greedy_actions(outs[0])));
}

// The surrogate op alone on a graph large enough for its threads: the same bits on 1 and 2
// threads, and against the composite of elementwise ops (pick, exp, clamp, min, mean) per
// decision, the same loss and gradients to float summation order.
TEST_CASE("clipped_surrogate: the composite's loss and gradients, the same bits on any thread count", "[policy][rl]") {
  const std::int64_t n = 6000;
  const int K = 8;
  const bool per_node = GENERATE(true, false);
  INFO("ratio " << (per_node ? "node" : "plan"));
  const std::int64_t width[3] = {4, 8, 2};
  Rng rng(31);
  std::array<Tensor, 3> logits;
  for (int t = 0; t < 3; ++t) {
    logits[static_cast<std::size_t>(t)] = Tensor::empty(Shape{n, width[t]});
    for (std::int64_t i = 0; i < n * width[t]; ++i)
      logits[static_cast<std::size_t>(t)].f32()[i] = static_cast<float>(2 * rng.uniform_double() - 1);
  }
  std::vector<Actions> acts(K);
  std::vector<Tensor> old(K);
  std::vector<go::rl::SurrogateInput> in;
  const float adv[K] = {1.f, -0.5f, 0.f, 2.f, -1.5f, 0.25f, 0.7f, -0.1f};
  for (int k = 0; k < K; ++k) {
    Tensor* a[3] = {&acts[static_cast<std::size_t>(k)].device, &acts[static_cast<std::size_t>(k)].priority,
                    &acts[static_cast<std::size_t>(k)].fuse};
    for (int t = 0; t < 3; ++t) {
      *a[t] = Tensor::empty(Shape{n}, DType::i32);
      for (std::int64_t i = 0; i < n; ++i)
        a[t]->data<std::int32_t>()[i] = static_cast<std::int32_t>(rng.uniform_int(static_cast<std::uint64_t>(width[t])));
    }
    old[static_cast<std::size_t>(k)] = Tensor::empty(Shape{n});
  }
  // the old log-probabilities: the current ones, moved by up to 0.5 per row (per-node ratios on both
  // sides of the clip and inside it) or, for the plan ratio, the plan's sum moved to a ratio just
  // below 1, below the clip and above it
  const float plan_shift[4] = {0.00002f, 0.5f, 0.00002f, -0.5f};
  {
    NoGradGuard ng;
    std::array<Variable, 3> ls;
    for (int t = 0; t < 3; ++t) ls[static_cast<std::size_t>(t)] = log_softmax(Variable(logits[static_cast<std::size_t>(t)]));
    for (int k = 0; k < K; ++k) {
      const Tensor lp = (pick_columns(ls[0], acts[static_cast<std::size_t>(k)].device) +
                         pick_columns(ls[1], acts[static_cast<std::size_t>(k)].priority) +
                         pick_columns(ls[2], acts[static_cast<std::size_t>(k)].fuse))
                            .value();
      for (std::int64_t i = 0; i < n; ++i)
        old[static_cast<std::size_t>(k)].f32()[i] =
            lp.f32()[i] + (per_node ? 0.5f * static_cast<float>(2 * rng.uniform_double() - 1)
                                    : plan_shift[k % 4] / static_cast<float>(n));
    }
  }
  for (int k = 0; k < K; ++k) in.push_back({&acts[static_cast<std::size_t>(k)], &old[static_cast<std::size_t>(k)], adv[k]});
  auto run = [&](int threads, std::vector<go::rl::SurrogateStats>& st) {
    go::test::ThreadsGuard guard;
    omp_set_num_threads(threads);
    std::array<Variable, 3> x, ls;
    for (int t = 0; t < 3; ++t) {
      x[static_cast<std::size_t>(t)] = Variable(logits[static_cast<std::size_t>(t)], true);
      ls[static_cast<std::size_t>(t)] = log_softmax(x[static_cast<std::size_t>(t)]);
    }
    Variable l = go::rl::clipped_surrogate(ls, in, 0.2f, per_node, &st);
    const float value = l.item();
    scale(l, 0.5f).backward();
    std::vector<Tensor> g;
    for (const Variable& v : x) g.push_back(v.grad().clone());
    return std::pair{value, g};
  };
  std::vector<go::rl::SurrogateStats> st1, st2;
  const auto [v1, g1] = run(1, st1);
  const auto [v2, g2] = run(2, st2);
  CHECK(v1 == v2);
  for (int t = 0; t < 3; ++t) CHECK(bit_equal(g1[static_cast<std::size_t>(t)], g2[static_cast<std::size_t>(t)]));
  // the composite, decision by decision
  std::array<Variable, 3> x, ls;
  for (int t = 0; t < 3; ++t) {
    x[static_cast<std::size_t>(t)] = Variable(logits[static_cast<std::size_t>(t)], true);
    ls[static_cast<std::size_t>(t)] = log_softmax(x[static_cast<std::size_t>(t)]);
  }
  Variable total;
  int clipped = 0;
  for (int k = 0; k < K; ++k) {
    const Actions& a = acts[static_cast<std::size_t>(k)];
    Variable lp = pick_columns(ls[0], a.device) + pick_columns(ls[1], a.priority) + pick_columns(ls[2], a.fuse);
    Variable o(old[static_cast<std::size_t>(k)]);
    Variable ratio = per_node ? exp(lp - o) : exp(clamp(sum(lp) - sum(o), -20.f, 20.f));
    Variable surr = minimum(scale(ratio, adv[k]), scale(clamp(ratio, 0.8f, 1.2f), adv[k]));
    Variable pg = per_node ? -mean(surr) : -surr;
    const go::rl::SurrogateStats& x = st1[static_cast<std::size_t>(k)];
    CHECK(x.loss == Approx(pg.item()).epsilon(1e-5).margin(1e-7));
    if (per_node) {  // each decision's rows on both sides of the clip
      CHECK(x.clip_fraction > 0.1);
      CHECK(x.clip_fraction < 0.9);
    }
    clipped += x.clip_fraction > 0 ? 1 : 0;
    total = total.defined() ? total + pg : pg;
  }
  CHECK(clipped == (per_node ? K : K / 2));
  CHECK(v1 == Approx(total.item()).epsilon(1e-5));
  scale(total, 0.5f).backward();
  for (int t = 0; t < 3; ++t)
    go::test::require_close(g1[static_cast<std::size_t>(t)], x[static_cast<std::size_t>(t)].grad(), 1e-4, 1e-7,
                            "log-softmax input " + std::to_string(t));
  // decisions that do not fit the log-softmax are one-line errors
  Actions wide = acts[0].clone();
  wide.priority.data<std::int32_t>()[7] = static_cast<std::int32_t>(width[1]);
  Actions floats = acts[0].clone();
  floats.fuse = Tensor::zeros(Shape{n});
  for (const Actions* bad : {&wide, &floats}) {
    const std::vector<go::rl::SurrogateInput> one{{bad, &old[0], 1.f}};
    CHECK_THROWS_AS(go::rl::clipped_surrogate(ls, one, 0.2f, per_node), go::Error);
  }
  CHECK_THROWS_WITH(go::rl::clipped_surrogate(ls, {{&wide, &old[0], 1.f}}, 0.2f, per_node),
                    Catch::Contains("out of range [0, 8)"));
  CHECK_THROWS_WITH(go::rl::clipped_surrogate(ls, {{&floats, &old[0], 1.f}}, 0.2f, per_node),
                    Catch::Contains("expected i32"));
}

TEST_CASE("GoPolicy: heads only gives the same outputs, and gradients on the heads alone, equal to the whole network's",
          "[policy]") {
  const std::string chain = GENERATE(as<std::string>{}, "hidden", "action");
  INFO("chain " << chain);
  const OpGraph g = random_op_graph(80, 17);
  PolicyGraph pg = PolicyGraph::from_graph(g);
  PolicyConfig cfg = small_config();
  cfg.chain = chain;
  cfg.anchor = true;
  set_round_robin_anchor(pg);
  GoPolicy net(cfg);
  perturb_parameters(net, 2);
  const int K = 3, D = 3;
  std::vector<Rng> rngs;
  for (int k = 0; k < K; ++k) rngs.push_back(Rng(5).fork(static_cast<std::uint64_t>(k)));
  std::vector<PolicyOutput> drawn;
  {
    NoGradGuard ng;
    drawn = net.forward_many(pg, D, Decode::sample, K, nullptr, &rngs);
  }
  std::vector<Actions> given;
  for (const auto& o : drawn) given.push_back(o.actions);
  auto loss_of = [&](std::size_t k, const PolicyOutput& o) {
    const float A = 0.6f - 0.5f * static_cast<float>(k);
    Variable ratio = exp(o.log_prob - Variable(drawn[k].log_prob.value()) * 0.9f);
    return (-mean(minimum(ratio * A, clamp(ratio, 0.8f, 1.2f) * A)) - o.entropy_mean * 0.01f +
            mean(square(o.value - Variable(Tensor::full(Shape{1, 1}, -0.5f))))) *
           0.3f;
  };
  auto run = [&](bool heads_only, std::vector<double>& losses) {
    net.set_heads_only(heads_only);
    net.zero_grad();
    net.backward_many(pg, D, given, [&](std::size_t k, const PolicyOutput& o) {
      Variable l = loss_of(k, o);
      losses.push_back(l.item());
      return l;
    });
    std::vector<std::optional<Tensor>> grads;
    for (auto& p : net.parameters()) grads.push_back(p.has_grad() ? std::optional<Tensor>(p.grad().clone()) : std::nullopt);
    return grads;
  };
  std::vector<double> loss_all, loss_heads;
  const auto all = run(false, loss_all);
  const auto heads = run(true, loss_heads);
  REQUIRE(loss_heads.size() == loss_all.size());
  for (std::size_t k = 0; k < loss_all.size(); ++k) CHECK(loss_heads[k] == loss_all[k]);  // the same outputs
  const auto params = net.named_parameters();
  int n_heads = 0, n_frozen = 0;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const std::string& name = params[i].first;
    INFO(name);
    const bool is_head = go::test::is_policy_head(name);
    REQUIRE(all[i].has_value());  // the whole network's backward reaches every parameter
    if (is_head) {
      ++n_heads;
      REQUIRE(heads[i].has_value());
      double norm = 0;
      for (std::int64_t j = 0; j < all[i]->numel(); ++j) norm += std::abs(all[i]->f32()[j]);
      CHECK(norm > 0);  // a real comparison, not of two zero gradients
      go::test::require_close(*heads[i], *all[i], 1e-5, 1e-7, name);
    } else {
      ++n_frozen;
      CHECK_FALSE(heads[i].has_value());  // no gradient: an optimizer step leaves it as it is
    }
  }
  CHECK(n_heads == 18);  // 3 layer norms x 2, query x 2, devices, heads 2 x 2, value 2 x 2, anchor bias
  CHECK(n_frozen > n_heads);
  // backward_from (chain hidden): through a sampling pass recorded with heads only
  if (chain == "hidden") {
    std::vector<Rng> r1{Rng(9)};
    std::vector<PolicyOutput> pass = net.forward_many(pg, D, Decode::sample, 1, nullptr, &r1);
    net.zero_grad();
    net.backward_from(pg, pass[0], given, loss_of);
    for (std::size_t i = 0; i < params.size(); ++i) {
      INFO(params[i].first);
      CHECK(params[i].second.has_grad() == heads[i].has_value());
      if (heads[i]) CHECK(bit_equal(params[i].second.grad(), *heads[i]));
    }
  }
  net.set_heads_only(false);
}

TEST_CASE("GoPolicy: configs saved before \"chain\" existed load as chain action", "[policy]") {
  nlohmann::json j = small_config().to_json();
  j.erase("chain");
  CHECK(PolicyConfig::from_json(j).chain == "hidden");  // a new config gets the default
  CHECK(PolicyConfig::from_json(PolicyConfig::legacy_policy_json(j)).chain == "action");
  j["chain"] = "hidden";
  CHECK(PolicyConfig::from_json(PolicyConfig::legacy_policy_json(j)).chain == "hidden");
  j["chain"] = "both";
  CHECK_THROWS_WITH(PolicyConfig::from_json(j), Catch::Contains("\"chain\" is 'both', expected hidden or action"));
}

TEST_CASE("GoPolicy: with a memory covering the graph, the segment length does not change the output",
          "[policy]") {
  const OpGraph g = random_op_graph(45, 4);
  const PolicyGraph pg = PolicyGraph::from_graph(g);
  PolicyConfig cfg = small_config();
  cfg.causal = true;
  cfg.memory_length = 64;  // >= n
  cfg.layers_per_task = 2;
  Actions actions;
  PolicyOutput ref;
  for (std::int64_t seg : {45, 1, 7, 16, 100}) {
    cfg.segment_length = seg;
    GoPolicy net(cfg);  // same seed: same weights
    if (seg == 45) {
      Rng rng(3);
      actions = net.act(pg, 3, &rng);
      ref = net.forward(pg, 3, Decode::given, &actions);
      continue;
    }
    INFO("segment length " << seg);
    const PolicyOutput o = net.forward(pg, 3, Decode::given, &actions);
    go::test::require_close(o.device_logits.value(), ref.device_logits.value(), 1e-5, 1e-5, "device logits");
    go::test::require_close(o.priority_logits.value(), ref.priority_logits.value(), 1e-5, 1e-5, "priority logits");
    go::test::require_close(o.fusion_logits.value(), ref.fusion_logits.value(), 1e-5, 1e-5, "fusion logits");
    go::test::require_close(o.log_prob.value(), ref.log_prob.value(), 1e-5, 1e-5, "log-probabilities");
    go::test::require_close(o.value.value(), ref.value.value(), 1e-5, 1e-5, "value");
  }
  // Without causality, a full memory still lets a segment see only the rows up to its end,
  // so the output does depend on the segment length.
  cfg.causal = false;
  cfg.segment_length = 45;
  const PolicyOutput a = GoPolicy(cfg).forward(pg, 3, Decode::given, &actions);
  cfg.segment_length = 7;
  const PolicyOutput b = GoPolicy(cfg).forward(pg, 3, Decode::given, &actions);
  CHECK_FALSE(bit_equal(a.device_logits.value(), b.device_logits.value()));
}

TEST_CASE("GoPolicy: a saved and reloaded policy gives bit-identical outputs", "[policy]") {
  const OpGraph g = random_op_graph(60, 5);
  const PolicyGraph pg = PolicyGraph::from_graph(g);
  PolicyConfig cfg = small_config();
  cfg.seed = 99;
  GoPolicy net(cfg);
  // move the weights away from their initialization
  for (auto& [name, p] : net.named_parameters()) {
    Rng r(std::hash<std::string>{}(name));
    float* x = p.value().f32();
    for (std::int64_t i = 0; i < p.numel(); ++i) x[i] += r.uniform(-0.05f, 0.05f);
  }
  const std::string path = temp_path("saved.params");
  net.save_policy(path);
  auto loaded = GoPolicy::load_policy(path);
  CHECK(loaded->config().to_json() == cfg.to_json());
  Rng r1(42), r2(42);
  const PolicyOutput a = net.forward(pg, 4, Decode::sample, nullptr, &r1);
  const PolicyOutput b = loaded->forward(pg, 4, Decode::sample, nullptr, &r2);
  CHECK(bit_equal(a.device_logits.value(), b.device_logits.value()));
  CHECK(bit_equal(a.priority_logits.value(), b.priority_logits.value()));
  CHECK(bit_equal(a.fusion_logits.value(), b.fusion_logits.value()));
  CHECK(bit_equal(a.log_prob.value(), b.log_prob.value()));
  CHECK(bit_equal(a.entropy.value(), b.entropy.value()));
  CHECK(bit_equal(a.value.value(), b.value.value()));
  CHECK(bit_equal(a.actions.device, b.actions.device));
  CHECK(bit_equal(a.actions.priority, b.actions.priority));
  CHECK(bit_equal(a.actions.fuse, b.actions.fuse));
  // a different architecture refuses the file, naming the mismatch
  PolicyConfig other = cfg;
  other.hidden = 16;
  GoPolicy wrong(other);
  CHECK_THROWS_WITH(wrong.load(path), Catch::Contains("expected"));
  std::remove(path.c_str());
}

namespace {
// Independent check of a decision: groups on one device, and the graph of groups acyclic.
void require_valid(const OpGraph& g, const Decision& d) {
  const auto n = static_cast<std::size_t>(g.num_ops());
  std::vector<OpId> unit(n);
  for (std::size_t i = 0; i < n; ++i) unit[i] = d.fusion_group[i] < 0 ? static_cast<OpId>(i) : d.fusion_group[i];
  for (std::size_t i = 0; i < n; ++i) {
    REQUIRE(d.device[i] >= 0);
    REQUIRE(d.device[i] < d.num_devices);
    if (d.fusion_group[i] >= 0) REQUIRE(d.device[i] == d.device[static_cast<std::size_t>(d.fusion_group[i])]);
  }
  std::vector<int> indeg(n, 0);
  std::vector<std::vector<OpId>> out(n);
  for (std::size_t v = 0; v < n; ++v)
    for (OpId p : g.pred(static_cast<OpId>(v)))
      if (unit[static_cast<std::size_t>(p)] != unit[v]) {
        out[static_cast<std::size_t>(unit[static_cast<std::size_t>(p)])].push_back(unit[v]);
        ++indeg[static_cast<std::size_t>(unit[v])];
      }
  std::vector<OpId> q;
  std::size_t units = 0;
  for (std::size_t v = 0; v < n; ++v)
    if (unit[v] == static_cast<OpId>(v)) {
      ++units;
      if (indeg[v] == 0) q.push_back(static_cast<OpId>(v));
    }
  for (std::size_t h = 0; h < q.size(); ++h)
    for (OpId w : out[static_cast<std::size_t>(q[h])])
      if (--indeg[static_cast<std::size_t>(w)] == 0) q.push_back(w);
  REQUIRE(q.size() == units);
}
}  // namespace

TEST_CASE("decode: fusion groups are single-device and convex, colocation is respected, to_plan is valid",
          "[policy]") {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    const OpGraph g = random_op_graph(300, seed, 5);
    const PolicyGraph pg = PolicyGraph::from_graph(g);
    Rng rng(seed);
    Actions a;
    const int D = 1 + static_cast<int>(seed % 3);
    a.device = Tensor::empty(Shape{300}, DType::i32);
    a.priority = Tensor::empty(Shape{300}, DType::i32);
    a.fuse = Tensor::empty(Shape{300}, DType::i32);
    for (int r = 0; r < 300; ++r) {
      a.device.data<std::int32_t>()[r] = static_cast<std::int32_t>(rng.uniform_int(static_cast<std::uint64_t>(D)));
      a.priority.data<std::int32_t>()[r] = static_cast<std::int32_t>(rng.uniform_int(4));
      a.fuse.data<std::int32_t>()[r] = rng.uniform() < 0.8f ? 1 : 0;
    }
    const Decision d = decode(g, pg, a, D);
    INFO("seed " << seed << ": " << d.fused << " of " << d.fuse_requested << " fusions accepted, " << d.refused_device
                 << " refused (device), " << d.refused_cycle << " refused (cycle)");
    require_valid(g, d);
    CHECK(d.fused > 0);
    if (D == 1) CHECK(d.refused_device == 0);
    for (OpId i = 0; i < g.num_ops(); ++i) CHECK(d.priority[static_cast<std::size_t>(i)] ==
                                                 a.priority.data<std::int32_t>()[pg.row_of[static_cast<std::size_t>(i)]]);
    const Plan plan = to_plan(d);
    CHECK(check_plan(g, plan, D) == "");
    // each colocation group on the device its first op in topological order drew
    std::map<std::int32_t, std::int32_t> first;
    int colocated = 0;
    for (OpId v : g.topo_order()) {
      const std::int32_t c = g.op(v).colocation;
      if (c < 0) continue;
      const auto [it, fresh] =
          first.emplace(c, a.device.data<std::int32_t>()[pg.row_of[static_cast<std::size_t>(v)]]);
      CHECK(d.device[static_cast<std::size_t>(v)] == it->second);
      colocated += fresh ? 0 : 1;
    }
    CHECK(colocated > 10);
    PolicyGraph unlisted = pg;  // without the policy graph's list of colocated ops: read from the graph
    unlisted.colocated.clear();
    unlisted.colocation_groups = -1;
    CHECK(decode(g, unlisted, a, D).device == d.device);
    if (seed <= 3) {  // colocation ids far apart (not usable as indices): the same decision
      const OpGraph sparse = random_op_graph(300, seed, 5, 400'000'000);
      const Decision ds = decode(sparse, PolicyGraph::from_graph(sparse), a, D);
      require_valid(sparse, ds);
      CHECK(ds.device == d.device);
      CHECK(ds.fusion_group == d.fusion_group);
    }
    // Other priorities and ties over the same devices and fusion actions: taking d's placement and
    // fusion gives what decoding them all again gives.
    Actions other{a.device, Tensor::empty(Shape{300}, DType::i32), a.fuse};
    for (int r = 0; r < 300; ++r) other.priority.data<std::int32_t>()[r] = static_cast<std::int32_t>(rng.uniform_int(4));
    for (TieOrder ties : {TieOrder::program, TieOrder::first_ready, TieOrder::latest}) {
      const DecodeOptions o{.ties = ties};
      const Decision again = decode(g, pg, other, D, o);
      const Decision taken = decode(g, pg, other, D, o, &d);
      CHECK(taken.device == again.device);
      CHECK(taken.priority == again.priority);
      CHECK(taken.tie == again.tie);
      CHECK(taken.fusion_group == again.fusion_group);
      CHECK(taken.num_groups == again.num_groups);
    }
    if (D > 1) {  // device actions that differ from the decision whose placement is taken
      Actions moved{a.device.clone(), a.priority, a.fuse};
      std::int32_t& dev = moved.device.data<std::int32_t>()[0];
      dev = (dev + 1) % D;
      CHECK_THROWS_WITH(decode(g, pg, moved, D, {.colocate = false}, &d), Catch::Contains("differs from the decision"));
    }
  }
  // A tight search budget only refuses more merges.
  const OpGraph g = random_op_graph(200, 77, 4);
  const PolicyGraph pg = PolicyGraph::from_graph(g);
  GoPolicy net(small_config());
  Rng rng(1);
  const Actions a = net.act(pg, 2, &rng);
  const Decision full = decode(g, pg, a, 2);
  const Decision tight = decode(g, pg, a, 2, {.colocate = true, .search_budget = 1});
  require_valid(g, full);
  require_valid(g, tight);
  CHECK(tight.fused <= full.fused);
  CHECK(check_plan(g, to_plan(full), 2) == "");
}

// DecodeLog: a decode that starts from a base's log (its merges replayed up to the first op whose
// device or fuse action differs) gives what a whole decode gives, field for field, and logs what a
// whole decode logs, so logs chain; a base made with other devices or options is not used.
TEST_CASE("decode: from a base's log, a decode gives the whole decode's decision and log", "[policy]") {
  auto same = [](const Decision& x, const Decision& y) {
    CHECK(x.device == y.device);
    CHECK(x.priority == y.priority);
    CHECK(x.tie == y.tie);
    CHECK(x.fusion_group == y.fusion_group);
    CHECK(x.fuse_requested == y.fuse_requested);
    CHECK(x.fused == y.fused);
    CHECK(x.refused_device == y.refused_device);
    CHECK(x.refused_rule == y.refused_rule);
    CHECK(x.refused_cycle == y.refused_cycle);
    CHECK(x.num_groups == y.num_groups);
  };
  auto same_log = [](const DecodeLog& x, const DecodeLog& y) {
    CHECK(x.device == y.device);
    CHECK(x.fuse == y.fuse);
    CHECK(x.outcome == y.outcome);
    REQUIRE(x.merges.size() == y.merges.size());
    for (std::size_t k = 0; k < x.merges.size(); ++k) {
      CHECK(x.merges[k].a == y.merges[k].a);
      CHECK(x.merges[k].b == y.merges[k].b);
      CHECK(x.merges[k].position == y.merges[k].position);
      CHECK(x.merges[k].bound == y.merges[k].bound);
      CHECK(x.merges[k].exact == y.merges[k].exact);
    }
  };
  std::int64_t replayed = 0;  // merges the bases gave (so that the test sees the prefix taken)
  std::int64_t decided_whole = 0, decided_from = 0;  // decisions made by merging
  auto check = [&](const OpGraph& g, int D, std::uint64_t seed, int moves) {
    const PolicyGraph pg = PolicyGraph::from_graph(g);
    const std::int32_t n = g.num_ops();
    Rng rng(seed);
    const Actions a = run_actions(n, D, rng, 3, 0.9f);
    for (const DecodeOptions& o : {DecodeOptions{}, DecodeOptions{.colocate = false}, DecodeOptions{.join = FusionJoin::main},
                                   DecodeOptions{.search_budget = 3}}) {
      DecodeLog log;
      const Decision whole0 = decode(g, pg, a, D, o, nullptr, nullptr, &log);
      REQUIRE(log.device.size() == static_cast<std::size_t>(n));
      same(decode(g, pg, a, D, o, nullptr, &log), whole0);  // the same actions: every merge replayed
      Actions cur = a.clone();
      for (int m = 0; m < moves; ++m) {
        // a run of rows to one device (as fine-tuning's block moves), a few fuse flips, or new levels
        Actions next = cur.clone();
        const auto begin = static_cast<std::int32_t>(rng.uniform_int(static_cast<std::uint64_t>(n)));
        const std::int32_t end = std::min(n, begin + 1 + static_cast<std::int32_t>(rng.uniform_int(60)));
        const int kind = static_cast<int>(rng.uniform_int(3));
        for (std::int32_t r = begin; r < end; ++r) {
          if (kind == 0) next.device.data<std::int32_t>()[r] = static_cast<std::int32_t>(m % D);
          if (kind == 1 && rng.uniform() < 0.2f) next.fuse.data<std::int32_t>()[r] ^= 1;
          if (kind == 2) next.priority.data<std::int32_t>()[r] = static_cast<std::int32_t>(rng.uniform_int(3));
        }
        DecodeLog whole_log, from_log;
        const Decision whole = decode(g, pg, next, D, o, nullptr, nullptr, &whole_log);
        const Decision from = decode(g, pg, next, D, o, nullptr, &log, &from_log);
        same(from, whole);
        same_log(from_log, whole_log);
        for (const auto& mg : log.merges) replayed += mg.position < begin ? 1 : 0;
        decided_whole += whole_log.decided;
        decided_from += from_log.decided;
        if (rng.uniform() < 0.5f) {  // the next moves from this one's log (a new anchor), or from the old
          log = std::move(from_log);
          cur = std::move(next);
        }
      }
      // a base for another device count or join is not used
      same(decode(g, pg, a, D + 1, o, nullptr, &log), decode(g, pg, a, D + 1, o));
      DecodeOptions other = o;
      other.join = o.join == FusionJoin::main ? FusionJoin::all : FusionJoin::main;
      same(decode(g, pg, a, D, other, nullptr, &log), decode(g, pg, a, D, other));
    }
    // The prefix really is the base's: with the base's merges taken out, the same actions decode
    // with no groups before the op the merges stop at.
    DecodeLog log;
    const Decision whole = decode(g, pg, a, D, {}, nullptr, nullptr, &log);
    CHECK_THROWS_WITH(decode(g, pg, a, D, {}, nullptr, &log, &log), Catch::Contains("two objects"));
    if (whole.num_groups > 0) {
      DecodeLog emptied = log;
      emptied.merges.clear();
      const Decision from = decode(g, pg, a, D, {}, nullptr, &emptied);
      CHECK(from.num_groups == 0);
      CHECK(from.fused == whole.fused);  // the counts come from the log's outcomes
    }
  };
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    INFO("random graph, seed " << seed);
    check(random_op_graph(300, seed, 5), 1 + static_cast<int>(seed % 4), seed, 12);
  }
  for (const char* spec : {"zoo:rnnlm2", "zoo:wavenet2", "zoo:inception_v3"}) {
    INFO(spec);
    check(make_training_graph(load_graph(spec)), 2, 5, 6);
  }
  CHECK(replayed > 1000);
  CHECK(decided_from * 10 < decided_whole);  // most decisions after a move are the base's
}

// After the first changed op, a decision is taken from the base only where what it read is as the
// base had it. Here v's cycle search in the base goes from p through e into the group {c, s2, s1}
// (entered at s1, left from s2, which c feeds) and on through t to v, so v joins t instead of p;
// moving s1 to the other device takes it out of that group, and v joins p. Nothing v reads
// directly changes (its producers, their devices and groups), only a group its search went
// through. (q-u1-u2-u3-r, a chain fused on its own, runs beside them: the decisions on it after
// the move are the base's.)
TEST_CASE("decode: from a base's log, a decision whose cycle search went through a changed group is made again",
          "[policy]") {
  go_test::Tiny t;
  const OpKind k = OpKind::relu;
  const OpId c = t.op("c", 1, 1000, {}, 0, k), p = t.op("p", 1, 1000, {}, 0, k), e = t.op("e", 1, 10, {p}, 0, k);
  const OpId s1 = t.op("s1", 1, 10, {c, e}, 0, k), s2 = t.op("s2", 1, 10, {c}, 0, k), tt = t.op("t", 1, 10, {s2}, 0, k);
  const OpId q = t.op("q", 1, 1000, {}, 0, k), u1 = t.op("u1", 1, 10, {q}, 0, k), u2 = t.op("u2", 1, 10, {u1}, 0, k);
  const OpId u3 = t.op("u3", 1, 10, {u2}, 0, k), r = t.op("r", 1, 10, {u3}, 0, k), v = t.op("v", 1, 10, {p, tt}, 0, k);
  const OpGraph g = t.build();
  REQUIRE(g.topo_position(s1) < g.topo_position(u2));
  REQUIRE(g.topo_position(u2) < g.topo_position(v));
  const PolicyGraph pg = PolicyGraph::from_graph(g);
  const std::int32_t n = g.num_ops();
  Actions a{Tensor::zeros(Shape{n}, DType::i32), Tensor::zeros(Shape{n}, DType::i32), Tensor::zeros(Shape{n}, DType::i32)};
  for (OpId x : {c, p, s1, s2, q, u1, u2, u3, r, v}) a.fuse.data<std::int32_t>()[pg.row_of[static_cast<std::size_t>(x)]] = 1;
  const DecodeOptions o{.join = FusionJoin::main};
  DecodeLog log;
  const Decision before = decode(g, pg, a, 2, o, nullptr, nullptr, &log);
  CHECK(before.fusion_group[static_cast<std::size_t>(v)] == before.fusion_group[static_cast<std::size_t>(tt)]);
  CHECK(before.fusion_group[static_cast<std::size_t>(s1)] == before.fusion_group[static_cast<std::size_t>(s2)]);
  const auto at_v = static_cast<std::size_t>(g.topo_position(v));
  REQUIRE(log.read_off.size() == static_cast<std::size_t>(n) + 1);
  const std::vector<std::int32_t> read_at_v(log.reads.begin() + log.read_off[at_v], log.reads.begin() + log.read_off[at_v + 1]);
  CHECK(std::find(read_at_v.begin(), read_at_v.end(), g.topo_position(s1)) != read_at_v.end());
  Actions moved = a.clone();
  moved.device.data<std::int32_t>()[pg.row_of[static_cast<std::size_t>(s1)]] = 1;
  DecodeLog whole_log, from_log;
  const Decision whole = decode(g, pg, moved, 2, o, nullptr, nullptr, &whole_log);
  const Decision from = decode(g, pg, moved, 2, o, nullptr, &log, &from_log);
  CHECK(whole.fusion_group[static_cast<std::size_t>(v)] == whole.fusion_group[static_cast<std::size_t>(p)]);
  CHECK(from.fusion_group == whole.fusion_group);
  CHECK(from.fused == whole.fused);
  CHECK(from_log.decided < whole_log.decided);  // r's decision (after v's) is the base's
}

// The same on many random graphs of fusable ops whose groups fan out from shared producers (so
// paths between groups go through their members), with single rows moved and fuse actions flipped
// one after another, tight search budgets among the options.
TEST_CASE("decode: from a base's log after single-row moves on fan-out graphs, the whole decode's groups", "[policy]") {
  std::int64_t decided_whole = 0, decided_from = 0, differ = 0;
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    Rng rng(seed);
    GraphBuilder b(GraphInfo{});
    const std::int32_t n = 120;
    for (std::int32_t i = 0; i < n; ++i) {
      OpSpec s;
      s.name = "op" + std::to_string(i);
      s.kind = rng.uniform() < 0.8f ? OpKind::relu : OpKind::add;
      TensorSpec out;
      out.shape = {static_cast<std::int64_t>(1 + rng.uniform_int(64)), 16};
      s.outputs.push_back(out);
      const int k = i == 0 ? 0 : 1 + static_cast<int>(rng.uniform_int(2));
      for (int j = 0; j < k; ++j)
        s.inputs.push_back(TensorRef{static_cast<std::int64_t>(rng.uniform_int(static_cast<std::uint64_t>(i))), 0});
      b.add_op(std::move(s));
    }
    const OpGraph g = b.build();
    const PolicyGraph pg = PolicyGraph::from_graph(g);
    const int D = 2 + static_cast<int>(seed % 2);
    Actions a = run_actions(n, D, rng, 0, 0.7f);
    for (const DecodeOptions& o : {DecodeOptions{}, DecodeOptions{.join = FusionJoin::main},
                                   DecodeOptions{.search_budget = 6}, DecodeOptions{.search_budget = 12, .join = FusionJoin::main}}) {
      DecodeLog log;
      Decision last = decode(g, pg, a, D, o, nullptr, nullptr, &log);
      Actions cur = a.clone();
      for (int m = 0; m < 30; ++m) {
        Actions next = cur.clone();
        const auto row = static_cast<std::int32_t>(rng.uniform_int(static_cast<std::uint64_t>(n)));
        if (rng.uniform() < 0.7f) next.device.data<std::int32_t>()[row] = static_cast<std::int32_t>(rng.uniform_int(static_cast<std::uint64_t>(D)));
        else next.fuse.data<std::int32_t>()[row] ^= 1;
        DecodeLog whole_log, from_log;
        const Decision whole = decode(g, pg, next, D, o, nullptr, nullptr, &whole_log);
        const Decision from = decode(g, pg, next, D, o, nullptr, &log, &from_log);
        CHECK(from.fusion_group == whole.fusion_group);
        CHECK(from.refused_cycle == whole.refused_cycle);
        CHECK(from.refused_rule == whole.refused_rule);
        differ += whole.fusion_group != last.fusion_group ? 1 : 0;
        decided_whole += whole_log.decided;
        decided_from += from_log.decided;
        if (rng.uniform() < 0.7f) {
          log = std::move(from_log);
          cur = std::move(next);
          last = whole;
        }
      }
    }
  }
  CHECK(differ > 1000);
  CHECK(decided_from * 4 < decided_whole);
}

// The anchor's fused candidates (go/rl/anchor.hpp) are decoded from "fuse into producers" on every
// op: on graphs without ops whose inputs are all control edges, those are the XLA-like heuristic's
// groups, and a plan decoded so is expressed by its own actions.
TEST_CASE("decode: fusing every op builds the XLA-like heuristic's groups, which decode back to themselves",
          "[policy]") {
  auto groups = [](std::vector<std::int32_t> f, std::int32_t n) {  // no groups: an empty plan.fusion
    if (f.empty()) f.assign(static_cast<std::size_t>(n), -1);
    return f;
  };
  auto check = [&](const OpGraph& g, int D, std::uint64_t seed) {
    const PolicyGraph pg = PolicyGraph::from_graph(g);
    const std::int32_t n = g.num_ops();
    Rng rng(seed);
    const Actions a = run_actions(n, D, rng, 0, 1.f);
    const Decision d = decode(g, pg, a, D);
    require_valid(g, d);
    CHECK(d.num_groups > 0);
    Plan xla;
    xla.device = d.device;  // after colocation
    apply_xla_fusion(g, xla);
    CHECK(groups(xla.fusion, n) == d.fusion_group);
    const Decision back = decode(g, pg, actions_from_plan(g, pg, to_plan(d), 4), D);
    CHECK(back.device == d.device);
    CHECK(back.fusion_group == d.fusion_group);
    // fusion into main producers: legal groups, and its actions decode back too
    const Decision m = decode(g, pg, a, D, {.join = FusionJoin::main});
    require_valid(g, m);
    CHECK(m.fuse_requested == d.fuse_requested);
    const Decision m_back = decode(g, pg, actions_from_plan(g, pg, to_plan(m), 4), D, {.join = FusionJoin::main});
    CHECK(m_back.fusion_group == m.fusion_group);
  };
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    INFO("random graph, seed " << seed);
    check(random_op_graph(300, seed, 5), 1 + static_cast<int>(seed % 3), seed);
  }
  for (const char* spec : {"zoo:rnnlm2", "zoo:wavenet2", "zoo:inception_v3"}) {
    INFO(spec);
    check(make_training_graph(load_graph(spec)), 2, 3);
  }
}

// FusionJoin::main: an op joins one producer's group, the largest input's that can take it, so an
// op reading two streams (WaveNet's concat of its chunk with the previous chunk's small tail) never
// merges them; decoded with main, the plan's actions give its groups back.
TEST_CASE("decode: fusion into the main producer joins one group, the largest input's", "[policy]") {
  go_test::Tiny t;
  const OpId x = t.op("x", 0, 4000, {}, 0, OpKind::input);
  const OpId y = t.op("y", 0, 40, {}, 0, OpKind::input);
  const OpId stream = t.op("stream", 0.1, 4000, {x}, 0, OpKind::relu);
  const OpId tail = t.op("tail", 0.1, 40, {y}, 0, OpKind::slice);
  const OpId cat = t.op("cat", 0.1, 4040, {tail, stream}, 0, OpKind::concat);  // small input first
  const OpId out = t.op("out", 0.1, 4040, {cat, cat}, 0, OpKind::add);          // one producer, twice
  const OpGraph g = t.build();
  const PolicyGraph pg = PolicyGraph::from_graph(g);
  std::vector<std::pair<std::int64_t, OpId>> order;
  fusion_producers_largest_first(g, cat, order);
  REQUIRE(order.size() == 2);
  CHECK(order[0] == std::pair<std::int64_t, OpId>{4000, stream});
  CHECK(order[1] == std::pair<std::int64_t, OpId>{40, tail});
  fusion_producers_largest_first(g, out, order);
  CHECK(order == std::vector<std::pair<std::int64_t, OpId>>{{4040, cat}});
  fusion_producers_largest_first(g, x, order);
  CHECK(order.empty());
  const std::int32_t n = g.num_ops();
  Actions a{Tensor::zeros(Shape{n}, DType::i32), Tensor::zeros(Shape{n}, DType::i32), Tensor::zeros(Shape{n}, DType::i32)};
  for (OpId v : {stream, tail, cat, out}) a.fuse.data<std::int32_t>()[pg.row_of[static_cast<std::size_t>(v)]] = 1;
  auto group = [](const Decision& d, OpId v) { return d.fusion_group[static_cast<std::size_t>(v)]; };
  const Decision all = decode(g, pg, a, 2);  // PolicyGraph::join is all: one kernel of both streams
  CHECK(all.num_groups == 1);
  CHECK((group(all, tail) == group(all, cat) && group(all, stream) == group(all, cat) && group(all, out) == group(all, cat)));
  const Decision main = decode(g, pg, a, 2, {.join = FusionJoin::main});
  require_valid(g, main);
  CHECK(main.num_groups == 1);
  CHECK(group(main, cat) >= 0);
  CHECK(group(main, stream) == group(main, cat));
  CHECK(group(main, out) == group(main, cat));
  CHECK(group(main, tail) == -1);  // the small stream stays apart
  CHECK(main.fused == 2);          // cat and out (stream and tail read sources only)
  // the PolicyGraph's join is decode's default
  PolicyGraph pg_main = pg;
  pg_main.join = FusionJoin::main;
  CHECK(decode(g, pg_main, a, 2).fusion_group == main.fusion_group);
  CHECK(decode(g, pg_main, a, 2, {.join = FusionJoin::all}).fusion_group == all.fusion_group);
  // the largest producer on another device: the next one, the tail, takes it
  a.device.data<std::int32_t>()[pg.row_of[static_cast<std::size_t>(stream)]] = 1;
  const Decision moved = decode(g, pg, a, 2, {.join = FusionJoin::main});
  require_valid(g, moved);
  CHECK(group(moved, tail) == group(moved, cat));
  CHECK(group(moved, stream) == -1);
  // actions_from_plan of a plan decoded with main decode back to it with main
  for (const Decision* d : {&main, &moved}) {
    const Actions back = actions_from_plan(g, pg, to_plan(*d), 4);
    CHECK(decode(g, pg, back, 2, {.join = FusionJoin::main}).fusion_group == d->fusion_group);
  }
}

TEST_CASE("decode: ops of one priority level run in program order, not first-ready order", "[policy]") {
  // Four segments a_s -> b_s (1 ms each, device 0) -> c_s (2 ms, device 1). First-ready runs every
  // a before any b, so c_0 waits until 5 ms and the c's end near 13 ms; program order runs a_s, b_s
  // segment by segment, c_0 starts near 2 ms and the step ends near 10 ms (+ 0.1 ms per transfer).
  go_test::Tiny t;
  std::vector<OpId> a, b, c;
  for (int s = 0; s < 4; ++s) {
    a.push_back(t.op("a" + std::to_string(s), 1.0, 1000));
    b.push_back(t.op("b" + std::to_string(s), 1.0, 1000, {a.back()}));
    c.push_back(t.op("c" + std::to_string(s), 2.0, 1000, {b.back()}));
  }
  const OpGraph g = t.build();
  const PolicyGraph pg = PolicyGraph::from_graph(g);
  const auto n = static_cast<std::size_t>(g.num_ops());
  REQUIRE(pg.tie.size() == n);
  const std::vector<OpId> prog = program_order(g);
  for (std::size_t k = 0; k < n; ++k) {
    const float tie = pg.tie[static_cast<std::size_t>(prog[k])];
    CHECK(tie >= 0.f);
    CHECK(tie < 1.f);
    if (k > 0) CHECK(tie < pg.tie[static_cast<std::size_t>(prog[k - 1])]);
  }
  Actions act{Tensor::zeros(Shape{static_cast<std::int64_t>(n)}, DType::i32),
              Tensor::zeros(Shape{static_cast<std::int64_t>(n)}, DType::i32),
              Tensor::zeros(Shape{static_cast<std::int64_t>(n)}, DType::i32)};
  for (OpId v : c) act.device.data<std::int32_t>()[pg.row_of[static_cast<std::size_t>(v)]] = 1;
  act.priority.data<std::int32_t>()[pg.row_of[static_cast<std::size_t>(c[3])]] = 2;  // a level above the rest
  const Plan plan = to_plan(decode(g, pg, act, 2));
  for (std::size_t i = 0; i < n; ++i) CHECK(std::floor(plan.priority[i]) == (i == static_cast<std::size_t>(c[3]) ? 2.f : 0.f));
  // levels survive the round trip through actions
  const Actions back = actions_from_plan(g, pg, plan, 8);
  for (std::size_t r = 0; r < n; ++r)
    CHECK(back.priority.data<std::int32_t>()[r] == act.priority.data<std::int32_t>()[r]);
  const go::Cluster cl = go_test::test_cluster(2);
  const double program = go::Simulator(g, cl).simulate(plan).step_time * 1e3;
  Plan first_ready = plan;
  first_ready.priority.clear();
  const double fifo = go::Simulator(g, cl).simulate(first_ready).step_time * 1e3;
  CHECK(program == Approx(10.1).margin(0.2));
  CHECK(fifo == Approx(13.1).margin(0.2));
  // TieOrder::first_ready decodes the same actions without the ties; so does a PolicyGraph whose
  // anchor chose first-ready order
  const Plan fr = to_plan(decode(g, pg, act, 2, {.ties = TieOrder::first_ready}));
  for (std::size_t i = 0; i < n; ++i) CHECK(fr.priority[i] == std::floor(plan.priority[i]));
  CHECK(go::Simulator(g, cl).simulate(fr).step_time * 1e3 == Approx(fifo));
  PolicyGraph pg_fr = PolicyGraph::from_graph(g);
  pg_fr.ties = TieOrder::first_ready;
  CHECK(to_plan(decode(g, pg_fr, act, 2)).priority == fr.priority);

  // Neither order is best everywhere: a1 -> a2 -> a3 -> a4 and b1 (1 ms each, device 0), b1 -> c
  // (5 ms, device 1). Program order finishes chain a first, so c starts after 5 ms (end 10.1 ms);
  // first-ready runs b1 second (ready since 0), so c starts at 2.1 ms and ends at 7.1 ms.
  go_test::Tiny t2;
  OpId prev = t2.op("a1", 1.0, 1000);
  for (int i = 2; i <= 4; ++i) prev = t2.op("a" + std::to_string(i), 1.0, 1000, {prev});
  const OpId b1 = t2.op("b1", 1.0, 1000);
  const OpId c1 = t2.op("c", 5.0, 1000, {b1});
  const OpGraph g2 = t2.build();
  const PolicyGraph pg2 = PolicyGraph::from_graph(g2);
  const auto n2 = static_cast<std::int64_t>(g2.num_ops());
  Actions act2{Tensor::zeros(Shape{n2}, DType::i32), Tensor::zeros(Shape{n2}, DType::i32),
               Tensor::zeros(Shape{n2}, DType::i32)};
  act2.device.data<std::int32_t>()[pg2.row_of[static_cast<std::size_t>(c1)]] = 1;
  const double prog2 =
      go::Simulator(g2, cl).simulate(to_plan(decode(g2, pg2, act2, 2, {.ties = TieOrder::program}))).step_time * 1e3;
  const double fifo2 =
      go::Simulator(g2, cl).simulate(to_plan(decode(g2, pg2, act2, 2, {.ties = TieOrder::first_ready}))).step_time * 1e3;
  CHECK(prog2 == Approx(10.1).margin(0.2));
  CHECK(fifo2 == Approx(7.1).margin(0.2));

  // Latest-first: a0 (1 ms) feeds two side ops s1, s2 and a chain a1 -> a2 -> a3 (1 ms each, all on
  // device 0); a3 feeds d (5 ms, device 1). The rows (Kahn's order) are a0, s1, s2, a1, a2, a3, d.
  // First-ready runs s1 and s2 before a1 (ready at the same time, earlier rows): d starts at 6.1 ms
  // and ends at 11.1. Latest-first runs the ready op of the latest row: a1, a2, a3 back to back, d
  // starts at 4.1 ms and ends at 9.1 while s1 and s2 fill device 0 until 6.
  go_test::Tiny t3;
  const OpId a0 = t3.op("a0", 1.0, 1000);
  t3.op("s1", 1.0, 1000, {a0});
  t3.op("s2", 1.0, 1000, {a0});
  OpId chain = a0;
  for (int i = 1; i <= 3; ++i) chain = t3.op("a" + std::to_string(i), 1.0, 1000, {chain});
  const OpId d3 = t3.op("d", 5.0, 1000, {chain});
  const OpGraph g3 = t3.build();
  PolicyGraph pg3 = PolicyGraph::from_graph(g3);
  const auto n3 = static_cast<std::int64_t>(g3.num_ops());
  REQUIRE(g3.name(pg3.order[1]) == "s1");
  REQUIRE(g3.name(pg3.order[3]) == "a1");
  Actions act3{Tensor::zeros(Shape{n3}, DType::i32), Tensor::zeros(Shape{n3}, DType::i32),
               Tensor::zeros(Shape{n3}, DType::i32)};
  act3.device.data<std::int32_t>()[pg3.row_of[static_cast<std::size_t>(d3)]] = 1;
  const Decision latest = decode(g3, pg3, act3, 2, {.ties = TieOrder::latest});
  REQUIRE(latest.tie.size() == static_cast<std::size_t>(n3));
  for (std::int64_t r = 0; r < n3; ++r) {
    const float tie = latest.tie[static_cast<std::size_t>(pg3.order[static_cast<std::size_t>(r)])];
    CHECK(tie >= 0.f);
    CHECK(tie < 1.f);
    if (r > 0) CHECK(tie > latest.tie[static_cast<std::size_t>(pg3.order[static_cast<std::size_t>(r - 1)])]);
  }
  const go::Simulator sim3(g3, cl);
  CHECK(sim3.simulate(to_plan(latest)).step_time * 1e3 == Approx(9.1).margin(0.2));
  CHECK(sim3.simulate(to_plan(decode(g3, pg3, act3, 2, {.ties = TieOrder::first_ready}))).step_time * 1e3 ==
        Approx(11.1).margin(0.2));
  pg3.ties = TieOrder::latest;  // the graph's default (what the anchor sets)
  CHECK(to_plan(decode(g3, pg3, act3, 2)).priority == to_plan(latest).priority);
}

TEST_CASE("GoPolicy on a zoo training graph: one pass, decoded into a plan the simulator accepts", "[policy]") {
  const OpGraph g = make_training_graph(load_graph("zoo:rnnlm2"));
  const PolicyGraph pg = PolicyGraph::from_graph(g);
  PolicyConfig cfg = small_config();
  cfg.head_gain = 0.01f;
  GoPolicy net(cfg);
  for (int D : {2, 4}) {
    Rng rng(static_cast<std::uint64_t>(D));
    const PolicyOutput out = net.forward(pg, D, Decode::sample, nullptr, &rng);
    CHECK(out.device_logits.shape() == Shape({g.num_ops(), D}));
    // a near-uniform first policy: entropy close to log D + log P + log 2 on rows that can fuse
    CHECK(out.entropy_mean.item() > 0.9f * static_cast<float>(std::log(D) + std::log(3.0)));
    const Decision d = decode(g, pg, out.actions, D);
    INFO(g.num_ops() << " ops: " << d.fused << " of " << d.fuse_requested << " fusions accepted, " << d.num_groups
                     << " groups");
    CHECK(d.fused > 0);
    require_valid(g, d);
    CHECK(check_plan(g, to_plan(d), D) == "");
  }
}

}  // namespace test_policy
