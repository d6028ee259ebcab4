// go/rl: PPO config, learning a tiny problem with a known optimum across seeds, invalid plans
// (out of memory) handled with the fixed penalty, checkpoints that resume bit-identically.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "go/baselines/gather.hpp"
#include "go/baselines/place.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/load.hpp"
#include "go/graph/training.hpp"
#include "go/nn/serialize.hpp"
#include "go/rl/all.hpp"
#include "go/rl/place_go.hpp"
#include "go/sim/sim.hpp"
#include "rl_fixtures.hpp"

namespace test_rl {
using namespace go;
using namespace go::rl;

namespace {

// Two independent chains of `len` ops (chain a: matmuls, chain b: convolutions), 1e10 FLOPs each
// (roofline-costed), small tensors; chain ops optionally own parameters.
OpGraph two_chains(int len, std::int64_t param_a = 0, std::int64_t param_b = 0) {
  GraphInfo info;
  info.name = "two_chains";
  GraphBuilder b(info);
  std::int64_t id = 0;
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < len; ++i) {
      OpSpec s;
      s.name = std::string(c ? "b" : "a") + std::to_string(i);
      s.kind = c ? OpKind::conv : OpKind::matmul;
      s.flops = 1e10;
      s.param_bytes = c ? param_b : param_a;
      TensorSpec t;
      t.shape = {16, 16};
      s.outputs.push_back(t);
      if (i > 0) s.inputs.push_back(TensorRef{id - 1, 0});
      b.add_op(std::move(s));
      ++id;
    }
  return b.build();
}

// Two v100s, the second with 16x the peak FLOP/s (so that the problem is not symmetric under a
// swap of the devices: see the note in the learning test).
Cluster two_devices(std::int64_t memory0 = 16LL << 30, std::int64_t memory1 = 16LL << 30) {
  DeviceSpec d = DeviceSpec::v100();
  d.memory_bytes = memory0;
  Cluster c = Cluster::uniform("tiny2", d, 2, 25e9, 2e-5);
  c.devices[1].spec.memory_bytes = memory1;
  c.devices[1].spec.peak_flops *= 16;
  return c;
}

// The best step time over every device assignment (no priorities, no fusion), by brute force.
double brute_force_optimum(const OpGraph& g, const Cluster& c) {
  const Simulator sim(g, c);
  SimWorkspace ws = sim.make_workspace();
  double best = std::numeric_limits<double>::infinity();
  const int n = g.num_ops();
  for (std::uint32_t m = 0; m < (1u << n); ++m) {
    Plan p;
    for (int i = 0; i < n; ++i) p.device.push_back(static_cast<std::int32_t>((m >> i) & 1u));
    const SimResult& r = sim.simulate(p, ws);
    if (r.valid) best = std::min(best, r.step_time);
  }
  return best;
}

TrainConfig tiny_config(std::uint64_t seed) {
  TrainConfig c;
  c.policy = go::test::tiny_policy_config(seed);
  c.policy.anchor = false;  // from scratch: the anchored policy has tests of its own
  c.seed = seed;
  c.updates = 40;
  c.samples = 16;
  c.epochs = 4;
  c.minibatch = 8;
  c.lr = 3e-3;
  c.entropy_coef = 0.0;
  c.threads = 2;
  return c;
}

// An anchored policy whose anchor keeps every op on device 0 (only the default placement), with
// the given head start for the anchor's actions.
TrainConfig anchored_on_default(std::uint64_t seed, float anchor_bias, std::int64_t updates) {
  TrainConfig c = tiny_config(seed);
  c.policy.anchor = true;
  c.anchor_placements = "default";
  c.policy.anchor_bias = anchor_bias;
  c.updates = updates;
  return c;
}

// Each op's position in the depth-first topological order and in the rows (topological order):
// the two orders a block move's run is drawn in.
std::pair<std::vector<std::size_t>, std::vector<std::size_t>> block_positions(const OpGraph& g) {
  const auto n = static_cast<std::size_t>(g.num_ops());
  const std::vector<OpId> dfs = depth_first_topo_order(g);
  std::vector<std::size_t> dfs_pos(n), row_pos(n);
  for (std::size_t p = 0; p < n; ++p) {
    dfs_pos[static_cast<std::size_t>(dfs[p])] = p;
    row_pos[static_cast<std::size_t>(g.topo_order()[p])] = p;
  }
  return {dfs_pos, row_pos};
}

// Two identical v100s: the split of two_chains is a symmetric choice (see the anchored tests).
Cluster same_two() { return Cluster::uniform("same2", DeviceSpec::v100(), 2, 25e9, 2e-5); }

// A chain of `n` 1 ms matmuls, each writing `out_bytes` and holding `params` bytes of parameters.
OpGraph matmul_chain(int n, std::int64_t out_bytes, std::int64_t params = 0) {
  GraphBuilder b;
  OpId prev = -1;
  for (int i = 0; i < n; ++i) {
    OpSpec s;
    s.name = "op" + std::to_string(i);
    s.kind = OpKind::matmul;
    s.time = 1e-3;
    s.param_bytes = params;
    TensorSpec t;
    t.shape_known = false;
    t.bytes = out_bytes;
    s.outputs.push_back(t);
    if (prev >= 0) s.inputs.push_back(TensorRef{prev, 0});
    prev = b.add_op(std::move(s));
  }
  return b.build();
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("go_test_rl_" + name)).string();
}

using go::test::same_parameters;

// A run of c trained without a break, and the same run checkpointed after 3 updates and resumed by a
// fresh trainer: what they must agree on is the caller's.
std::pair<std::unique_ptr<PpoTrainer>, std::unique_ptr<PpoTrainer>> full_and_resumed(const TrainConfig& c, const OpGraph& g,
                                                                                      const Cluster& cl,
                                                                                      const std::string& name) {
  const std::string ck = temp_path(name);
  auto full = std::make_unique<PpoTrainer>(c, std::vector<OpGraph>{g}, cl);
  full->train();
  {
    PpoTrainer a(c, {g}, cl);
    for (int u = 0; u < 3; ++u) a.update();
    a.save_checkpoint(ck);
  }
  auto resumed = std::make_unique<PpoTrainer>(c, std::vector<OpGraph>{g}, cl);
  resumed->load_checkpoint(ck);
  resumed->train();
  std::filesystem::remove(ck);
  CHECK(same_parameters(*full->policy(), *resumed->policy()));
  CHECK(full->task(0).best_step_time == resumed->task(0).best_step_time);
  return {std::move(full), std::move(resumed)};
}

}  // namespace

TEST_CASE("TrainConfig: defaults, JSON round trip, errors naming the key, learning-rate schedule", "[rl]") {
  const TrainConfig d;
  CHECK(d.clip == 0.2);
  CHECK(d.samples == 16);
  const TrainConfig c = TrainConfig::parse(R"({"type": "go_ppo", "samples": 8, "policy": {"hidden": 32, "heads": 4},
                                               "lr_schedule": "cosine", "ratio": "plan"})");
  CHECK(c.samples == 8);
  CHECK(c.policy.hidden == 32);
  CHECK(TrainConfig::from_json(c.to_json()).to_json() == c.to_json());
  CHECK_THROWS_WITH(TrainConfig::parse(R"({"sample": 8})"), Catch::Contains("unknown key \"sample\""));
  CHECK_THROWS_WITH(TrainConfig::parse(R"({"clip": 2})"), Catch::Contains("\"clip\""));
  CHECK_THROWS_WITH(TrainConfig::parse(R"({"policy": {"hiden": 3}})"), Catch::Contains("unknown key \"hiden\""));
  CHECK_THROWS_WITH(TrainConfig::parse(R"({"invalid_reward": -1})"), Catch::Contains("must be below"));
  CHECK(TrainConfig::parse(R"({"epochs": 1000})").epochs == 1000);
  CHECK_THROWS_WITH(TrainConfig::parse(R"({"epochs": 1001})"), Catch::Contains("\"epochs\" is 1001, must be in [1, 1000]"));
  TrainConfig s;
  s.updates = 11;
  s.lr = 1.0;
  s.lr_final = 0.1;
  CHECK(s.lr_at(0) == Approx(1.0));
  CHECK(s.lr_at(10) == Approx(0.1));
  CHECK(s.lr_at(5) == Approx(0.55));
  s.lr_schedule = "cosine";
  CHECK(s.lr_at(5) == Approx(0.55));
  CHECK(s.lr_at(10) == Approx(0.1));
  s.warmup_updates = 2;
  CHECK(s.lr_at(0) == Approx(0.5));
}

TEST_CASE("PPO: rewards, reference time, thread-count independence", "[rl]") {
  const OpGraph g = two_chains(4);
  TrainConfig c = tiny_config(3);
  c.updates = 2;
  PpoTrainer t1(c, {g}, two_devices());
  CHECK(t1.task(0).reference_kind == "default");
  CHECK(t1.task(0).reference == t1.task(0).sim->simulate(Plan{}).step_time);
  SimResult r;
  r.valid = true;
  r.step_time = t1.task(0).reference / 4;
  CHECK(t1.reward(0, r) == Approx(-0.5));
  r.valid = false;
  r.status = SimStatus::out_of_memory;
  CHECK(t1.reward(0, r) == c.invalid_reward);
  r.valid = true;
  r.step_time = t1.task(0).reference * 100;
  CHECK(t1.reward(0, r) == c.min_valid_reward);

  TrainConfig c1 = c;
  c1.threads = 1;
  PpoTrainer t2(c1, {g}, two_devices());
  t1.train();
  t2.train();
  CHECK(same_parameters(*t1.policy(), *t2.policy()));
  CHECK(t1.task(0).best_step_time == t2.task(0).best_step_time);

  // more samples than their actions alone could fit in memory: an error naming the option, before
  // anything is allocated for them (it said "out of host memory")
  // (2^31 - 1 samples of 2,000 ops: 69 TB)
  const OpGraph long_chains = two_chains(1000);
  REQUIRE(long_chains.num_ops() >= 2000);
  TrainConfig huge = c;
  huge.samples = std::numeric_limits<int>::max();
  huge.minibatch = 2;
  CHECK_THROWS_WITH(PpoTrainer(huge, {long_chains}, two_devices()),
                    Catch::Contains("\"samples\" 2147483647 x " + std::to_string(long_chains.num_ops()) + " ops need") &&
                        Catch::Contains("lower \"samples\""));
}

// Note: with two IDENTICAL devices, the uniform policy is a saddle point of this problem: the
// placement heads decide every row independently, and by the devices' symmetry the expected
// gradient of each row's device logits vanishes at p = 1/2, so PPO stays near uniform for tens of
// updates. The much faster second device breaks the symmetry: any op on the slow device takes
// longer than the whole graph on the fast one, so the optimum is every op on device 1 (with
// fusion saving launches, slightly below the brute-force optimum over unfused placements).
// With only 4x faster, seeds 3 and 4 stop in a local optimum (all on device 1, 1.98 ms) next to
// the best plan found (1.75 ms: a0 offloaded to the slow device in parallel).
TEST_CASE("PPO learns two independent chains on two devices across seeds", "[rl]") {
  const OpGraph g = two_chains(4);
  const Cluster cl = two_devices();
  const double optimum = brute_force_optimum(g, cl);
  int learned = 0;
  const int seeds = 4;
  for (int seed = 1; seed <= seeds; ++seed) {
    TrainConfig c = tiny_config(static_cast<std::uint64_t>(seed));
    c.updates = 20;
    PpoTrainer t(c, {g}, cl);
    UpdateStats first, last;
    std::int64_t reached = -1;
    t.train([&](const UpdateStats& s) {
      if (s.update == 1) first = s;
      last = s;
      if (reached < 0 && s.mean_step_time <= optimum * 1.02) reached = s.update;
    });
    const auto [plan, res] = t.greedy_plan(0);
    INFO("seed " << seed << ": optimum " << optimum * 1e3 << " ms; mean reward " << first.mean_reward << " -> "
                 << last.mean_reward << ", mean step " << first.mean_step_time * 1e3 << " -> "
                 << last.mean_step_time * 1e3 << " ms, greedy " << res.step_time * 1e3 << " ms, best "
                 << t.task(0).best_step_time * 1e3 << " ms");
    std::printf("seed %d: optimum %.3f ms; mean sampled step %.3f -> %.3f ms; greedy %.3f ms; mean sampled step "
                "within 2%% of the optimum from update %lld\n",
                seed, optimum * 1e3, first.mean_step_time * 1e3, last.mean_step_time * 1e3, res.step_time * 1e3,
                static_cast<long long>(reached));
    CHECK(t.task(0).best_step_time <= optimum * 1.001);
    CHECK(last.mean_reward > first.mean_reward);
    if (res.valid && res.step_time <= optimum * 1.001) ++learned;
  }
  CHECK(learned == seeds);
}

TEST_CASE("PPO: out-of-memory plans get the fixed penalty and training moves to valid plans", "[rl]") {
  {  // the default plan does not fit: the reference falls back to the ops' summed compute time
    PpoTrainer t(tiny_config(5), {two_chains(4, 1LL << 30, 6LL << 30)}, two_devices(26LL << 30, 5LL << 30));
    CHECK(t.task(0).reference_kind == "compute_sum");
    double s = 0;
    for (OpId i = 0; i < t.task(0).graph->num_ops(); ++i) s += t.task(0).sim->op_cost(i, 0);
    CHECK(t.task(0).reference == s);
  }
  // Chain b's ops hold 6 GB of parameters each; the fast device 1 has 5 GB, so any op of chain b
  // there is out of memory: a random plan is valid with probability 1/16.
  const OpGraph g = two_chains(4, 0, 6LL << 30);
  const Cluster cl = two_devices(32LL << 30, 5LL << 30);
  TrainConfig c = tiny_config(5);
  c.updates = 15;
  PpoTrainer t(c, {g}, cl);
  SimResult oom;
  oom.valid = false;
  oom.status = SimStatus::out_of_memory;
  oom.peak_memory = {0, 10LL << 30};  // twice device 1's capacity
  CHECK(t.reward(0, oom) == Approx(c.invalid_reward - c.oom_excess_penalty * 1.0));
  double first_invalid = -1, last_invalid = -1;
  t.train([&](const UpdateStats& s) {
    if (s.update == 1) first_invalid = s.invalid_fraction;
    if (s.update > c.updates - 3) last_invalid = std::max(last_invalid, s.invalid_fraction);
  });
  INFO("invalid fraction " << first_invalid << " -> " << last_invalid);
  CHECK(first_invalid > 0);
  CHECK(last_invalid < first_invalid);
  CHECK(t.task(0).invalid > 0);
  REQUIRE(std::isfinite(t.task(0).best_step_time));
  const SimResult r = t.task(0).sim->simulate(t.task(0).best_plan);
  CHECK(r.valid);
  CHECK(r.step_time == t.task(0).best_step_time);
  const auto [plan, greedy] = t.greedy_plan(0);
  CHECK(greedy.valid);
}

