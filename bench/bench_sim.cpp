// Simulator benchmarks: one simulated training step of an ~80,000-op training graph (a synthetic
// 27k-op forward graph shaped like a deep residual MLP/Transformer stack, expanded by
// make_training_graph), with several plans, on one thread and with two threads evaluating
// independent plans (one workspace each), plus the one-off Simulator construction. Fused plans:
// runs of 3 consecutive ops (the fusion cost model's worst case; most of these groups break the
// fusion rules, so they run on a simulator with SimOptions::check_fusion_rules off) and the
// XLA-like fusion (legal), with the rules on and off to show what checking them costs.
// Also decoding the policy's actions with fusion on the 80,588-op training graph (BM_decode_80k).
// See "Simulator benchmarks" in bench/README.md.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "go/baselines/fusion.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/load.hpp"
#include "go/graph/training.hpp"
#include "go/graph/zoo.hpp"
#include "go/policy/decode.hpp"
#include "go/policy/features.hpp"
#include "go/sim/sim.hpp"

namespace {

// Blocks of: matmul(+w) -> layer_norm(+w) -> gelu -> matmul(+w) -> dropout -> add(residual), with a
// side branch every 4th block (two parallel matmuls joined by concat -> matmul) so the graph has
// parallelism for a placement to exploit.
go::OpGraph forward_graph(int target_ops) {
  go::GraphBuilder b;
  const std::int64_t batch = 16, width = 1024;
  auto tensor = [&](std::int64_t w) {
    go::TensorSpec t;
    t.shape = {batch, 64, w};
    return t;
  };
  auto add = [&](const std::string& name, go::OpKind kind, std::vector<go::OpId> ins, std::int64_t params, std::int64_t w) {
    go::OpSpec s;
    s.name = name;
    s.kind = kind;
    s.param_bytes = params;
    s.outputs.push_back(tensor(w));
    const double elems = static_cast<double>(batch * 64 * w);
    s.flops = kind == go::OpKind::matmul ? 2.0 * elems * static_cast<double>(width) : 4.0 * elems;
    for (go::OpId i : ins) s.inputs.push_back({i, 0});
    return b.add_op(std::move(s));
  };
  go::OpId x = add("input", go::OpKind::input, {}, 0, width);
  int blk = 0;
  while (static_cast<int>(b.size()) < target_ops - 12) {
    const std::string p = "b" + std::to_string(blk);
    const std::int64_t w2 = width * width * 4;
    go::OpId h = add(p + "/fc1", go::OpKind::matmul, {x}, w2, width);
    h = add(p + "/ln", go::OpKind::layer_norm, {h}, width * 8, width);
    h = add(p + "/gelu", go::OpKind::gelu, {h}, 0, width);
    if (blk % 4 == 3) {
      go::OpId a = add(p + "/branch_a", go::OpKind::matmul, {h}, w2 / 2, width / 2);
      go::OpId c = add(p + "/branch_b", go::OpKind::matmul, {h}, w2 / 2, width / 2);
      a = add(p + "/branch_a_act", go::OpKind::relu, {a}, 0, width / 2);
      c = add(p + "/branch_b_act", go::OpKind::relu, {c}, 0, width / 2);
      h = add(p + "/concat", go::OpKind::concat, {a, c}, 0, width);
    }
    h = add(p + "/fc2", go::OpKind::matmul, {h}, w2, width);
    h = add(p + "/dropout", go::OpKind::dropout, {h}, 0, width);
    x = add(p + "/residual", go::OpKind::add, {x, h}, 0, width);
    ++blk;
  }
  return b.build();
}

struct Setup {
  go::OpGraph graph;
  std::unique_ptr<go::Simulator> sim;      // fusion rules checked (the default)
  std::unique_ptr<go::Simulator> sim_any;  // any convex group runs (check_fusion_rules off)
  struct Entry {
    std::string name;
    go::Plan plan;
    const go::Simulator* sim;
  };
  std::vector<Entry> plans;
};

// Device of each op when forward ops are split into `nd` contiguous stages and every gradient,
// accumulation and update op follows its forward op.
go::Plan pipeline_plan(const go::OpGraph& g, int nd) {
  std::unordered_map<std::string, std::int32_t> fwd_dev;
  std::int32_t nfwd = 0;
  for (const go::Op& o : g.ops()) nfwd += o.role == go::OpRole::forward ? 1 : 0;
  go::Plan p;
  p.device.assign(static_cast<std::size_t>(g.num_ops()), nd - 1);
  std::int32_t k = 0;
  for (go::OpId v : g.topo_order())
    if (g.op(v).role == go::OpRole::forward) {
      const auto d = static_cast<std::int32_t>(static_cast<std::int64_t>(k++) * nd / nfwd);
      p.device[static_cast<std::size_t>(v)] = d;
      fwd_dev[g.name(v)] = d;
    }
  for (go::OpId v = 0; v < g.num_ops(); ++v) {
    if (g.op(v).role == go::OpRole::forward) continue;
    const std::string& name = g.name(v);
    const auto cut = name.find("/grad");
    if (cut == std::string::npos) continue;
    auto it = fwd_dev.find(name.substr(0, cut));
    if (it != fwd_dev.end()) p.device[static_cast<std::size_t>(v)] = it->second;
  }
  go::colocate(g, p);
  return p;
}

go::Plan random_plan(const go::OpGraph& g, int nd, std::uint32_t seed) {
  std::mt19937 rng(seed);
  go::Plan p;
  p.device.resize(static_cast<std::size_t>(g.num_ops()));
  for (auto& d : p.device) d = static_cast<std::int32_t>(rng() % static_cast<unsigned>(nd));
  go::colocate(g, p);
  return p;
}

void add_priorities(go::Plan& p, std::uint32_t seed) {
  std::mt19937 rng(seed);
  p.priority.resize(p.device.size());
  for (auto& x : p.priority) x = static_cast<float>(rng() % 1000);
}

// Fuses runs of up to 3 consecutive ops of the topological order that share a device and no
// colocation group (always convex; most such groups break the fusion rules).
void add_fusion(const go::OpGraph& g, go::Plan& p) {
  const auto n = static_cast<std::size_t>(g.num_ops());
  p.fusion.assign(n, -1);
  auto topo = g.topo_order();
  for (std::size_t i = 0; i + 2 < n; i += 3) {
    const go::OpId a = topo[i], b = topo[i + 1], c = topo[i + 2];
    const std::int32_t d = p.device_of(a);
    if (p.device_of(b) != d || p.device_of(c) != d) continue;
    if (g.op(a).colocation >= 0 || g.op(b).colocation >= 0 || g.op(c).colocation >= 0) continue;
    for (go::OpId v : {a, b, c}) p.fusion[static_cast<std::size_t>(v)] = static_cast<std::int32_t>(i);
  }
}

Setup& setup() {
  static Setup s = [] {
    Setup st;
    st.graph = go::make_training_graph(forward_graph(30150));
    go::Cluster c = go::cluster_preset("v100x8");
    for (auto& d : c.devices) d.spec.memory_bytes = 1LL << 40;  // measure scheduling, not OOM verdicts
    st.sim = std::make_unique<go::Simulator>(st.graph, c);
    go::SimOptions any;
    any.check_fusion_rules = false;
    st.sim_any = std::make_unique<go::Simulator>(st.graph, c, any);
    const go::OpGraph& g = st.graph;
    const go::Simulator* on = st.sim.get();
    const go::Simulator* off = st.sim_any.get();
    st.plans.push_back({"one_device", go::Plan::single_device(g.num_ops(), 0), on});
    st.plans.push_back({"pipeline4", pipeline_plan(g, 4), on});
    st.plans.push_back({"pipeline8", pipeline_plan(g, 8), on});
    st.plans.push_back({"random8", random_plan(g, 8, 1), on});
    go::Plan pr = pipeline_plan(g, 8);
    add_priorities(pr, 2);
    st.plans.push_back({"pipeline8_priority", pr, on});
    go::Plan fu = pipeline_plan(g, 8);
    add_fusion(g, fu);
    st.plans.push_back({"pipeline8_fused", fu, off});
    go::Plan all = random_plan(g, 8, 3);
    add_priorities(all, 4);
    add_fusion(g, all);
    st.plans.push_back({"random8_priority_fused", all, off});
    go::Plan px = pipeline_plan(g, 8);
    go::apply_xla_fusion(g, px);
    go::Plan rx = random_plan(g, 8, 3);
    add_priorities(rx, 4);
    go::apply_xla_fusion(g, rx);
    st.plans.push_back({"pipeline8_xla", px, on});
    st.plans.push_back({"random8_priority_xla", rx, on});
    st.plans.push_back({"pipeline8_xla_unchecked", px, off});
    st.plans.push_back({"random8_priority_xla_unchecked", rx, off});
    return st;
  }();
  return s;
}

void BM_sim_80k(benchmark::State& state) {
  Setup& s = setup();
  const auto& [name, plan, sim] = s.plans[static_cast<std::size_t>(state.range(0))];
  go::SimWorkspace ws = sim->make_workspace();
  const go::SimResult* r = &sim->simulate(plan, ws);
  if (!r->valid) state.SkipWithError(("invalid plan " + name + ": " + go::sim_reason(*r, s.graph, sim->cluster())).c_str());
  for (auto _ : state) {
    r = &sim->simulate(plan, ws);
    benchmark::DoNotOptimize(r->step_time);
  }
  state.SetLabel(name);
  state.counters["ops"] = s.graph.num_ops();
  state.counters["edges"] = static_cast<double>(s.graph.num_edges());
  state.counters["transfers"] = static_cast<double>(r->transfers);
  state.counters["step_ms"] = r->step_time * 1e3;
  state.counters["sims_per_s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_sim_80k)->DenseRange(0, 10)->Unit(benchmark::kMillisecond);

// Threads evaluate independent plans (as an RL trainer's workers do), one workspace each: the mix of
// pipeline4 ... random8_priority_fused.
void BM_sim_80k_threads(benchmark::State& state) {
  Setup& s = setup();
  go::SimWorkspace ws = s.sim->make_workspace();  // both simulators: same graph and cluster
  std::vector<const Setup::Entry*> mine;
  for (std::size_t k = 1; k < 7; ++k)
    if (static_cast<int>(k) % state.threads() == state.thread_index() % state.threads() || state.threads() == 1)
      mine.push_back(&s.plans[k]);
  std::size_t k = 0;
  for (auto _ : state) {
    const go::SimResult& r = mine[k]->sim->simulate(mine[k]->plan, ws);
    benchmark::DoNotOptimize(r.step_time);
    if (++k == mine.size()) k = 0;
  }
  state.counters["sims_per_s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_sim_80k_threads)->Threads(1)->Threads(2)->UseRealTime()->Unit(benchmark::kMillisecond);

// A zoo workload's training graph, built once per process.
const go::OpGraph& zoo_training_graph(const char* name) {
  static std::unordered_map<std::string, std::unique_ptr<go::OpGraph>> graphs;
  auto& gp = graphs[name];
  if (!gp) gp = std::make_unique<go::OpGraph>(go::make_training_graph(go::load_graph(std::string("zoo:") + name)));
  return *gp;
}

// Zoo training graphs (zoo.hpp) with the zoo's human-expert placement on 8 V100s and on one device.
void BM_sim_zoo(benchmark::State& state, const char* name, bool human) {
  const go::OpGraph& g = zoo_training_graph(name);
  go::Cluster c = go::cluster_preset("v100x8");
  for (auto& d : c.devices) d.spec.memory_bytes = 1LL << 40;
  go::Simulator sim(g, c);
  go::Plan p = go::Plan::single_device(g.num_ops(), 0);
  if (human) {
    p.device = go::zoo_human_placement(g, 8);
    go::colocate(g, p);
  }
  go::SimWorkspace ws = sim.make_workspace();
  const go::SimResult* r = &sim.simulate(p, ws);
  if (!r->valid) state.SkipWithError(go::sim_reason(*r, g, c).c_str());
  for (auto _ : state) {
    r = &sim.simulate(p, ws);
    benchmark::DoNotOptimize(r->step_time);
  }
  state.counters["ops"] = g.num_ops();
  state.counters["transfers"] = static_cast<double>(r->transfers);
  state.counters["step_ms"] = r->step_time * 1e3;
  state.counters["sims_per_s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(BM_sim_zoo, wavenet4_one_device, "wavenet4", false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_sim_zoo, wavenet4_human8, "wavenet4", true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_sim_zoo, transformer_xl8_human8, "transformer_xl8", true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_sim_zoo, gnmt8_human8, "gnmt8", true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_sim_zoo, gnmt8_seq121_one_device, "gnmt8:seq=121", false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_sim_zoo, gnmt8_seq121_human8, "gnmt8:seq=121", true)->Unit(benchmark::kMillisecond);

// The event loop's prefetches (SimWorkspace::set_prefetch) on and off with one simulator and one
// workspace, alternating every simulation so that both see the same machine and caches: zoo training
// graphs from 12,808 ops (gnmt2, ~2 MB of loop arrays, below the automatic threshold) to 80,588
// (gnmt8 at 121 steps, issue 19's graph), each with three plans: one device; human's devices;
// human's devices with XLA-like fusion and random priority levels (seed 1), the shape of GO's
// anchor and samples. Memory is unbounded (human overflows a V100 on the largest). Counters: ms per
// simulation without and with, and their ratio.
void BM_sim_prefetch(benchmark::State& state, const char* name) {
  const go::OpGraph& g = zoo_training_graph(name);
  go::Cluster c = go::cluster_preset("v100x8");
  for (auto& d : c.devices) d.spec.memory_bytes = 1LL << 40;
  const go::Simulator sim(g, c);
  go::Plan p = go::Plan::single_device(g.num_ops(), 0);
  const auto what = state.range(0);
  if (what >= 1) {
    p.device = go::zoo_human_placement(g, 8);
    go::colocate(g, p);
  }
  if (what == 2) {
    go::apply_xla_fusion(g, p);
    std::mt19937 rng(1);
    p.priority.resize(p.device.size());
    for (auto& x : p.priority) x = static_cast<float>(rng() % 8);
  }
  go::SimWorkspace ws = sim.make_workspace();
  double t_on = 0, t_off = 0;
  using clock = std::chrono::steady_clock;
  for (auto _ : state) {
    ws.set_prefetch(go::SimPrefetch::never);
    const auto a = clock::now();
    benchmark::DoNotOptimize(sim.simulate(p, ws).step_time);
    const auto b = clock::now();
    ws.set_prefetch(go::SimPrefetch::always);
    benchmark::DoNotOptimize(sim.simulate(p, ws).step_time);
    const auto e = clock::now();
    t_off += std::chrono::duration<double>(b - a).count();
    t_on += std::chrono::duration<double>(e - b).count();
  }
  const double k = static_cast<double>(state.iterations());
  state.SetLabel(std::string(what == 0 ? "one device" : what == 1 ? "human" : "human + xla + priorities") +
                 (sim.prefetches() ? ", prefetches by default" : ", not by default"));
  state.counters["ops"] = g.num_ops();
  state.counters["off_ms"] = t_off / k * 1e3;
  state.counters["on_ms"] = t_on / k * 1e3;
  state.counters["on_per_off"] = t_on / t_off;
}
BENCHMARK_CAPTURE(BM_sim_prefetch, gnmt2, "gnmt2")->DenseRange(0, 2)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_sim_prefetch, wavenet2, "wavenet2")->DenseRange(0, 2)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_sim_prefetch, gnmt4, "gnmt4")->DenseRange(0, 2)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_sim_prefetch, transformer_xl8, "transformer_xl8")->DenseRange(0, 2)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_sim_prefetch, gnmt8_seq121, "gnmt8:seq=121")->DenseRange(0, 2)->Unit(benchmark::kMillisecond);

// Decoding actions into a plan on the 80,588-op training graph (zoo:gnmt8:seq=121): human's devices
// and "fuse into producers" on every op, as GO's XLA-fused anchor and its samples are decoded
// (policy::decode; most of it is FusionGroups' merges and cycle searches). In the same run: the
// XLA-like heuristic building the same groups on the same devices (apply_xla_fusion: the same
// merges, without decode's actions), one simulation of the decoded plan (memory unbounded: human
// overflows a V100 here), what a sample costs besides its decode, and decode as it was before the
// PolicyGraph's FusionIndex renumbered the graph in topological order (the same merges on the
// graph's own ids; go/graph/fusion_groups.hpp, FusionIndex's `relabel`).
struct DecodeSetup {
  go::OpGraph graph;
  go::policy::PolicyGraph pg;
  go::policy::PolicyGraph pg_as_given;  // its FusionIndex without `relabel`: merges on the graph's own ids
  go::policy::PolicyGraph pg_unpooled;  // pg without its FusionGroupsPool: a FusionGroups made anew per decode
  go::policy::Actions actions;
  go::Plan human;    // devices only
  go::Plan decoded;  // policy::decode's plan
  std::unique_ptr<go::Simulator> sim;
  go::policy::DecodeOptions options;  // into every producer
  std::int64_t groups = 0;
  bool same = false;  // decode's groups are the heuristic's
  // fine-tuning's block moves: 20 rows to the next device, at a tenth and at half of the rows,
  // decoded from the log of `actions` (the anchor's) and whole
  go::policy::DecodeLog log;
  go::policy::Actions moved[2];
  std::int64_t decided[2] = {0, 0};
};

DecodeSetup& decode_setup() {
  static DecodeSetup s = [] {
    DecodeSetup st;
    st.graph = go::make_training_graph(go::load_graph("zoo:gnmt8:seq=121"));
    const go::OpGraph& g = st.graph;
    st.pg = go::policy::PolicyGraph::from_graph(g);
    st.human.device = go::zoo_human_placement(g, 8);
    go::colocate(g, st.human);
    st.actions = go::policy::actions_from_plan(g, st.pg, st.human, 8);
    std::fill_n(st.actions.fuse.data<std::int32_t>(), st.actions.fuse.numel(), 1);
    st.options.join = go::policy::FusionJoin::all;
    const go::policy::Decision d = go::policy::decode(g, st.pg, st.actions, 8, st.options, nullptr, nullptr, &st.log);
    st.pg_unpooled = st.pg;
    st.pg_unpooled.fusion_groups = nullptr;
    st.pg_as_given = st.pg;
    st.pg_as_given.fusion_groups = nullptr;  // its groups are made on another index: never pooled anyway
    st.pg_as_given.fusion_index = std::make_shared<const go::FusionIndex>(g);
    const go::policy::Decision e = go::policy::decode(g, st.pg_as_given, st.actions, 8, st.options);
    st.groups = d.num_groups;
    st.decoded.device = d.device;
    st.decoded.fusion = d.fusion_group;
    go::Plan x = st.human;
    go::apply_xla_fusion(g, x);
    const go::policy::Decision again = go::policy::decode(g, st.pg, st.actions, 8, st.options);  // the pool's groups, reset
    const go::policy::Decision anew = go::policy::decode(g, st.pg_unpooled, st.actions, 8, st.options);
    st.same = x.fusion == d.fusion_group && e.fusion_group == d.fusion_group && again.fusion_group == d.fusion_group &&
              anew.fusion_group == d.fusion_group && st.pg.fusion_index->topo;
    for (int m = 0; m < 2; ++m) {
      st.moved[m] = st.actions.clone();
      std::int32_t* dev = st.moved[m].device.data<std::int32_t>();
      const std::int32_t begin = g.num_ops() / (m == 0 ? 10 : 2);
      for (std::int32_t r = begin; r < begin + 20; ++r) dev[r] = (dev[r] + 1) % 8;
      go::policy::DecodeLog l;
      const go::policy::Decision from = go::policy::decode(g, st.pg, st.moved[m], 8, st.options, nullptr, &st.log, &l);
      st.same = st.same && from.fusion_group == go::policy::decode(g, st.pg, st.moved[m], 8, st.options).fusion_group;
      st.decided[m] = l.decided;
    }
    go::Cluster c = go::cluster_preset("v100x8");
    for (auto& dev : c.devices) dev.spec.memory_bytes = 1LL << 40;
    st.sim = std::make_unique<go::Simulator>(g, c);
    return st;
  }();
  return s;
}

void BM_decode_80k(benchmark::State& state) {
  DecodeSetup& s = decode_setup();
  if (!s.same) {
    state.SkipWithError("decode's fusion groups differ from the XLA-like heuristic's on the same devices, or from "
                        "decode's on the graph's own ids, or with or without the pool, or from a log and whole (or the "
                        "graph was not renumbered)");
    return;
  }
  const go::OpGraph& g = s.graph;
  go::SimWorkspace ws = s.sim->make_workspace();
  const auto what = state.range(0);
  for (auto _ : state) {
    if (what == 0 || what == 3 || what == 4) {
      const go::policy::PolicyGraph& pg = what == 0 ? s.pg : what == 3 ? s.pg_as_given : s.pg_unpooled;
      const go::policy::Decision d = go::policy::decode(g, pg, s.actions, 8, s.options);
      benchmark::DoNotOptimize(d.num_groups);
    } else if (what >= 5) {
      const go::policy::Actions& m = s.moved[(what - 5) % 2];
      const go::policy::Decision d = go::policy::decode(g, s.pg, m, 8, s.options, nullptr, what < 7 ? &s.log : nullptr);
      benchmark::DoNotOptimize(d.num_groups);
    } else if (what == 1) {
      go::Plan p = s.human;
      benchmark::DoNotOptimize(go::apply_xla_fusion(g, p));
    } else {
      benchmark::DoNotOptimize(s.sim->simulate(s.decoded, ws).step_time);
    }
  }
  state.SetLabel(what == 0   ? "policy::decode, fuse into producers everywhere"
                 : what == 1 ? "anchor: apply_xla_fusion, the same groups"
                 : what == 2 ? "reference: one simulation of the decoded plan"
                 : what == 3 ? "anchor: policy::decode merging on the graph's own ids (no relabel), the same groups"
                 : what == 4 ? "anchor: policy::decode with a FusionGroups made anew (no pool), the same groups"
                 : what == 5 ? "policy::decode from /0's log after 20 rows moved at a tenth of the rows"
                 : what == 6 ? "policy::decode from /0's log after 20 rows moved at half of the rows"
                 : what == 7 ? "anchor: /5's actions decoded whole"
                             : "anchor: /6's actions decoded whole");
  if (what == 5 || what == 6) state.counters["decided"] = static_cast<double>(s.decided[what - 5]);
  state.counters["ops"] = g.num_ops();
  state.counters["groups"] = static_cast<double>(s.groups);
  state.counters["per_s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_decode_80k)->DenseRange(0, 8)->Unit(benchmark::kMillisecond);

void BM_sim_construct_80k(benchmark::State& state) {
  Setup& s = setup();
  for (auto _ : state) {
    go::Simulator sim(s.graph, s.sim->cluster());
    benchmark::DoNotOptimize(sim.num_ops());
  }
}
BENCHMARK(BM_sim_construct_80k)->Unit(benchmark::kMillisecond);

}  // namespace