TEST_CASE("PPO: a resumed run ends bit-identical to an uninterrupted one, with its metrics CSV", "[rl]") {
  const OpGraph g = two_chains(3);
  TrainConfig c = tiny_config(9);
  c.updates = 4;
  c.samples = 4;
  c.minibatch = 2;
  c.epochs = 2;
  c.baseline = "ema";  // exercise the saved baseline state
  const std::string ck = temp_path("ckpt.goparams"), csv = temp_path("metrics.csv");
  std::filesystem::remove(csv);

  PpoTrainer full(c, {g}, two_devices());
  full.train();

  {
    PpoTrainer a(c, {g}, two_devices());
    truncate_metrics_csv(csv, 0);
    a.update();
    UpdateStats s = a.update();
    append_metrics_csv(csv, s);
    a.save_checkpoint(ck);
    append_metrics_csv(csv, a.update());  // work after the checkpoint is lost ...
  }
  PpoTrainer b(c, {g}, two_devices());
  b.load_checkpoint(ck);
  CHECK(b.updates_done() == 2);
  truncate_metrics_csv(csv, b.updates_done());  // ... and its metrics rows dropped
  b.train([&](const UpdateStats& s) { append_metrics_csv(csv, s); });
  CHECK(b.updates_done() == 4);
  CHECK(same_parameters(*full.policy(), *b.policy()));
  CHECK(full.task(0).best_step_time == b.task(0).best_step_time);
  CHECK(full.task(0).best_plan.device == b.task(0).best_plan.device);
  CHECK(full.task(0).ema == b.task(0).ema);

  std::ifstream in(csv);
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(in, line)) lines.push_back(line);
  REQUIRE(lines.size() == 4);  // header + updates 2, 3, 4
  CHECK(lines[0].rfind("update,", 0) == 0);
  CHECK(lines[1].rfind("2,", 0) == 0);
  CHECK(lines[3].rfind("4,", 0) == 0);

  // the checkpoint serves as a policy file
  auto p = load_policy(ck);
  CHECK(p->config().to_json() == c.policy.to_json());
  // a different config is refused
  TrainConfig other = c;
  other.clip = 0.3;
  PpoTrainer d(other, {g}, two_devices());
  CHECK_THROWS_WITH(d.load_checkpoint(ck), Catch::Contains("config differs"));
  std::filesystem::remove(ck);
  std::filesystem::remove(csv);
}

TEST_CASE("PPO: pre-training on a set of graphs keeps a best plan per graph", "[rl]") {
  TrainConfig c = tiny_config(2);
  c.updates = 3;
  c.samples = 4;
  c.graphs_per_update = 1;
  PpoTrainer t(c, {two_chains(3), two_chains(5)}, two_devices());
  REQUIRE(t.num_graphs() == 2);
  t.train();
  CHECK(t.task(0).samples == 8);  // updates 1 and 3
  CHECK(t.task(1).samples == 4);  // update 2
  CHECK(std::isfinite(t.task(0).best_step_time));
  CHECK(std::isfinite(t.task(1).best_step_time));
}

TEST_CASE("PPO: one policy trained on two clusters at once, resumed bit-identically", "[rl]") {
  // two_chains on a 2-device and on a 3-device cluster (uniform v100s): one task per graph and
  // cluster, graph-major; every plan stays within its own cluster's devices
  TrainConfig c = tiny_config(4);
  c.policy.max_devices = 3;
  c.updates = 4;
  c.samples = 4;
  c.minibatch = 2;
  c.epochs = 1;
  c.graphs_per_update = 1;
  const Cluster c2 = two_devices(), c3 = Cluster::uniform("v3", DeviceSpec::v100(), 3, 25e9, 2e-5);
  const std::vector<OpGraph> graphs{two_chains(3), two_chains(4)};
  PpoTrainer full(c, graphs, std::vector<Cluster>{c2, c3});
  REQUIRE(full.num_graphs() == 4);
  CHECK(full.task(0).name == "two_chains@tiny2");
  CHECK(full.task(1).name == "two_chains@v3");
  CHECK(full.task(2).graph->num_ops() == 8);
  CHECK(full.task(3).sim->cluster().num_devices() == 3);
  CHECK(full.clusters().size() == 2);
  full.train();
  for (std::size_t i = 0; i < 4; ++i) {
    INFO("task " << i);
    CHECK(full.task(i).samples == 4);  // round robin: one update each
    const int nd = full.task(i).sim->cluster().num_devices();
    const auto [p, r] = full.greedy_plan(i);
    CHECK(r.valid);
    for (auto d : p.device) CHECK((d >= 0 && d < nd));
    for (auto d : full.task(i).best_plan.device) CHECK((d >= 0 && d < nd));
  }

  const std::string ck = temp_path("two_clusters.goparams");
  {
    PpoTrainer a(c, graphs, std::vector<Cluster>{c2, c3});
    a.update();
    a.update();
    a.save_checkpoint(ck);
  }
  PpoTrainer b(c, graphs, std::vector<Cluster>{c2, c3});
  b.load_checkpoint(ck);
  b.train();
  CHECK(same_parameters(*full.policy(), *b.policy()));
  for (std::size_t i = 0; i < 4; ++i) CHECK(full.task(i).best_step_time == b.task(i).best_step_time);
  // the clusters in another order (or another one) are refused
  PpoTrainer swapped(c, graphs, std::vector<Cluster>{c3, c2});
  CHECK_THROWS_WITH(swapped.load_checkpoint(ck), Catch::Contains("ran on a 2-device cluster, this run's on 3"));
  // a cluster beyond the policy's device embeddings
  CHECK_THROWS_WITH(PpoTrainer(c, graphs, std::vector<Cluster>{c2, Cluster::uniform("v4", DeviceSpec::v100(), 4, 25e9, 2e-5)}),
                    Catch::Contains("'v4' has 4 devices") && Catch::Contains("at most 3"));
  std::filesystem::remove(ck);
}

TEST_CASE("Anchor: the best heuristic plan, expressed as actions that decode back to it", "[rl]") {
  const OpGraph g = two_chains(4);
  DeviceSpec d = DeviceSpec::v100();
  const Cluster cl = Cluster::uniform("same2", d, 2, 25e9, 2e-5);
  const Simulator sim(g, cl);
  policy::PolicyGraph pg = policy::PolicyGraph::from_graph(g);
  // only the default placement: every op on device 0; rank priorities and fusion are tried on it
  const Anchor a = choose_anchor(g, pg, cl, sim, 4, true, "default");
  CHECK(a.placement == "default");
  REQUIRE(a.result.valid);
  for (std::int32_t v : a.plan.device) CHECK(v == 0);
  CHECK(a.result.step_time <= sim.simulate(Plan{}).step_time);  // at least as good as no priorities or fusion
  CHECK(a.result.step_time == sim.simulate(a.plan).step_time);
  // round trip: decoding the anchor's actions gives the anchor plan
  const policy::Decision dec = policy::decode(g, pg, a.actions, 2);
  const Plan back = policy::to_plan(dec);
  CHECK(back.device == a.plan.device);
  CHECK(back.priority == a.plan.priority);
  CHECK(back.fusion == a.plan.fusion);
  // upward-rank levels: along a chain the rank falls, so levels never increase
  const auto lv = upward_rank_levels(g, sim, 4);
  for (int i = 1; i < 4; ++i) CHECK(lv[static_cast<std::size_t>(i)] <= lv[static_cast<std::size_t>(i - 1)]);
  CHECK(lv[0] == 3.f);
  // all three placements: the two chains on different devices (METIS or the generic rule) win
  const Anchor b = choose_anchor(g, pg, cl, sim, 4);
  CHECK(b.result.step_time < a.result.step_time * 0.75);
  // a fresh anchored policy decodes the anchor greedily
  TrainConfig c = tiny_config(1);
  c.policy.anchor = true;
  c.policy.priority_levels = 4;
  c.anchor_placements = "default";
  PpoTrainer t(c, {g}, cl);
  CHECK(t.task(0).anchor == a.describe());
  CHECK(t.task(0).best_step_time == a.result.step_time);
  CHECK(t.task(0).best_update == 0);
  const auto [gp, gr] = t.greedy_plan(0);
  CHECK(gp.device == a.plan.device);
  CHECK(gr.step_time == a.result.step_time);
  // anchors for a different device count or level count are refused with a clear error
  Tensor bad_levels = Tensor::zeros(Shape{8}, DType::i32);
  bad_levels.data<std::int32_t>()[3] = 7;
  pg.set_anchor(a.actions.device.clone(), bad_levels, a.actions.fuse.clone());
  policy::GoPolicy pol(c.policy);
  Rng rng(1);
  CHECK_THROWS_WITH(pol.act(pg, 2, &rng), Catch::Contains("anchor action 7"));
  CHECK_THROWS_WITH(TrainConfig::parse(R"({"anchor_placements": "human,m-topo"})"), Catch::Contains("'m-topo'"));
  CHECK_THROWS_WITH(TrainConfig::parse(R"({"anchor_placements": "human,,heft"})"), Catch::Contains("''"));
}

// Fan-out ops, by hand: an op is one when data edges carry its output to two or more devices other
// than its own (control edges carry nothing); spread_fan_out moves them round-robin in topological
// order, each with its colocation group.
TEST_CASE("Anchor: fan-out ops and their spread, by hand", "[rl]") {
  GraphInfo info;
  info.name = "fan_out";
  GraphBuilder b(info);
  auto add = [&](const char* name, std::vector<std::int64_t> reads, std::vector<std::int64_t> after = {},
                 std::int32_t colocation = -1) {
    OpSpec s;
    s.name = name;
    s.kind = OpKind::elementwise;
    s.flops = 1e6;
    s.colocation = colocation;
    s.outputs.push_back(TensorSpec{{256}});
    for (std::int64_t r : reads) s.inputs.push_back(TensorRef{r, 0});
    s.control_inputs = std::move(after);
    b.add_op(std::move(s));
  };
  add("src", {});                  // 0: read on devices 1 and 2
  add("x", {});                    // 1: read on device 0 and on its own
  add("y", {});                    // 2: data to device 2, a control edge to device 1
  add("z", {}, {}, 7);             // 3: read on devices 0, 1 and 2; colocated with zg
  add("zg", {3}, {}, 7);           // 4
  add("a", {0, 1, 3}, {2});        // 5
  add("b", {0, 2, 3});             // 6
  add("c", {1, 3});                // 7
  const OpGraph g = b.build();
  const std::vector<std::int32_t> device = {0, 1, 0, 3, 3, 1, 2, 0};
  CHECK(fan_out_ops(g, device, 4) == std::vector<OpId>{0, 3});
  const auto spread = spread_fan_out(g, device, 4);
  REQUIRE(spread);
  CHECK(spread->ops == std::vector<OpId>{0, 3});
  CHECK(spread->device == std::vector<std::int32_t>{0, 1, 0, 1, 1, 1, 2, 0});  // src to 0, z and zg to 1
  CHECK(fan_out_ops(g, std::vector<std::int32_t>(8, 2), 4).empty());         // one device: nothing to spread
  CHECK(!spread_fan_out(g, std::vector<std::int32_t>(8, 2), 4));
}

// Transformer-XL's positional encodings (one sinusoid, then one dropout per segment, read by every
// layer of that segment) are its fan-out ops under the human placement: every device reads them from
// device 0, whose copy channel carries them ahead of the pipeline's first hand-offs. Spread over
// the devices they make the anchor faster, and the anchor says so.
TEST_CASE("Anchor: fan-out ops spread over the devices (Transformer-XL)", "[rl]") {
  const OpGraph g = make_training_graph(load_graph("zoo:transformer_xl4:segments=8"));
  const Cluster cl = cluster_preset("v100x4");
  const Simulator sim(g, cl);
  const policy::PolicyGraph pg = policy::PolicyGraph::from_graph(g);
  std::string with = kAnchorPlacements;  // the pipelined candidates left out: they are faster still here
  with.erase(with.find(",depth-first"));    // (python/tests/test_gopt.py test_anchor_placements)
  std::string without = with;
  without.erase(without.find(",spread"), std::string(",spread").size());
  const Anchor a = choose_anchor(g, pg, cl, sim, 8, true, without);
  const Anchor s = choose_anchor(g, pg, cl, sim, 8, true, with);
  REQUIRE(a.result.valid);
  REQUIRE(s.result.valid);
  const std::vector<OpId> fan = fan_out_ops(g, a.plan.device, 4);
  REQUIRE(fan.size() == 8);
  for (std::size_t k = 0; k < fan.size(); ++k) CHECK(g.name(fan[k]) == "embedding/seg" + std::to_string(k) + "/pos_dropout");
  CHECK(s.placement == a.placement + " + fan-out spread");
  CHECK(s.describe().find(" + fan-out spread") != std::string::npos);
  CHECK(s.candidates == a.candidates + 1);
  CHECK(s.result.step_time < a.result.step_time);
  CHECK(s.result.step_time == sim.simulate(s.plan).step_time);
  for (OpId v = 0; v < g.num_ops(); ++v) {
    const auto i = static_cast<std::size_t>(v);
    const auto k = std::find(fan.begin(), fan.end(), v);
    if (k == fan.end()) {
      CHECK(s.plan.device[i] == a.plan.device[i]);
      CHECK(s.plan.priority[i] == a.plan.priority[i]);
    } else {
      CHECK(s.plan.device[i] == static_cast<std::int32_t>((k - fan.begin()) % 4));
      CHECK(s.plan.fusion[i] < 0);
    }
  }
  const Plan back = policy::to_plan(policy::decode(g, pg, s.actions, 4, {.ties = s.ties}));
  CHECK(back.device == s.plan.device);
  CHECK(back.fusion == s.plan.fusion);
  CHECK(s.alternatives.size() == a.alternatives.size());  // the spread plan and its base are not each other's
  // on two devices a fan-out op has nowhere else to go
  CHECK(choose_anchor(g, pg, cluster_preset("v100x2"), Simulator(g, cluster_preset("v100x2")), 8).placement.find("spread") ==
        std::string::npos);
}

// Transformer-XL's segments are streams through the layers as WaveNet's chunks are: with the
// positional encodings spread (the fan-out spread candidate), that plan in depth-first order with
// no priority levels lets each device start on the first segment early. The anchor tries the
// spread candidate so pipelined, with its own fusion (XLA-like, the spread ops unfused).
TEST_CASE("Anchor: the fan-out spread candidate pipelined (Transformer-XL)", "[rl]") {
  const OpGraph g = make_training_graph(load_graph("zoo:transformer_xl4:seq=16"));
  const Cluster cl = cluster_preset("v100x4");
  const Simulator sim(g, cl);
  const policy::PolicyGraph pg = policy::PolicyGraph::from_graph(g);
  const Anchor a = choose_anchor(g, pg, cl, sim, 8);
  REQUIRE(a.result.valid);
  CHECK(a.describe() == "human + fan-out spread + xla fusion + depth-first order");
  CHECK(a.ties == policy::TieOrder::depth_first);
  CHECK(!a.ranked);
  CHECK(a.join() == policy::FusionJoin::all);
  std::string unpipelined = kAnchorPlacements;
  unpipelined.erase(unpipelined.find(",depth-first"));
  const Anchor w = choose_anchor(g, pg, cl, sim, 8, true, unpipelined);
  REQUIRE(w.result.valid);
  CHECK(w.placement == "human + fan-out spread");
  CHECK(w.candidates == a.candidates - 3);  // two pipelined placements and the spread one
  CHECK(a.result.step_time < 0.97 * w.answer_result().step_time);
  // by hand: the spread plan's devices, no levels, its fusion (every op but the spread ones), depth-first ties
  CHECK(a.plan.device == w.plan.device);
  policy::Actions act = policy::actions_from_plan(g, pg, Plan{w.plan.device, {}, {}}, 8);
  std::fill_n(act.fuse.data<std::int32_t>(), act.fuse.numel(), 1);
  for (OpId v : fan_out_ops(g, human_plan(g, cl, {}, nullptr, &sim).device, 4))
    act.fuse.data<std::int32_t>()[pg.row_of[static_cast<std::size_t>(v)]] = 0;
  const Plan p = policy::to_plan(policy::decode(g, pg, act, 4, {.ties = policy::TieOrder::depth_first}));
  CHECK(p.fusion == a.plan.fusion);
  CHECK(sim.simulate(p).step_time == a.result.step_time);
  // its actions decode back to it through the policy graph's defaults
  policy::PolicyGraph pg_set = pg;
  set_anchor(g, pg_set, cl, sim, 8);
  CHECK(sim.simulate(policy::to_plan(policy::decode(g, pg_set, a.actions, 4))).step_time == a.result.step_time);
}

// The anchor's simulations stop at the first out-of-memory; where no candidate fits, the anchor is
// the one that misses by the least, judged (and reported) on its whole step.
TEST_CASE("Anchor: where nothing fits, the least excess, from whole simulations", "[rl]") {
  const OpGraph g = two_chains(4, 0, 6LL << 30);  // chain b: 24 GB of parameters
  const Cluster cl = two_devices(10LL << 30, 10LL << 30);
  const Simulator sim(g, cl);
  const policy::PolicyGraph pg = policy::PolicyGraph::from_graph(g);
  const Anchor a = choose_anchor(g, pg, cl, sim, 4);
  REQUIRE_FALSE(a.result.valid);
  CHECK(a.result.status == SimStatus::out_of_memory);
  const SimResult whole = sim.simulate(a.plan);
  CHECK(a.result.step_time == whole.step_time);
  CHECK(a.result.peak_memory == whole.peak_memory);
  const double excess = memory_excess(a.result, cl);
  CHECK(excess > 0);
  for (const char* m : {"default", "human", "pipeline", "m-etf", "m-sct", "heft"}) {
    const PlaceResult h = place(m, g, cl);
    Plan devices_only;
    devices_only.device = h.plan.device;
    INFO(m);
    CHECK(excess <= memory_excess(sim.simulate(devices_only), cl) + 1e-6);
  }
}

// The first batch of candidates is simulated likeliest best first (fused, rank priorities, the
// least busy placement): the trace's first sample is that plan, rebuilt here by hand; the anchor
// is the best candidate whatever the order, and the trainer's reward reference comes after them.
TEST_CASE("Anchor: candidates simulated likeliest best first, the reward reference after them", "[rl]") {
  {  // the busiest device's op and send time, by hand
    const OpGraph g = two_chains(3);  // a0 -> a1 -> a2, b0 -> b1 -> b2; 1 KB tensors
    const Cluster cl = same_two();
    const Simulator sim(g, cl);
    double all = 0;
    for (OpId v = 0; v < g.num_ops(); ++v) all += sim.op_cost(v, 0);
    const double send = 2e-5 + 1024 / 25e9;  // one 16x16 f32 tensor over a link
    CHECK(busiest_device_load(g, sim, {}) == Approx(all).epsilon(1e-12));
    std::vector<std::int32_t> split(static_cast<std::size_t>(g.num_ops()), 1);
    split[0] = 0;  // a0 alone, sending to a1
    const double a0 = sim.op_cost(0, 0);
    CHECK(busiest_device_load(g, sim, split) == Approx(std::max(a0 + send, all - a0)).epsilon(1e-12));
    split.assign(split.size(), 0);
    split[1] = split[4] = 1;  // a0 -> a1 and b0 -> b1 cross, and back: four sends
    const double on1 = sim.op_cost(1, 1) + sim.op_cost(4, 1);
    CHECK(busiest_device_load(g, sim, split) == Approx(std::max(all - on1 + 2 * send, on1 + 2 * send)).epsilon(1e-12));
    // a tensor read twice on one other device is sent once
    GraphBuilder b(GraphInfo{});
    for (int i = 0; i < 3; ++i) {
      OpSpec o;
      o.name = "x" + std::to_string(i);
      o.kind = OpKind::matmul;
      o.flops = 1e9;
      TensorSpec t;
      t.shape = {16, 16};
      o.outputs.push_back(t);
      if (i > 0) o.inputs.push_back(TensorRef{0, 0});
      b.add_op(std::move(o));
    }
    const OpGraph fan = b.build();
    const Simulator fs(fan, cl);
    const std::vector<std::int32_t> one_reader_device{0, 1, 1};
    CHECK(busiest_device_load(fan, fs, one_reader_device) ==
          Approx(std::max(fs.op_cost(0, 0) + send, fs.op_cost(1, 1) + fs.op_cost(2, 1))).epsilon(1e-12));
  }
  const OpGraph g = make_training_graph(load_graph("zoo:rnnlm2"));
  const Cluster cl = cluster_preset("v100x2");
  const Simulator sim(g, cl);
  const policy::PolicyGraph pg = policy::PolicyGraph::from_graph(g);
  BestTrace trace;
  const Anchor a = choose_anchor(g, pg, cl, sim, 8, true, "default,human", 0, &trace);
  CHECK(a.describe() == "human + xla fusion");
  CHECK(trace.samples() == a.candidates);
  CHECK(trace.best() == a.answer_result().step_time);
  // human's busiest device has 0.71x of default's load, so its fused, ranked candidate is the first sample
  const Plan human = human_plan(g, cl);
  CHECK(busiest_device_load(g, sim, human.device) < 0.75 * busiest_device_load(g, sim, {}));
  Plan p;
  p.device = human.device;
  p.priority = upward_rank_levels(g, sim, 8);
  policy::Actions act = policy::actions_from_plan(g, pg, p, 8);
  std::fill_n(act.fuse.data<std::int32_t>(), act.fuse.numel(), 1);
  const Plan first = policy::to_plan(policy::decode(g, pg, act, 2));
  REQUIRE(!trace.points().empty());
  CHECK(trace.points().front().samples == 1);
  CHECK(trace.points().front().best_step_time == sim.simulate(first).step_time);
  // ranked and unranked take the same time here, and the anchor is the one first in the
  // candidates' own order (unranked), as when they were simulated in that order
  CHECK(a.result.step_time == trace.points().front().best_step_time);
  CHECK(!a.ranked);
  // the trainer: the anchor's candidates, then the reward reference, which is never an answer
  TrainConfig c = tiny_config(1);
  c.policy.anchor = true;
  c.policy.priority_levels = 8;
  c.anchor_placements = "default,human";
  PpoTrainer t(c, {g}, cl);
  const BestTrace& tt = t.task(0).trace;
  CHECK(tt.samples() == a.candidates + 1);
  CHECK(tt.points().front().samples == 1);
  CHECK(tt.points().back().samples <= a.candidates);
  CHECK(tt.best() == a.answer_result().step_time);
  CHECK(t.task(0).reference_kind == "default");
}

// On RNNLM (2 layers, training graph, 2 V100s) the human placement with XLA-like fusion is the best
// heuristic, and it runs 0.5% faster when the ops of one level run latest-first (the ready op
// furthest along the topological order: the LSTM chain keeps moving) than in program or first-ready
// order. The anchor asked for that order finds it; its plan is rebuilt here from the parts: no
// priorities but the topological position as the tie. By default that order is not the anchor's
// (fine-tuning does not start from it) but an answer: Anchor::faster, which best-heuristic and GO
// answer with when nothing they found is faster.
TEST_CASE("Anchor: latest-first order where it is fastest (RNNLM), rebuilt by hand", "[rl]") {
  const OpGraph g = make_training_graph(load_graph("zoo:rnnlm2"));
  const Cluster cl = cluster_preset("v100x2");
  const Simulator sim(g, cl);
  const policy::PolicyGraph pg = policy::PolicyGraph::from_graph(g);
  const int placements = metis_available() ? 7 : 6;
  std::string unpipelined = kAnchorPlacements;  // the pipelined candidates left out (below for them)
  unpipelined.erase(unpipelined.find(",depth-first"));
  const Anchor d = choose_anchor(g, pg, cl, sim, 8, true, unpipelined);
  CHECK(d.ties != policy::TieOrder::latest);
  CHECK(d.candidates == placements * 4 + 2 * 4);  // program order, 4 first-ready, 4 latest-first
  const Anchor a = choose_anchor(g, pg, cl, sim, 8, true, unpipelined, 0, nullptr, "program,first-ready,latest");
  REQUIRE(a.result.valid);
  CHECK(a.ties == policy::TieOrder::latest);
  CHECK(a.describe() == "human + xla fusion + latest-first order");
  CHECK(a.candidates == placements * 4 + 2 * 4);  // program order, then 4 in each other order
  CHECK(!a.faster);
  REQUIRE(d.faster);
  CHECK(d.faster->describe == "human + xla fusion + latest-first order");
  CHECK(d.faster->result.step_time == a.result.step_time);  // the same four candidates, the same order
  CHECK(d.faster->result.step_time < d.result.step_time);
  CHECK(d.answer_describe() == d.faster->describe);
  CHECK(sim.simulate(d.answer()).step_time == d.faster->result.step_time);
  Plan p = human_plan(g, cl);
  apply_xla_fusion(g, p);
  const auto n = static_cast<std::size_t>(g.num_ops());
  p.priority.assign(n, 0.f);
  for (std::size_t r = 0; r < n; ++r)
    p.priority[static_cast<std::size_t>(g.topo_order()[r])] = static_cast<float>(r) / static_cast<float>(n);
  const double latest = sim.simulate(p).step_time;
  CHECK(a.result.step_time == Approx(latest).epsilon(1e-9));
  for (std::size_t r = 0; r < n; ++r)
    p.priority[static_cast<std::size_t>(g.topo_order()[r])] = 1.f - static_cast<float>(r + 1) / static_cast<float>(n);
  const double earliest = sim.simulate(p).step_time;
  p.priority.clear();
  const double first_ready = sim.simulate(p).step_time;
  CHECK(latest < 0.997 * std::min(earliest, first_ready));
  CHECK(a.result.step_time < 0.997 * d.result.step_time);
  // through the training config, which refuses what it does not know
  TrainConfig c = tiny_config(1);
  c.policy.anchor = true;
  c.anchor_placements = "human";
  c.anchor_ties = "latest";
  PpoTrainer t(c, {g}, cl);
  CHECK(t.task(0).anchor == "human + xla fusion + latest-first order");  // every candidate in that order
  CHECK(t.task(0).pg.ties == policy::TieOrder::latest);
  CHECK_THROWS_WITH(TrainConfig::parse(R"({"anchor_ties": "program,last"})"), Catch::Contains("'last'"));
  CHECK_THROWS_WITH(TrainConfig::parse(R"({"anchor_ties": "latest,latest"})"), Catch::Contains("twice"));
  CHECK_THROWS_WITH(TrainConfig::parse(R"({"anchor_ties": ""})"), Catch::Contains("anchor_ties"));
  // with every placement the anchor is the pipelined plan (0.1% slower than latest-first order here),
  // and GO answers with the latest-first plan (zero-shot here) while its policy reads that anchor
  const Anchor full = choose_anchor(g, pg, cl, sim, 8);
  CHECK(full.describe() == "human + xla fusion into main producers + depth-first order");
  CHECK(full.candidates == d.candidates + 2);
  CHECK(full.result.step_time < d.result.step_time);
  REQUIRE(full.faster);
  CHECK(full.faster->result.step_time == d.faster->result.step_time);
  const std::string policy = std::string(GO_TEST_DATA_DIR) + "/../../policies/go-zoo-v100x248.ckpt";
  GoPlaceReport rep;
  const Plan zp = go_place(g, cl, policy, 0, 2, 0, &rep);
  CHECK(rep.anchor == full.describe());
  CHECK(rep.faster == "human + xla fusion + latest-first order");
  CHECK(rep.faster_step_time == d.faster->result.step_time);
  const double answer = sim.simulate(zp).step_time;
  CHECK(answer <= rep.faster_step_time);
  CHECK(answer == std::min({rep.greedy_step_time, rep.sampled_step_time, rep.anchor_step_time, rep.faster_step_time}));
}

// WaveNet (4 stacks of 6 layers, 4 time chunks each reading its predecessor's tail; training graph,
// 4 V100s): with layers in blocks on the devices a device can start on the first chunk as soon as
// the previous device has passed it on, if the chunks run one after another through the layers and
// are not fused into one kernel per layer. The anchor's pipelined candidate does both: no priority
// levels, depth-first order with the weights first, and every op fused into its main producer. It
// is the anchor here; its plan is rebuilt from the parts.
TEST_CASE("Anchor: pipelined candidate where it is fastest (WaveNet), rebuilt by hand", "[rl]") {
  const OpGraph g = make_training_graph(load_graph("zoo:wavenet4:depth=6:segments=4"));
  const Cluster cl = cluster_preset("v100x4");
  const Simulator sim(g, cl);
  const policy::PolicyGraph pg = policy::PolicyGraph::from_graph(g);
  const Anchor a = choose_anchor(g, pg, cl, sim, 8);
  REQUIRE(a.result.valid);
  CHECK(a.describe() == "human + xla fusion into main producers + depth-first order");
  CHECK(a.ties == policy::TieOrder::depth_first);
  CHECK(a.fusion == 2);
  CHECK(a.join() == policy::FusionJoin::main);
  CHECK(!a.faster);  // nothing tried after it is faster
  // by hand: human devices, level 0 everywhere, every op fused into its main producer, depth-first ties
  Plan h = human_plan(g, cl);
  h.priority.clear();
  policy::Actions act = policy::actions_from_plan(g, pg, h, 8);
  std::fill_n(act.fuse.data<std::int32_t>(), act.fuse.numel(), 1);
  const Plan p = policy::to_plan(
      policy::decode(g, pg, act, 4, {.ties = policy::TieOrder::depth_first, .join = policy::FusionJoin::main}));
  CHECK(sim.simulate(p).step_time == a.result.step_time);
  // the concat of chunk 1 with chunk 0's tail joins its own chunk's kernel, not the tail's
  auto group = [&](const std::string& name) { return p.fusion[static_cast<std::size_t>(*g.find(name))]; };
  CHECK(group("stack0/layer1/chunk1/concat") >= 0);
  CHECK(group("stack0/layer1/chunk1/concat") == group("stack0/layer0/chunk1/residual_add"));
  CHECK(group("stack0/layer1/chunk1/concat") != group("stack0/layer1/chunk1/halo"));
  CHECK(group("stack0/layer1/chunk1/halo") == group("stack0/layer0/chunk0/residual_add"));
  // the ties are depth_first_topo_order with the weights first, larger first
  const std::vector<OpId> dfs = depth_first_topo_order(g, true);
  const auto n = static_cast<std::size_t>(g.num_ops());
  Plan q = p;
  for (std::size_t k = 0; k < n; ++k)
    q.priority[static_cast<std::size_t>(dfs[k])] = 1.f - static_cast<float>(k + 1) / static_cast<float>(n);
  CHECK(sim.simulate(q).step_time == Approx(a.result.step_time).epsilon(1e-12));
  // both parts matter: program order, or XLA-like fusion into every producer, is far slower
  CHECK(sim.simulate(policy::to_plan(policy::decode(g, pg, act, 4, {.ties = policy::TieOrder::program, .join = policy::FusionJoin::main}))).step_time >
        1.1 * a.result.step_time);
  CHECK(sim.simulate(policy::to_plan(policy::decode(g, pg, act, 4, {.ties = policy::TieOrder::depth_first}))).step_time >
        1.1 * a.result.step_time);
  // its actions decode back to it, and set_anchor makes its ties and join the policy graph's,
  // which decode uses by default
  CHECK(sim.simulate(policy::to_plan(policy::decode(g, pg, a.actions, 4, {.ties = a.ties, .join = a.join()}))).step_time ==
        a.result.step_time);
  policy::PolicyGraph pg_set = pg;
  set_anchor(g, pg_set, cl, sim, 8);
  CHECK(pg_set.ties == policy::TieOrder::depth_first);
  CHECK(pg_set.join == policy::FusionJoin::main);
  CHECK(sim.simulate(policy::to_plan(policy::decode(g, pg_set, a.actions, 4))).step_time == a.result.step_time);
  // the other placement pipelined is the alternative, in the same order and join
  REQUIRE(!a.alternatives.empty());
  CHECK(sim.simulate(policy::to_plan(policy::decode(g, pg_set, a.alternatives[0].first, 4))).step_time ==
        a.alternatives[0].second);
  pg_set.clear_anchor();
  CHECK(pg_set.join == policy::FusionJoin::all);
  // left out of the placements, no candidate is pipelined, and the anchor is far slower
  std::string without = kAnchorPlacements;
  without.erase(without.find(",depth-first"));
  const Anchor w = choose_anchor(g, pg, cl, sim, 8, true, without);
  CHECK(w.candidates == a.candidates - 2);
  CHECK(w.ties != policy::TieOrder::depth_first);
  CHECK((!w.faster || w.faster->describe.find("depth-first") == std::string::npos));
  CHECK(w.answer_result().step_time > 1.1 * a.result.step_time);
}

// Three devices, links 0 <-> 2 and 2 <-> 1 at 10 GB/s, 0 <-> 1 at 1 GB/s, 100 us each.
Cluster slow_link_mesh() {
  DeviceSpec spec;
  spec.name = "test";
  spec.launch_overhead = 1e-5;
  Cluster cl = Cluster::uniform("mesh3", spec, 3, 1e9, 1e-4);
  for (auto [x, y] : {std::pair{0, 2}, std::pair{2, 0}, std::pair{1, 2}, std::pair{2, 1}})
    cl.bandwidth[static_cast<std::size_t>(x * 3 + y)] = 10e9;
  return cl;
}

// The anchor's last candidate (`relabel`): its devices relabelled for the links. A chain of six
// 1 ms ops with 10 MB outputs on three devices, links 0 <-> 2 and 2 <-> 1 at 10 GB/s, 0 <-> 1 at
// 1 GB/s (100 us each): human's blocks by depth put ops 0-1 on device 0, 2-3 on 1, 4-5 on 2, so the
// first hand-off takes the slow link: 6 + 10.1 + 1.1 = 17.2 ms. Relabelled (1 <-> 2), both take fast
// ones: 6 + 1.1 + 1.1 = 8.2 ms.
TEST_CASE("anchor: devices relabelled for the links", "[rl][anchor]") {
  const OpGraph g = matmul_chain(6, 10'000'000);
  const Cluster cl = slow_link_mesh();
  const DeviceSpec spec = cl.spec(0);
  const Simulator sim(g, cl);
  const policy::PolicyGraph pg = policy::PolicyGraph::from_graph(g);
  const Anchor h = choose_anchor(g, pg, cl, sim, 4, true, "human");
  REQUIRE(h.result.valid);
  CHECK(h.result.step_time == Approx(17.2e-3));
  CHECK(h.plan.device == std::vector<std::int32_t>{0, 0, 1, 1, 2, 2});
  CHECK(!h.relabelled);
  BestTrace trace;
  const Anchor r = choose_anchor(g, pg, cl, sim, 4, true, "human,relabel", 0, &trace);
  REQUIRE(r.result.valid);
  CHECK(r.result.step_time == Approx(8.2e-3));
  CHECK(r.plan.device == std::vector<std::int32_t>{0, 0, 2, 2, 1, 1});
  CHECK(r.relabelled);
  CHECK(r.describe() == h.describe() + " + devices relabelled");
  CHECK(r.candidates == h.candidates + 1);  // one more simulation
  CHECK(trace.samples() == r.candidates);
  CHECK(trace.best() == r.result.step_time);
  CHECK(r.plan.fusion == h.plan.fusion);
  CHECK(r.plan.priority == h.plan.priority);
  // its actions decode to it: decoding reads which rows share a device, not which device it is
  CHECK(policy::to_plan(policy::decode(g, pg, r.actions, 3, {.ties = r.ties, .join = r.join()})).device == r.plan.device);
  // on links all alike nothing is relabelled and nothing more is simulated
  const Cluster same = Cluster::uniform("same3", spec, 3, 1e9, 1e-4);
  const Simulator ssim(g, same);
  const Anchor u = choose_anchor(g, pg, same, ssim, 4, true, "human,relabel");
  CHECK(u.candidates == choose_anchor(g, pg, same, ssim, 4, true, "human").candidates);
  CHECK(!u.relabelled);
}

// zero_shot(): a greedy decision that is the anchor's actions (a fresh anchored policy's, with a
// head start no draw overcomes) is the anchor's plan and simulation, not decoded and simulated
// again; the samples are. Both with the anchor's devices as chosen and relabelled for the links
// (the mesh of the test above), where the anchor's plan is the relabelled one.
TEST_CASE("zero_shot: the greedy decision that is the anchor is its simulation", "[rl][anchor]") {
  const Cluster mesh = slow_link_mesh();
  for (const char* placements : {"human", "human,relabel"}) {
    INFO(placements);
    TrainConfig c = anchored_on_default(5, 50.f, 0);
    c.anchor_placements = placements;
    c.policy.max_devices = 3;
    PpoTrainer t(c, {matmul_chain(6, 10'000'000)}, mesh);
    REQUIRE(t.task(0).anchor_decision);
    CHECK(t.task(0).anchor_decision->plan.device ==
          (std::string(placements) == "human" ? std::vector<std::int32_t>{0, 0, 1, 1, 2, 2}
                                              : std::vector<std::int32_t>{0, 0, 2, 2, 1, 1}));
    const std::int64_t before = t.task(0).trace.samples();
    const auto out = t.zero_shot(0, 4, Rng(7));
    REQUIRE(out.size() == 5);
    CHECK(t.task(0).trace.samples() == before + 4);  // the samples only
    const auto [gp, gr] = t.greedy_plan(0);  // decoded and simulated
    CHECK(out[0].first.device == gp.device);
    CHECK(out[0].first.priority == gp.priority);
    CHECK(out[0].first.fusion == gp.fusion);
    CHECK(out[0].second.step_time == gr.step_time);
    CHECK(out[0].second.step_time == t.task(0).anchor_step_time);
    for (const auto& [p, r] : out) CHECK(r.step_time == Simulator(*t.task(0).graph, mesh).simulate(p).step_time);
  }
  {  // the shipped policy on Inception-v3 (2 GPUs) keeps the anchor's devices and fusion but moves
     // 99 rows' priority levels: its greedy decision takes the anchor's devices and groups (plan_of),
     // and is what decoding it from scratch gives
    const std::string path = std::string(GO_TEST_DATA_DIR) + "/../../policies/go-zoo-v100x248.ckpt";
    const LoadedTensors file = load_tensors(path);
    auto pol = load_policy(file, path);
    const auto saved = PpoTrainer::saved_config(file, path);
    const TrainConfig fc = finetune_config(saved, *pol, 0, 16, 0);
    // fine-tuning takes one gradient step per update (on the sampling pass) whatever pre-training used
    REQUIRE(saved);
    CHECK(saved->epochs == 2);
    CHECK(fc.epochs == 1);
    CHECK(fc.minibatch == 16);
    // ... and trains the heads only, where pre-training trained every layer
    CHECK(saved->trainable == "all");
    CHECK(fc.trainable == "heads");
    // ... and makes its block moves on the anchor
    CHECK(saved->block_base == "draw");
    CHECK(fc.block_base == "anchor");
    PpoTrainer s(fc, {make_training_graph(load_graph("zoo:inception_v3"))}, cluster_preset("v100x2"), pol);
    REQUIRE(s.task(0).anchor_decision);
    policy::Actions greedy;
    {
      NoGradGuard ng;
      greedy = s.policy()->forward(s.task(0).pg, 2, policy::Decode::greedy).actions;
    }
    const Plan gp = policy::to_plan(policy::decode(*s.task(0).graph, s.task(0).pg, greedy, 2));  // from scratch
    const SimResult gr = s.task(0).sim->simulate(gp);
    const std::int64_t before = s.task(0).trace.samples();
    const double anchor_time = s.task(0).best_step_time;
    CHECK(anchor_time == s.task(0).anchor_step_time);
    const auto out = s.zero_shot(0, 2, Rng(7));
    CHECK(s.task(0).trace.samples() == before + 3);
    // the fastest decision beats the anchor here: it is the best plan, and (fine-tuning re-anchors)
    // the anchor, which decodes to it
    double fastest = out[0].second.step_time;
    for (const auto& [p, r] : out) fastest = std::min(fastest, r.step_time);
    REQUIRE(fastest < anchor_time);
    CHECK(s.task(0).best_step_time == fastest);
    CHECK(s.task(0).sim->simulate(s.task(0).best_plan).step_time == fastest);
    const GraphTask& st = s.task(0);
    CHECK(st.sim->simulate(s.plan_of(0, {st.pg.anchor_device, st.pg.anchor_priority, st.pg.anchor_fuse})).step_time ==
          fastest);
    CHECK(gp.priority != s.task(0).anchor_decision->plan.priority);
    CHECK(gp.device == s.task(0).anchor_decision->plan.device);
    CHECK(gp.fusion == s.task(0).anchor_decision->plan.fusion);
    CHECK(out[0].first.device == gp.device);
    CHECK(out[0].first.priority == gp.priority);
    CHECK(out[0].first.fusion == gp.fusion);
    CHECK(out[0].second.step_time == gr.step_time);
  }
  // without an anchor every decision is decoded and simulated
  TrainConfig free = tiny_config(5);
  free.policy.max_devices = 3;
  PpoTrainer u(free, {matmul_chain(6, 10'000'000)}, mesh);
  CHECK(!u.task(0).anchor_decision);
  const std::int64_t before = u.task(0).trace.samples();
  const auto out = u.zero_shot(0, 4, Rng(7));
  CHECK(u.task(0).trace.samples() == before + 5);
  CHECK(out[0].first.device == u.greedy_plan(0).first.device);
  double fastest = out[0].second.step_time;  // no plan before: the fastest decision is the best
  for (const auto& [p, r] : out) fastest = std::min(fastest, r.step_time);
  CHECK(u.task(0).best_step_time == fastest);
}

// The anchor's `fit` candidate: a chain of six 1 ms matmuls holding 100 MB of parameters each (1 kB
// outputs) on two devices of 350 MB, links 1 GB/s with 100 us latency. The default placement (all
// on device 0, 600 MB) is the only other one and runs out of memory in every variant; fitted, the
// window to move is three ops (1.1 x (600 - 339.5) MB), tried at ops 0-2, 1-3, 2-4 and 3-5 on
// device 1: ops 0-2 on device 1 fit with one hand-off, 6 + 0.101 = 6.101 ms (3-5 as fast, found
// later), and become the placement "default fitted to memory".
TEST_CASE("anchor: a candidate that runs out of memory, fitted to it", "[rl][anchor]") {
  const OpGraph g = matmul_chain(6, 1000, 100'000'000);
  DeviceSpec spec;
  spec.name = "test";
  spec.launch_overhead = 1e-5;
  spec.memory_bytes = 350'000'000;
  const Cluster cl = Cluster::uniform("small2", spec, 2, 1e9, 1e-4);
  const Simulator sim(g, cl);
  const policy::PolicyGraph pg = policy::PolicyGraph::from_graph(g);
  const Anchor d = choose_anchor(g, pg, cl, sim, 4, true, "default");
  CHECK(!d.result.valid);
  CHECK(d.result.status == SimStatus::out_of_memory);
  BestTrace trace;
  const Anchor f = choose_anchor(g, pg, cl, sim, 4, true, "default,fit", 0, &trace);
  REQUIRE(f.result.valid);
  CHECK(f.result.step_time == Approx(6.101e-3));
  CHECK(f.plan.device == std::vector<std::int32_t>{1, 1, 1, 0, 0, 0});
  CHECK(f.placement == "default fitted to memory");
  CHECK(f.describe().rfind("default fitted to memory", 0) == 0);
  // four trials and the fitted placement decoded and simulated, each recorded (the candidate's
  // whole simulation is the first batch's, where none fit); the trials are not answers, the fitted
  // candidate is
  CHECK(f.candidates == d.candidates + 4 + 1);
  CHECK(trace.samples() == f.candidates);
  CHECK(trace.best() == f.result.step_time);
  // its actions decode to it
  CHECK(policy::to_plan(policy::decode(g, pg, f.actions, 2, {.ties = f.ties, .join = f.join()})).device == f.plan.device);
  // with memory to spare nothing is fitted and nothing more is simulated
  DeviceSpec big = spec;
  big.memory_bytes = 1'000'000'000;
  const Cluster roomy = Cluster::uniform("big2", big, 2, 1e9, 1e-4);
  const Simulator rsim(g, roomy);
  const Anchor r = choose_anchor(g, pg, roomy, rsim, 4, true, "default,fit");
  CHECK(r.candidates == choose_anchor(g, pg, roomy, rsim, 4, true, "default").candidates);
  CHECK(r.placement == "default");
}

// The saddle of identical devices (see the learning test above), broken by the anchor: starting
// from every op on device 0, PPO finds plans that use the idle second device and the sampled plans
// get faster. (The greedy plan moves slowly here: moving any single op helps, chain a's as much as
// chain b's, so which chain should move is itself a symmetric choice.)
TEST_CASE("PPO with an anchor learns past it on two identical devices", "[rl]") {
  const OpGraph g = two_chains(4);
  const Cluster cl = same_two();
  const double optimum = brute_force_optimum(g, cl);
  int improved = 0;
  const int seeds = 3;
  for (int seed = 1; seed <= seeds; ++seed) {
    const TrainConfig c = anchored_on_default(static_cast<std::uint64_t>(seed), 2.f, 30);
    PpoTrainer t(c, {g}, cl);
    const double anchor = t.task(0).anchor_step_time;
    UpdateStats first, last;
    t.train([&](const UpdateStats& st) {
      if (st.update == 1) first = st;
      last = st;
    });
    std::printf("anchored seed %d: anchor %.3f ms, split optimum %.3f ms, best %.3f ms, mean sampled %.3f -> %.3f ms\n",
                seed, anchor * 1e3, optimum * 1e3, t.task(0).best_step_time * 1e3, first.mean_step_time * 1e3,
                last.mean_step_time * 1e3);
    CHECK(t.task(0).best_step_time < anchor * 0.8);
    if (last.mean_step_time < first.mean_step_time * 0.95) ++improved;
  }
  CHECK(improved == seeds);
}

// Heads only (fine-tuning's "trainable"): an update draws the same samples as with every layer
// trained (the outputs do not change), then moves the heads alone: every other parameter keeps its
// loaded bits, where training every layer moves them too.
TEST_CASE("PPO with trainable heads: the same samples, the heads moved, the encoder and blocks as loaded", "[rl]") {
  const OpGraph g = two_chains(4);
  const Cluster cl = same_two();
  CHECK_THROWS_WITH(TrainConfig::parse(R"({"trainable": "encoder"})"),
                    Catch::Contains("\"trainable\" is 'encoder', expected all or heads"));
  CHECK(TrainConfig::parse(R"({"trainable": "heads"})").trainable == "heads");
  CHECK(TrainConfig{}.trainable == "all");
  std::vector<double> mean_reward;
  for (const std::string trainable : {"all", "heads"}) {
    INFO("trainable " << trainable);
    TrainConfig c = anchored_on_default(4, 2.f, 3);
    c.trainable = trainable;
    c.target_kl = 0;  // every epoch runs
    PpoTrainer t(c, {g}, cl);
    CHECK(t.policy()->heads_only() == (trainable == "heads"));
    std::vector<std::pair<std::string, Tensor>> before;
    for (auto& [name, p] : t.policy()->named_parameters()) before.emplace_back(name, p.value().clone());
    const UpdateStats st = t.update();
    mean_reward.push_back(st.mean_reward);
    int heads_moved = 0, others_moved = 0, others = 0;
    const auto after = t.policy()->named_parameters();
    REQUIRE(after.size() == before.size());
    for (std::size_t i = 0; i < after.size(); ++i) {
      const Tensor& a = after[i].second.value();
      const bool same = std::memcmp(a.raw(), before[i].second.raw(), a.nbytes()) == 0;
      if (go::test::is_policy_head(after[i].first)) {
        heads_moved += same ? 0 : 1;
      } else {
        ++others;
        others_moved += same ? 0 : 1;
      }
    }
    CHECK(others > 20);
    CHECK(heads_moved >= 10);
    if (trainable == "heads") CHECK(others_moved == 0);
    else CHECK(others_moved > others / 2);
  }
  CHECK(mean_reward[0] == mean_reward[1]);  // the first update's samples, drawn before any step
}

// With reanchor, every improvement of the best plan becomes the anchor the policy reads: decoding
// the anchor gives the best plan found so far; without it the anchor stays the heuristic's. A run
// resumed from a checkpoint carries the moved anchor and ends as the uninterrupted one.
TEST_CASE("PPO with reanchor: the anchor follows the best plan, and survives a checkpoint", "[rl]") {
  const OpGraph g = two_chains(4);
  const Cluster cl = same_two();
  auto config = [](bool reanchor) {
    TrainConfig c = anchored_on_default(3, 2.f, 12);
    c.reanchor = reanchor;
    return c;
  };
  auto anchor_plan = [&](const GraphTask& t) {
    return policy::to_plan(policy::decode(g, t.pg, {t.pg.anchor_device, t.pg.anchor_priority, t.pg.anchor_fuse}, 2));
  };
  const Simulator sim(g, cl);
  {
    PpoTrainer t(config(true), {g}, cl);
    const double heuristic = t.task(0).anchor_step_time;
    int moved = 0;
    t.train([&](const UpdateStats&) {
      const double at_anchor = sim.simulate(anchor_plan(t.task(0))).step_time;
      CHECK(at_anchor == t.task(0).best_step_time);  // the anchor is the best plan so far
      moved += at_anchor < heuristic ? 1 : 0;
    });
    CHECK(t.task(0).best_step_time < heuristic * 0.8);
    CHECK(moved > 0);
  }
  {
    PpoTrainer t(config(false), {g}, cl);
    const Plan first = anchor_plan(t.task(0));
    t.train();
    CHECK(t.task(0).best_step_time < t.task(0).anchor_step_time);
    CHECK(anchor_plan(t.task(0)).device == first.device);  // learned past, but the anchor did not move
  }
  // resume: the checkpoint holds the moved anchor
  TrainConfig c = config(true);
  c.updates = 6;
  const auto [full, resumed] = full_and_resumed(c, g, cl, "reanchor.goparams");
  CHECK(anchor_plan(full->task(0)).device == anchor_plan(resumed->task(0)).device);
}

// Block moves: a nearly deterministic anchored policy (head start 10: a row leaves the anchor's
// device with probability ~5e-5) that keeps every op on device 0 finds the split of the two chains
// only through block moves. Block-moved samples are proposals, not draws of the policy: they stay
// out of the loss, so with every sample moved the parameters do not change, and with half of them
// the update's first gradient step (at the parameters that drew the samples) sees every ratio
// exactly 1 (no clipping, no KL), which a moved sample's (its old log-probabilities are of other
// devices) would not be.
TEST_CASE("PPO with block moves: whole runs of rows moved, out of the loss, deterministic", "[rl]") {
  const OpGraph g = two_chains(4);
  const Cluster cl = same_two();
  auto config = [](double block_moves) {
    TrainConfig c = anchored_on_default(5, 10.f, 6);
    c.epochs = 1;
    c.minibatch = c.samples;  // one gradient step per update, taken at the sampling parameters
    c.block_moves = block_moves;
    return c;
  };
  PpoTrainer with(config(0.5), {g}, cl);
  const double anchor = with.task(0).anchor_step_time;
  std::vector<UpdateStats> stats;
  with.train([&](const UpdateStats& st) { stats.push_back(st); });
  CHECK(with.task(0).best_step_time < anchor * 0.8);
  for (const UpdateStats& st : stats) {
    CHECK(st.clip_fraction == 0.0);
    CHECK(st.approx_kl == Approx(0.0).margin(1e-9));
  }
  PpoTrainer without(config(0.0), {g}, cl);
  without.train();
  CHECK(without.task(0).best_step_time == anchor);  // per-row sampling stays on the anchor
  PpoTrainer all(config(1.0), {g}, cl), untrained(config(1.0), {g}, cl);
  all.train();
  CHECK(all.task(0).best_step_time < anchor * 0.8);
  CHECK(same_parameters(*all.policy(), *untrained.policy()));
  // the same seed gives the same run, whatever the thread count
  TrainConfig one_thread = config(0.5);
  one_thread.threads = 1;
  PpoTrainer again(one_thread, {g}, cl);
  again.train();
  CHECK(same_parameters(*with.policy(), *again.policy()));
  CHECK(again.task(0).best_plan.device == with.task(0).best_plan.device);
  CHECK_THROWS_WITH(TrainConfig::parse(R"({"block_moves": 1.5})"), Catch::Contains("block_moves"));
}

// Two chains whose ops interleave by id (a0 b0 a1 b1 ...): the rows' order (Kahn's, ties by id)
// alternates between the chains, while the depth-first order runs each chain to its end. Half of
// the block moves are runs of the depth-first order, as annealing's device moves are, so one move
// can put a chain (or its tail) on the other device, which a run of rows (the other half) cannot:
// the best plan is such a move.
TEST_CASE("PPO block moves: runs of the rows or of the depth-first topological order", "[rl]") {
  GraphInfo info;
  info.name = "interleaved_chains";
  GraphBuilder b(info);
  const int len = 6;
  for (int i = 0; i < len; ++i)
    for (int c = 0; c < 2; ++c) {
      OpSpec s;
      s.name = std::string(c ? "b" : "a") + std::to_string(i);
      s.kind = OpKind::matmul;
      s.flops = 1e10;
      TensorSpec t;
      t.shape = {16, 16};
      s.outputs.push_back(t);
      if (i > 0) s.inputs.push_back(TensorRef{2 * (i - 1) + c, 0});
      b.add_op(std::move(s));
    }
  const OpGraph g = b.build();
  const auto n = static_cast<std::size_t>(g.num_ops());
  const std::vector<OpId> dfs = depth_first_topo_order(g);
  const auto [dfs_pos, row_pos] = block_positions(g);
  REQUIRE(g.name(g.topo_order()[0])[0] != g.name(g.topo_order()[1])[0]);  // rows alternate
  int switches = 0;
  for (std::size_t p = 1; p < n; ++p) switches += g.name(dfs[p])[0] != g.name(dfs[p - 1])[0] ? 1 : 0;
  REQUIRE(switches == 1);  // depth-first: one chain, then the other

  TrainConfig c = anchored_on_default(5, 10.f, 4);  // every op on device 0, nearly deterministic
  c.block_moves = 1.0;  // every sample a block move: the best plan is the anchor and one run moved
  PpoTrainer t(c, {g}, same_two());
  t.train();
  REQUIRE(t.task(0).best_step_time < t.task(0).anchor_step_time * 0.8);
  std::vector<std::size_t> moved_dfs, moved_rows;
  for (std::size_t i = 0; i < n; ++i)
    if (t.task(0).best_plan.device[i] != 0) {
      moved_dfs.push_back(dfs_pos[i]);
      moved_rows.push_back(row_pos[i]);
    }
  REQUIRE(moved_dfs.size() >= 2);
  std::sort(moved_dfs.begin(), moved_dfs.end());
  std::sort(moved_rows.begin(), moved_rows.end());
  CHECK(moved_dfs.back() - moved_dfs.front() + 1 == moved_dfs.size());    // one run of the depth-first order
  CHECK(moved_rows.back() - moved_rows.front() + 1 > moved_rows.size());  // not a run of the rows
}

// block_base "anchor": a block move changes the anchor's actions, not the draw's. The policy
// ignores its anchor (bias 0: its draws change devices and priorities anywhere) and every sample
// is a move; the update's best proposal is then the anchor's plan with one run moved: the anchor's
// priorities, and its devices changed on one run of the rows or of the depth-first order only.
// Made on the draws, the same update's best plan has the draw's priorities.
TEST_CASE("PPO block moves on the anchor (block_base \"anchor\")", "[rl]") {
  const OpGraph g = two_chains(6);
  const auto n = static_cast<std::size_t>(g.num_ops());
  const auto [dfs_pos, row_pos] = block_positions(g);
  for (const std::string base : {"anchor", "draw"}) {
    INFO("block_base " << base);
    TrainConfig c = anchored_on_default(3, 0.f, 1);
    c.block_moves = 1.0;
    c.block_base = base;
    PpoTrainer t(c, {g}, same_two());
    REQUIRE(t.task(0).anchor_decision);
    const Plan anchor = t.task(0).anchor_decision->plan;
    t.train();
    const GraphTask& task = t.task(0);
    REQUIRE(task.best_step_time < task.anchor_step_time);
    const Plan& best = task.best_plan;
    if (base == "draw") {
      CHECK(best.priority != anchor.priority);
      continue;
    }
    CHECK(best.priority == anchor.priority);
    std::vector<std::size_t> in_rows, in_dfs;
    for (std::size_t i = 0; i < n; ++i)
      if (best.device[i] != anchor.device[i]) {
        in_rows.push_back(row_pos[i]);
        in_dfs.push_back(dfs_pos[i]);
      }
    REQUIRE(!in_rows.empty());
    std::sort(in_rows.begin(), in_rows.end());
    std::sort(in_dfs.begin(), in_dfs.end());
    CHECK((in_rows.back() - in_rows.front() + 1 == in_rows.size() ||
           in_dfs.back() - in_dfs.front() + 1 == in_dfs.size()));
  }
  TrainConfig bad = anchored_on_default(3, 0.f, 1);
  bad.block_base = "start";
  CHECK_THROWS_WITH(PpoTrainer(bad, {g}, same_two()), Catch::Contains("\"block_base\" is 'start'"));
}

// Other starting points (alt_starts): the anchor's runner-up placements within the margin. Every
// sample a block move on one of them (nearly deterministic policy), each start is hill-climbed on
// its own: its step time only falls, its actions always decode to a plan of that step time, and
// the best plan is at least as good as every start. Off (alt_starts 0), alt_start_moves draws
// nothing: the run is the one without it. A resumed run ends as the uninterrupted one.
TEST_CASE("PPO with other starting points: each hill-climbed, deterministic, resumable", "[rl]") {
  const OpGraph g = two_chains(4);
  const Cluster cl = same_two();
  const Simulator sim(g, cl);
  auto config = [](int starts, double moves) {
    TrainConfig c = anchored_on_default(7, 10.f, 6);
    c.anchor_placements = "default,human,pipeline,m-etf";
    c.block_moves = 1.0;
    c.alt_starts = starts;
    c.alt_start_moves = moves;
    c.alt_start_margin = 10.0;  // every runner-up placement
    return c;
  };
  auto step_of = [&](const GraphTask& t, const policy::Actions& a) {
    return sim.simulate(policy::to_plan(policy::decode(g, t.pg, a, 2))).step_time;
  };
  PpoTrainer t(config(2, 1.0), {g}, cl);
  REQUIRE(t.task(0).starts.size() == 2);
  std::vector<double> first;
  for (const auto& [a, time] : t.task(0).starts) {
    CHECK(time >= t.task(0).anchor_step_time);
    CHECK(step_of(t.task(0), a) == time);
    first.push_back(time);
  }
  CHECK(first[0] <= first[1]);  // best first
  int improved = 0;
  // each update's moves on a start decode from that start's log, made from the start as the update
  // found it (the previous update's end), and a decode from it is the whole decode
  std::vector<policy::Actions> found;
  for (const auto& st : t.task(0).starts) found.push_back(st.first.clone());
  t.train([&](const UpdateStats&) {
    const GraphTask& k0 = t.task(0);
    REQUIRE(k0.start_logs.size() == 2);
    for (std::size_t k = 0; k < 2; ++k) {
      const auto& [a, time] = k0.starts[k];
      CHECK(step_of(k0, a) == time);
      CHECK(time <= first[k]);
      CHECK(k0.best_step_time <= time);
      const GraphTask::Logged& l = k0.start_logs[k];
      REQUIRE(l.log);
      CHECK(policy::same_task_actions(l.of.device, found[k].device));
      CHECK(policy::same_task_actions(l.of.fuse, found[k].fuse));
      const policy::Decision whole = policy::decode(*k0.graph, k0.pg, a, 2);
      const policy::Decision logged = policy::decode(*k0.graph, k0.pg, a, 2, {}, nullptr, l.log.get());
      CHECK(logged.device == whole.device);
      CHECK(logged.fusion_group == whole.fusion_group);
      found[k] = a.clone();
    }
  });
  for (std::size_t k = 0; k < 2; ++k) improved += t.task(0).starts[k].second < first[k] ? 1 : 0;
  CHECK(improved > 0);
  // a margin of 0 leaves only runner-ups as fast as the anchor
  TrainConfig tight = config(2, 1.0);
  tight.alt_start_margin = 0;
  PpoTrainer none(tight, {g}, cl);
  for (const auto& st : none.task(0).starts) CHECK(st.second == none.task(0).anchor_step_time);
  // off: no starts, and the moves' fraction changes nothing
  PpoTrainer off(config(0, 1.0), {g}, cl), plain(config(0, 0.0), {g}, cl);
  off.train();
  plain.train();
  CHECK(off.task(0).starts.empty());
  CHECK(same_parameters(*off.policy(), *plain.policy()));
  CHECK(off.task(0).best_plan.device == plain.task(0).best_plan.device);
  // resume: the checkpoint holds the starts
  TrainConfig c = config(2, 0.5);
  c.block_moves = 0.5;
  const auto [full, resumed] = full_and_resumed(c, g, cl, "alt_starts.ckpt");
  for (std::size_t k = 0; k < 2; ++k) CHECK(full->task(0).starts[k].second == resumed->task(0).starts[k].second);
  CHECK_THROWS_WITH(TrainConfig::parse(R"({"alt_start_moves": 1.5})"), Catch::Contains("alt_start_moves"));
  CHECK_THROWS_WITH(TrainConfig::parse(R"({"alt_starts": -1})"), Catch::Contains("alt_starts"));
}

namespace {

// x feeds a (10 ms) and b1 (1 ms); b1 feeds b2 (10 ms), which shares device 1 with z (5 ms, in one
// colocation group with b2, so that neither moves alone). a and b1 on device 0, every op at level 0
// in program order (a before b1): device 0 runs a first, so b2 starts after 11 ms (21 ms). With
// b1 first (its level up, or a's down) or b1 beside b2, b2 runs after z: 15-16 ms. Any other move
// puts 26 ms of work on one device. `colocate_a_b1`: a and b1 in one colocation group too, so
// that a device move takes both along and only the levels help.
OpGraph waiting_chain(bool colocate_a_b1) {
  GraphInfo info;
  info.name = "waiting_chain";
  GraphBuilder b(info);
  auto add = [&](const char* name, double ms, OpId input, std::int32_t colocation) {
    OpSpec s;
    s.name = name;
    s.kind = OpKind::matmul;
    s.time = ms * 1e-3;
    s.colocation = colocation;
    TensorSpec t;
    t.shape_known = false;
    t.bytes = 1 << 20;
    s.outputs.push_back(t);
    if (input >= 0) s.inputs.push_back(TensorRef{input, 0});
    return b.add_op(std::move(s));
  };
  const OpId x = add("x", 0.1, -1, -1);
  add("a", 10, x, colocate_a_b1 ? 0 : -1);
  const OpId b1 = add("b1", 1, x, colocate_a_b1 ? 0 : -1);
  add("b2", 10, b1, 1);
  add("z", 5, -1, 1);
  return b.build();
}

struct Climbed {
  PathClimb climb;
  double start = 0;
};

// One climb of `sims` proposals from `devices` (per op; levels 0, no fusion) with stream `seed`.
Climbed climb_from(const OpGraph& g, const Cluster& cl, const std::vector<std::int32_t>& devices, int sims,
                   std::uint64_t seed) {
  const Simulator sim(g, cl);
  policy::PolicyGraph pg = policy::PolicyGraph::from_graph(g);
  const auto n = static_cast<std::int64_t>(g.num_ops());
  policy::Actions a{Tensor::zeros(Shape{n}, DType::i32), Tensor::zeros(Shape{n}, DType::i32),
                    Tensor::zeros(Shape{n}, DType::i32)};
  for (std::int64_t r = 0; r < n; ++r)
    a.device.data<std::int32_t>()[r] = devices[static_cast<std::size_t>(pg.order[static_cast<std::size_t>(r)])];
  const int D = cl.num_devices();
  const auto decode = [&](const policy::Actions& x) { return policy::to_plan(policy::decode(g, pg, x, D)); };
  SimWorkspace ws = sim.make_workspace();
  const Plan p = decode(a);
  const SimResult r = sim.simulate(p, ws);
  REQUIRE(r.valid);
  const StepPath path = step_critical_path(sim, p, ws);
  Climbed out;
  out.start = r.step_time;
  out.climb = climb_critical_path(sim, pg, ws, a, p, r.step_time, path, sims, 8, Rng(seed), decode);
  // where it ended is what its actions decode to, at the time it reports
  const Plan end = decode(out.climb.actions);
  CHECK(end.device == out.climb.plan.device);
  CHECK(end.priority == out.climb.plan.priority);
  CHECK(sim.simulate(end).step_time == out.climb.step_time);
  return out;
}

}  // namespace

// Critical-path moves (go/rl/path_moves.hpp) by hand: b2 waits 10 ms for a on b1's device. A climb
// finds a plan of 15-16 ms by a device move or a level; with a and b1 colocated a device move takes
// both along and does not help, and the levels still do. A chain of data links alone (every op on
// one device, one after the other) has nothing to act on: no simulation. The same stream gives
// the same climb.
TEST_CASE("Critical-path moves: held units moved or reprioritized, by hand", "[rl]") {
  const Cluster cl = same_two();
  for (const bool colocated : {false, true}) {
    const OpGraph g = waiting_chain(colocated);
    const Climbed c = climb_from(g, cl, {0, 0, 0, 1, 1}, 20, 3);
    INFO("colocated " << colocated);
    CHECK(c.start > 21e-3);
    CHECK(c.climb.step_time < 16.5e-3);  // b2 runs once z is done
    CHECK(c.climb.accepted >= 1);
    CHECK(c.climb.simulated.size() == 20u);  // b2 is still held by its device, or by a transfer
    // each accepted proposal was faster than the one before: the simulations' running minimum
    double best = c.start;
    int faster = 0;
    for (const auto& [valid, t] : c.climb.simulated)
      if (valid && t < best) {
        best = t;
        ++faster;
      }
    CHECK(faster == c.climb.accepted);
    CHECK(best == c.climb.step_time);
    if (colocated) {  // the only way there is b1 before a on device 0: a level, not a device
      CHECK(c.climb.plan.device[1] == c.climb.plan.device[2]);
      CHECK(c.climb.plan.priority[2] > c.climb.plan.priority[1]);
    }
  }
  const OpGraph chain = matmul_chain(6, 1 << 20);
  const Climbed none = climb_from(chain, cl, std::vector<std::int32_t>(6, 0), 50, 1);
  CHECK(none.climb.simulated.empty());
  CHECK(none.climb.accepted == 0);
  CHECK(none.climb.step_time == none.start);
  // two chains on one device: held by the device all along; the climb spreads them
  const OpGraph two = two_chains(4);
  const Climbed a = climb_from(two, cl, std::vector<std::int32_t>(8, 0), 60, 11);
  const Climbed b = climb_from(two, cl, std::vector<std::int32_t>(8, 0), 60, 11);
  CHECK(a.climb.step_time < a.start * 0.8);
  CHECK(a.climb.plan.device == b.climb.plan.device);
  CHECK(a.climb.simulated == b.climb.simulated);
}

// In fine-tuning (TrainConfig::path_moves): a nearly deterministic anchored policy on device 0
// (head start 10) with no block moves stays at its anchor; with critical-path moves after each
// update the best plan leaves it, the anchor follows it (reanchor), the trace counts every
// simulation (the start's and each chain's proposals), the run is the same whatever the thread
// count, and a resumed run ends as the uninterrupted one.
TEST_CASE("PPO with critical-path moves: proposals after each update, deterministic, resumable", "[rl]") {
  const OpGraph g = two_chains(4);
  const Cluster cl = same_two();
  auto config = [](int moves, int threads) {
    TrainConfig c = anchored_on_default(5, 10.f, 4);
    c.reanchor = true;
    c.path_moves = moves;
    c.path_chains = 2;
    c.threads = threads;
    return c;
  };
  PpoTrainer without(config(0, 2), {g}, cl);
  without.train();
  CHECK(without.task(0).best_step_time == without.task(0).anchor_step_time);
  PpoTrainer with(config(8, 2), {g}, cl);
  const std::int64_t before = with.task(0).trace.samples();
  with.train([](const UpdateStats& st) {  // the climbs count as simulation time, once
    CHECK(st.sample_seconds + st.simulate_seconds + st.train_seconds <= st.seconds + 1e-6);
    CHECK(st.simulate_seconds > 0);
  });
  CHECK(with.task(0).best_step_time < with.task(0).anchor_step_time * 0.8);
  const std::int64_t made = with.task(0).trace.samples() - before;
  CHECK(made > 4 * 16 + 4);                 // every update: its samples, the start, some proposals
  CHECK(made <= 4 * (16 + 1 + 2 * 8));      // at most path_moves per chain
  CHECK(with.task(0).trace.best() == with.task(0).best_step_time);
  const Simulator sim(g, cl);
  const GraphTask& t = with.task(0);
  CHECK(sim.simulate(policy::to_plan(policy::decode(g, t.pg, {t.pg.anchor_device, t.pg.anchor_priority,
                                                               t.pg.anchor_fuse}, 2)))
            .step_time == t.best_step_time);
  PpoTrainer one(config(8, 1), {g}, cl);
  one.train();
  CHECK(one.task(0).best_plan.device == with.task(0).best_plan.device);
  CHECK(one.task(0).best_step_time == with.task(0).best_step_time);
  CHECK(same_parameters(*one.policy(), *with.policy()));
  const auto [full, resumed] = full_and_resumed(config(8, 2), g, cl, "path_moves.ckpt");
  CHECK(full->task(0).best_plan.device == resumed->task(0).best_plan.device);
  CHECK_THROWS_WITH(TrainConfig::parse(R"({"path_moves": -1})"), Catch::Contains("path_moves"));
  CHECK_THROWS_WITH(TrainConfig::parse(R"({"path_chains": 0})"), Catch::Contains("path_chains"));
}

// The search of fine-tuning without the policy (anchor-search): block moves on the anchor's actions
// where update() makes them on the policy's draws, then the critical-path climbs.
TEST_CASE("PPO search rounds: block moves on the anchor, no pass of the network, deterministic", "[rl]") {
  const OpGraph g = two_chains(4);
  const Cluster cl = same_two();
  auto config = [](int path_moves, int threads) {
    TrainConfig c = anchored_on_default(5, 10.f, 4);
    c.block_moves = 1.0;
    c.reanchor = true;
    c.path_moves = path_moves;
    c.threads = threads;
    return c;
  };
  PpoTrainer t(config(0, 2), {g}, cl), untrained(config(0, 2), {g}, cl);
  const double anchor = t.task(0).anchor_step_time;
  const std::int64_t before = t.task(0).trace.samples();
  double last = anchor;
  for (int r = 0; r < 4; ++r) {
    const UpdateStats st = t.search_round();
    CHECK(st.update == r + 1);
    CHECK(st.samples == 16);  // every sample a block move; no climbs without path_moves
    CHECK(st.best_step_time <= last);
    last = st.best_step_time;
  }
  CHECK(t.updates_done() == 4);
  CHECK(t.task(0).trace.samples() - before == 4 * 16);
  CHECK(t.task(0).best_step_time < anchor * 0.8);  // a chain moved whole: the two run side by side
  CHECK(t.task(0).trace.best() == t.task(0).best_step_time);
  CHECK(same_parameters(*t.policy(), *untrained.policy()));  // nothing learned
  const Simulator sim(g, cl);
  {  // the anchor followed the best proposal, and the best plan is its decoding
    const GraphTask& k = t.task(0);
    CHECK(sim.simulate(t.plan_of(0, {k.pg.anchor_device, k.pg.anchor_priority, k.pg.anchor_fuse})).step_time ==
          k.best_step_time);
    CHECK(sim.simulate(k.best_plan).step_time == k.best_step_time);
  }
  // with the climbs: each round adds their start and at most 2 x 8 proposals
  PpoTrainer climbs(config(8, 2), {g}, cl), one(config(8, 1), {g}, cl);
  const std::int64_t c0 = climbs.task(0).trace.samples();
  for (int r = 0; r < 4; ++r) {
    climbs.search_round();
    one.search_round();
  }
  const std::int64_t made = climbs.task(0).trace.samples() - c0;
  CHECK(made > 4 * (16 + 1));
  CHECK(made <= 4 * (16 + 1 + 2 * 8));
  CHECK(climbs.task(0).best_step_time <= t.task(0).best_step_time * 1.0001);
  // the same seed gives the same rounds, whatever the thread count
  CHECK(one.task(0).best_plan.device == climbs.task(0).best_plan.device);
  CHECK(one.task(0).best_plan.priority == climbs.task(0).best_plan.priority);
  CHECK(one.task(0).best_step_time == climbs.task(0).best_step_time);
  // one device: no block move changes a plan, so none is simulated; the climbs still run
  const Cluster solo = Cluster::uniform("solo", DeviceSpec::v100(), 1, 25e9, 2e-5);
  PpoTrainer single(config(8, 2), {g}, solo);
  const std::int64_t s0 = single.task(0).trace.samples();
  CHECK(single.search_round().samples == 0);
  CHECK(single.task(0).trace.samples() - s0 >= 1);
  CHECK(single.task(0).trace.samples() - s0 <= 1 + 2 * 8);
  // the rounds move the anchor by block moves only: any other share is a config mistake
  TrainConfig half = config(0, 2);
  half.block_moves = 0.5;
  PpoTrainer mixed(half, {g}, cl);
  CHECK_THROWS_WITH(mixed.search_round(), Catch::Contains("block_moves"));
}

TEST_CASE("PPO block moves: each changes its base on its run only, a repeat of the base moved elsewhere", "[rl]") {
  const OpGraph g = two_chains(6);
  for (int D : {2, 4}) {
    const Cluster cl = Cluster::uniform("same", DeviceSpec::v100(), D, 25e9, 2e-5);
    TrainConfig c = anchored_on_default(5, 10.f, 4);
    c.block_moves = 1.0;
    c.policy.max_devices = D;
    PpoTrainer t(c, {g}, cl);
    const GraphTask& task = t.task(0);
    const std::int64_t n = task.pg.num_nodes;
    const policy::Actions anchor{task.pg.anchor_device, task.pg.anchor_priority, task.pg.anchor_fuse};
    const std::int32_t* base = anchor.device.data<std::int32_t>();
    const Rng urng(11);
    std::vector<int> to(static_cast<std::size_t>(D), 0);
    int repeats = 0;
    for (std::size_t k = 0; k < 400; ++k) {
      BlockMove m = t.draw_block_move(task, urng, 0, k);
      REQUIRE(m.end > m.begin);
      const BlockMove drawn = m;
      const policy::Actions a = PpoTrainer::block_moved(task, m, anchor);
      CHECK(m.begin == drawn.begin);
      CHECK(m.end == drawn.end);
      std::vector<char> in_run(static_cast<std::size_t>(n), 0);
      bool all_on_drawn = true;
      for (std::int64_t p = m.begin; p < m.end; ++p) {
        const std::int64_t r = m.depth_first ? task.block_rows[static_cast<std::size_t>(p)] : p;
        in_run[static_cast<std::size_t>(r)] = 1;
        all_on_drawn = all_on_drawn && base[r] == drawn.device;
      }
      const std::int32_t* dev = a.device.data<std::int32_t>();
      int changed = 0;
      for (std::int64_t r = 0; r < n; ++r) {
        if (in_run[static_cast<std::size_t>(r)]) {
          CHECK(dev[r] == m.device);
          changed += dev[r] != base[r] ? 1 : 0;
        } else {
          CHECK(dev[r] == base[r]);
        }
      }
      CHECK(changed >= 1);  // never the base again
      // the device is the drawn one unless that repeats the base
      CHECK((m.device == drawn.device) == !all_on_drawn);
      repeats += all_on_drawn ? 1 : 0;
      CHECK(a.priority.data<std::int32_t>() == anchor.priority.data<std::int32_t>());  // shared, not copied
      ++to[static_cast<std::size_t>(m.device)];
    }
    CHECK(repeats > 0);  // the draws do hit the base's device; those moves went elsewhere
    for (int d = 1; d < D; ++d) CHECK(to[static_cast<std::size_t>(d)] > 0);
  }
}

TEST_CASE("go method: zero-shot and fine-tuned plans from a policy file, through go::place", "[rl]") {
  const OpGraph g = two_chains(6);
  const Cluster cl = same_two();
  TrainConfig c = tiny_config(4);
  c.policy.anchor = true;
  c.updates = 1;
  const std::string ck = temp_path("go_method.ckpt");
  {
    PpoTrainer t(c, {g}, cl);
    t.train();
    t.save_checkpoint(ck);
  }
  register_go_methods(ck, 8, 6);  // 8 zero-shot samples, 6 per fine-tuning update
  PlaceOptions o;
  o.seed = 3;
  o.finetune = 0;
  // every simulation counts: the anchor's candidates, then the reward reference (the default plan)
  const std::int64_t before = 1 + place("best-heuristic", g, cl, o).simulations;
  const PlaceResult z = place("go-zero-shot", g, cl, o);
  REQUIRE(z.valid);
  // then the 8 samples: the greedy decision, the anchor's actions (the policy was trained one
  // update from them), is the anchor's simulation
  CHECK(z.simulations == before + 8);
  CHECK(check_plan(g, z.plan, 2).empty());
  CHECK(z.note.find("zero-shot greedy") != std::string::npos);
  GoPlaceReport rep;
  const Plan zp = go_place(g, cl, ck, 0, 8, 3, &rep);
  CHECK(rep.anchor_step_time > 0);
  CHECK(rep.greedy_step_time == rep.anchor_step_time);
  CHECK(z.step_time ==
        std::min({rep.greedy_step_time, rep.sampled_step_time, rep.anchor_step_time, rep.faster_step_time}));
  CHECK(z.step_time <= rep.anchor_step_time);  // the anchor is a candidate
  CHECK(zp.device == z.plan.device);  // same seed, same answer
  o.finetune = 4;
  const PlaceResult f = place("go", g, cl, o);
  REQUIRE(f.valid);
  // each update: its 6 samples, the critical-path climbs' start and at most their proposals
  const auto updates_made = [&](std::int64_t simulations, std::int64_t updates) {
    const std::int64_t after = simulations - before - 8;
    return after >= updates * 7 && after <= updates * finetune_update_simulations(6);
  };
  CHECK(updates_made(f.simulations, 4));
  CHECK(f.note.find("fine-tuned 4 updates x 6 samples") != std::string::npos);
  CHECK(f.step_time <= z.step_time);            // the zero-shot plans are candidates too
  CHECK(f.step_time <= rep.anchor_step_time);   // and so is the anchor
  CHECK(f.step_time == Simulator(g, cl).simulate(f.plan).step_time);
  {  // the trace: every simulation in order, ending at the answer; the same seed gives the same curve
    GoPlaceReport r1, r2;
    const auto start = std::chrono::steady_clock::now();
    go_place(g, cl, ck, 4, 8, 3, &r1, 6);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    go_place(g, cl, ck, 4, 8, 3, &r2, 6);
    // the stages' wall times, parts of the call's
    CHECK(r1.trainer_seconds > 0);
    CHECK(r1.policy_seconds > 0);
    CHECK(r1.decisions_seconds > 0);
    CHECK(r1.finetune_seconds > 0);
    CHECK(r1.trainer_seconds + r1.policy_seconds + r1.decisions_seconds + r1.finetune_seconds <= took);
    CHECK(rep.finetune_seconds == 0);  // zero-shot
    CHECK(z.note.find("; stages s: trainer ") != std::string::npos);
    CHECK(z.note.find("fine-tuning") == std::string::npos);
    CHECK(f.note.find(", fine-tuning ") != std::string::npos);
    CHECK(r1.simulations == f.simulations);
    REQUIRE(!r1.trace.empty());
    CHECK(r1.trace.back().best_step_time == f.step_time);
    CHECK(r1.trace.front().samples < before);  // the anchor's candidates are the first samples
    CHECK(r1.trace.front().best_step_time >= r1.anchor_step_time);
    REQUIRE(r1.trace.size() == r2.trace.size());
    for (std::size_t i = 0; i < r1.trace.size(); ++i) {
      CHECK(r1.trace[i].samples == r2.trace[i].samples);
      CHECK(r1.trace[i].best_step_time == r2.trace[i].best_step_time);
      if (i > 0) CHECK(r1.trace[i].best_step_time < r1.trace[i - 1].best_step_time);
    }
    CHECK(f.note.find("; trace samples:seconds:ms ") != std::string::npos);
  }
  // the fusion the policy chose is kept (place() clears fusion only for methods that do not decide it)
  CHECK(find_place_method("go").decides_fusion);
  // go-one: a fresh network of the same architecture trained on this graph, as many updates as go
  const PlaceResult one = place("go-one", g, cl, o);
  REQUIRE(one.valid);
  CHECK(updates_made(one.simulations, 4));
  CHECK(one.note.find("trained 4 updates") != std::string::npos);
  CHECK(one.step_time <= rep.anchor_step_time);  // it starts from the same anchor
  CHECK(one.note.find("untrained greedy") != std::string::npos);
  // a time limit covers the whole call: spent before fine-tuning starts, no update runs
  o.time_limit = 1e-9;
  const PlaceResult timed = place("go", g, cl, o);
  CHECK(timed.simulations == before + 8);
  CHECK(timed.note.find("fine-tuned 0 updates x 6 samples: none ran (the time limit") != std::string::npos);
  o.time_limit = 0;
  // no update asked: the note says so (it said "OOM", the unset time of a result never made)
  o.finetune = 0;
  const PlaceResult none = place("go", g, cl, o);
  CHECK(none.simulations == before + 8);
  CHECK(none.note.find("fine-tuned 0 updates x 6 samples: none asked (finetune 0)") != std::string::npos);
  CHECK(none.note.find("OOM") == std::string::npos);
  CHECK(none.step_time == z.step_time);  // the zero-shot answer: nothing after it ran
  // without --finetune, GO gets the search baselines' simulator budget: budget / the most
  // simulations of one update (6 samples, the climbs' start, 2 x 32 proposals: 71)
  REQUIRE(finetune_update_simulations(6) == 71);
  o.finetune = -1;
  o.budget = 2 * 71 + 70;
  const PlaceResult budgeted = place("go", g, cl, o);
  CHECK(updates_made(budgeted.simulations, 2));
  CHECK(budgeted.note.find("fine-tuned 2 updates") != std::string::npos);
  CHECK(budgeted.simulations <= before + 8 + o.budget);
  o.finetune = 4;
  // best-heuristic: the anchor plan on its own (or its candidate of another tie order, when faster)
  const PlaceResult bh = place("best-heuristic", g, cl, o);
  REQUIRE(bh.valid);
  CHECK(bh.step_time == std::min(rep.anchor_step_time, rep.faster_step_time));
  CHECK(bh.simulations >= 4);  // each placement with and without priorities and fusion
  // anneal-anchor: annealing that also starts from that anchor, so never worse than it; the budget
  // counts the anchor's simulations
  o.budget = bh.simulations + 30;
  const PlaceResult aa = place("anneal-anchor", g, cl, o);
  REQUIRE(aa.valid);
  CHECK(aa.step_time <= bh.step_time);
  CHECK(aa.simulations == o.budget);
  CHECK(aa.note.find("anchor ") == 0);
  CHECK(aa.step_time == Simulator(g, cl).simulate(aa.plan).step_time);
  o.budget = 1;  // only one start fits the budget: the anchor's
  CHECK(place("anneal-anchor", g, cl, o).step_time <= bh.step_time);
  {  // anchor-search: go's rounds from the anchor without the policy, which it never reads
    PlaceOptions so = o;
    so.policy = temp_path("no_such_policy.ckpt");
    so.finetune = 4;
    const PlaceResult s = place("anchor-search", g, cl, so);
    REQUIRE(s.valid);
    CHECK(s.step_time <= bh.step_time);
    CHECK(s.step_time == Simulator(g, cl).simulate(s.plan).step_time);
    CHECK(check_plan(g, s.plan, 2).empty());
    CHECK(s.note.find("searched 4 rounds x 6 block moves and 2 x 32 critical-path moves: ") != std::string::npos);
    CHECK(s.note.find("zero-shot") == std::string::npos);
    // no zero-shot samples: the anchor's candidates, the reference, then each round's 6 proposals,
    // the climbs' start and at most their 64 proposals
    const std::int64_t rounds = s.simulations - before;
    CHECK(rounds >= 4 * 7);
    CHECK(rounds <= 4 * finetune_update_simulations(6));
    CHECK(place("anchor-search", g, cl, so).plan.device == s.plan.device);  // same seed, same answer
    CHECK(!find_place_method("anchor-search").reads_option(PlaceOption::policy));
    so.time_limit = 1e-9;
    const PlaceResult timed_search = place("anchor-search", g, cl, so);
    CHECK(timed_search.note.find("searched 0 rounds") != std::string::npos);
    CHECK(timed_search.note.find("none ran (the time limit") != std::string::npos);
    CHECK(timed_search.step_time == bh.step_time);  // the anchor, searched no further
    // a cluster wider than any policy: the search has no network to limit it
    const Cluster wide = Cluster::uniform("same4", DeviceSpec::v100(), 4, 25e9, 2e-5);
    so.time_limit = 0;
    so.finetune = 1;
    CHECK(place("anchor-search", g, wide, so).valid);
  }
  o.policy = temp_path("no_such_policy.ckpt");
  CHECK_THROWS_WITH(place("go", g, cl, o), Catch::Contains("not found"));
  o.policy.clear();
  const Cluster big = Cluster::uniform("same4", DeviceSpec::v100(), 4, 25e9, 2e-5);  // the tiny policy has 2 devices
  CHECK_THROWS_WITH(place("go-zero-shot", g, big, o), Catch::Contains("at most 2"));
  std::filesystem::remove(ck);
}

TEST_CASE("The shipped pre-trained policy places an unseen ONNX model zero-shot", "[rl]") {
  const std::string policy = std::string(GO_TEST_DATA_DIR) + "/../../policies/go-zoo-v100x248.ckpt";
  const std::string model = std::string(GO_SHARED_DIR) + "/models/resnet18.onnx";
  REQUIRE(std::filesystem::exists(policy));
  CHECK(load_policy(policy)->config().chain == "hidden");
  if (!std::filesystem::exists(model)) {
    WARN("skipped: " << model << " not found");
    return;
  }
  const OpGraph g = make_training_graph(load_graph(model));
  const Cluster cl = load_cluster("v100x4");
  GoPlaceReport rep;
  const Plan p = go_place(g, cl, policy, 0, 4, 1, &rep);
  const SimResult r = Simulator(g, cl).simulate(p);
  REQUIRE(r.valid);
  CHECK(r.step_time ==
        std::min({rep.greedy_step_time, rep.sampled_step_time, rep.anchor_step_time, rep.faster_step_time}));
  // zero-shot is at most 10% behind the anchor the policy starts from
  CHECK(r.step_time <= rep.anchor_step_time * 1.10);
}

// A plan file given as the expert split (gopt place --expert) is human's placement everywhere: the
// human method's, annealing's start and GO's anchor (best-heuristic, anneal-anchor, the go methods).
TEST_CASE("Anchor: an expert plan file is its human placement, as for human and annealing", "[rl]") {
  const OpGraph g = make_training_graph(load_graph("zoo:gnmt2:seq=4"));
  const Cluster cl = cluster_preset("v100x2");
  const Simulator sim(g, cl);
  const policy::PolicyGraph pg = policy::PolicyGraph::from_graph(g);
  // every op on device 1: a placement the zoo's human rule never gives
  Plan mine = default_plan(g);
  std::fill(mine.device.begin(), mine.device.end(), 1);
  const std::string file = temp_path("expert_plan.json");
  save_plan(mine, g, file);
  auto on_device_1 = [](const Plan& p) {
    return std::all_of(p.device.begin(), p.device.end(), [](std::int32_t d) { return d == 1; });
  };
  const Anchor rule = choose_anchor(g, pg, cl, sim, 8, true, "human");
  REQUIRE(rule.result.valid);
  CHECK_FALSE(on_device_1(rule.plan));
  const Anchor given = choose_anchor(g, pg, cl, sim, 8, true, "human", 0, nullptr, kAnchorTies, 0, file);
  REQUIRE(given.result.valid);
  CHECK(on_device_1(given.plan));
  CHECK(given.describe().rfind("human", 0) == 0);
  // the same plan as the human method's with that file, up to the anchor's priorities and fusion
  const std::string policy = std::string(GO_TEST_DATA_DIR) + "/../../policies/go-zoo-v100x248.ckpt";
  register_go_methods(policy, 2, 16);
  PlaceOptions o;
  o.expert_split = file;
  o.anchor_placements = "human";
  const PlaceResult human = place("human", g, cl, o);
  CHECK(human.plan.device == given.plan.device);
  const PlaceResult bh = place("best-heuristic", g, cl, o);
  REQUIRE(bh.valid);
  CHECK(on_device_1(bh.plan));
  CHECK(bh.step_time == given.result.step_time);
  // go-zero-shot through place(): its anchor is that plan too
  GoPlaceOptions go;
  go.policy = policy;
  go.samples = 2;
  go.anchor_placements = "human";
  go.expert = file;
  GoPlaceReport rep;
  go_place(g, cl, go, &rep);
  CHECK(rep.anchor_step_time == given.result.step_time);
  const PlaceResult zs = place("go-zero-shot", g, cl, o);
  CHECK(zs.note.find("anchor " + given.describe() + " ") == 0);
  o.expert_split.clear();
  CHECK_FALSE(on_device_1(place("best-heuristic", g, cl, o).plan));
  CHECK(place("go-zero-shot", g, cl, o).note.find("anchor " + rule.describe() + " ") == 0);
  // through the training config (what go_place passes), for one graph only
  TrainConfig c = tiny_config(1);
  c.policy.anchor = true;
  c.anchor_placements = "human";
  c.anchor_expert = file;
  c.updates = 1;
  PpoTrainer t(c, {g}, cl);
  CHECK(t.task(0).anchor_step_time == given.result.step_time);
  CHECK(on_device_1(t.task(0).best_plan));
  t.update();
  CHECK(t.task(0).best_step_time <= given.result.step_time);
  CHECK(TrainConfig::from_json(c.to_json()).anchor_expert == file);
  CHECK_THROWS_WITH(PpoTrainer(c, {g, g}, cl), Catch::Contains("one graph's plan"));
  // a file that is not there, or that does not fit the cluster, is an error, not a silent fallback
  CHECK_THROWS_WITH(choose_anchor(g, pg, cl, sim, 8, true, "human", 0, nullptr, kAnchorTies, 0, file + ".missing"),
                    Catch::Contains("cannot open"));
  std::fill(mine.device.begin(), mine.device.end(), 3);
  save_plan(mine, g, file);
  CHECK_THROWS_WITH(choose_anchor(g, pg, cl, sim, 8, true, "human", 0, nullptr, kAnchorTies, 0, file),
                    Catch::Contains("device 3"));
  std::filesystem::remove(file);
}

}  // namespace test_rl

namespace test_rl {
namespace {

// Four producers of 100 MB (10 ms each) on device 1 read by a sum s (1 ms) on device 0, whose
// 1 kB output z reads there; w (1 ms, 300 MB of parameters) also on device 1. On 25 GB/s links a
// product leaves (4 ms) before the next is made, so device 1 peaks near 500 MB; with s on device 1
// it keeps all four for s (700 MB), over the devices' 650 MB, and w must leave for the plan to fit.
OpGraph fan_in_sum() {
  GraphBuilder b;
  auto add = [&](const std::string& name, double ms, std::int64_t bytes, std::vector<OpId> ins, OpKind kind,
                 std::int64_t params = 0) {
    OpSpec s;
    s.name = name;
    s.kind = kind;
    s.time = ms * 1e-3;
    s.param_bytes = params;
    TensorSpec t;
    t.shape_known = false;
    t.bytes = bytes;
    s.outputs.push_back(t);
    for (OpId i : ins) s.inputs.push_back(TensorRef{i, 0});
    return b.add_op(std::move(s));
  };
  std::vector<OpId> p;
  for (int i = 0; i < 4; ++i) p.push_back(add("p" + std::to_string(i), 10, 100'000'000, {}, OpKind::matmul));
  const OpId s = add("s", 1, 1000, p, OpKind::add);
  add("z", 1, 1000, {s}, OpKind::matmul);
  add("w", 1, 1000, {}, OpKind::matmul, 300'000'000);
  return b.build();
}

}  // namespace

// Gather moves in fine-tuning (TrainConfig::gather_moves, PpoTrainer::gather_best): from an anchor
// with the sum away from its producers, the first round (and the first update) moves it to them;
// that plan overflows device 1, and fitted to memory (w moved off) it becomes the best plan and the
// anchor. Without gather moves, two block moves do not find it; after the first round none is made.
TEST_CASE("PPO gather moves: the largest receiver moved to its sender and fitted to memory", "[rl][gather]") {
  const OpGraph g = fan_in_sum();
  DeviceSpec d = DeviceSpec::v100();
  d.memory_bytes = 650'000'000;
  const Cluster cl = Cluster::uniform("same3", d, 3, 25e9, 2e-5);
  const Simulator sim(g, cl);
  const std::string file = temp_path("fan_in_sum.plan.json");
  Plan expert;
  expert.device = {1, 1, 1, 1, 0, 0, 1};  // p0-p3, s, z, w
  save_plan(expert, g, file);
  const SimResult given = sim.simulate(expert);
  REQUIRE(given.valid);
  {  // the move alone: 400 MB received from device 1, whose copy then overflows it
    const std::vector<GatherMove> m = gather_moves(g, cl, expert.device, given.step_time);
    REQUIRE(m.size() == 1);
    CHECK((m[0].op == 4 && m[0].to == 1));
    const SimResult over = sim.simulate(gathered(g, expert, m[0]));
    CHECK(over.status == SimStatus::out_of_memory);
    CHECK(over.step_time < given.step_time);
  }
  auto config = [&](int gather, int threads) {
    TrainConfig c = tiny_config(3);
    c.policy.anchor = true;
    c.policy.max_devices = 3;
    c.anchor_placements = "human";
    c.anchor_expert = file;
    c.reanchor = true;
    c.samples = 2;
    c.minibatch = 2;
    c.epochs = 1;
    c.block_moves = 1.0;
    c.gather_moves = gather;
    c.threads = threads;
    return c;
  };
  PpoTrainer with(config(4, 2), {g}, cl), without(config(0, 2), {g}, cl), one(config(4, 1), {g}, cl);
  // by hand: the products end at 40 ms; the last one's transfer (4 ms + 20 us), s and z (1 ms each)
  // follow on device 0, or s follows on device 1 and z gets its 1 kB after 20.04 us
  const double anchor = with.task(0).anchor_step_time;
  CHECK(anchor == Approx(46.02e-3).epsilon(1e-4));
  const std::int64_t w0 = with.task(0).trace.samples(), n0 = without.task(0).trace.samples();
  with.search_round();
  without.search_round();
  one.search_round();
  const GraphTask& t = with.task(0);
  CHECK(t.best_plan.device[4] == 1);               // s with its producers
  CHECK(t.best_plan.device[6] != 1);               // w moved off to fit
  CHECK(t.best_step_time == Approx(42.02004e-3).epsilon(1e-5));
  CHECK(sim.simulate(t.best_plan).valid);
  CHECK(sim.simulate(t.best_plan).step_time == t.best_step_time);
  // the anchor followed (reanchor): its actions decode to the best plan
  CHECK(sim.simulate(with.plan_of(0, {t.pg.anchor_device, t.pg.anchor_priority, t.pg.anchor_fuse})).step_time ==
        t.best_step_time);
  // 2 block moves, then 1 gather move, the fit's trials and the decoded answer, all in the trace
  CHECK(t.trace.samples() - w0 >= 2 + 1 + 1 + 1);
  CHECK(t.trace.best() == t.best_step_time);
  CHECK(without.task(0).trace.samples() - n0 == 2);
  CHECK(without.task(0).best_plan.device[4] == 0);
  CHECK(without.task(0).best_step_time > t.best_step_time);
  // the same on one thread
  CHECK(one.task(0).best_plan.device == t.best_plan.device);
  CHECK(one.task(0).best_step_time == t.best_step_time);
  // only after the first round
  const std::int64_t w1 = t.trace.samples();
  with.search_round();
  CHECK(with.task(0).trace.samples() - w1 == 2);
  // and after GO's first update (the policy's draws and the moves, then the gather)
  TrainConfig go = config(4, 2);
  go.block_moves = 0.5;
  PpoTrainer upd(go, {g}, cl);
  upd.update();
  CHECK(upd.task(0).best_plan.device[4] == 1);
  CHECK(upd.task(0).best_step_time == Approx(42.02004e-3).epsilon(1e-5));
  // the key round-trips and is checked
  CHECK(TrainConfig::from_json(go.to_json()).gather_moves == 4);
  CHECK_THROWS_WITH(TrainConfig::parse(R"({"gather_moves": -1})"), Catch::Contains("gather_moves"));
  std::filesystem::remove(file);
}

}  // namespace test_rl
