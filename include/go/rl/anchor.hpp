#pragma once
// The anchor plan of a graph on a cluster: the best of a few cheap heuristic plans, simulated.
// The GO policy reads it per row (go/policy/policy.hpp, config "anchor"): as an input embedding of
// the anchor device and as a learned head start on the logit of the anchor's action in each task.
//
// Why: with identical devices, a policy that decides every row independently has a saddle at the
// uniform placement (by symmetry no device is better for any row in expectation), and PPO starting
// there stays there; sampling tens of thousands of rows uniformly also gives plans far worse than
// any heuristic. Anchored, the first policy samples near a good plan, device indices mean
// something ("the anchor's device" or not), and PPO learns where deviating pays: other devices,
// priorities and fusion. Greedy decoding of a fresh anchored policy reproduces the anchor.
//
// Candidates (each simulated once, after decoding through policy::decode so the anchor is exactly
// what the policy's actions express):
//   placement   default (all on device 0), human (an expert plan file's devices when one is given)
//               and pipeline stages (go/baselines/human.hpp), METIS k-way (when built), and the
//               devices of Baechi's m-ETF and m-SCT and of HEFT (go/baselines/list_scheduling.hpp)
//   priority    none (level 0 everywhere = first ready first run) or upward-rank levels: rank(v) =
//               cost(v) + max over successors of rank, quantized into the policy's levels, so ops
//               on the critical path run first (HEFT's order)
//   fusion      none or XLA-like greedy producer-consumer fusion (go/baselines/fusion.hpp), as
//               decode() builds it from "fuse into producers" on every op
// The anchor is the candidate with the lowest valid step time; when none fits, the one with the
// least memory excess. A candidate that ran out of memory but would be faster is fitted to it
// (`fit`: op sets moved off the devices that overflow, go/baselines/memory_fit.hpp) and becomes a
// placement of its own. Then a few more, each kept when faster: the best candidate with its fan-out
// ops spread over the devices (`spread`, spread_fan_out below), and the two best placements
// pipelined (`depth-first`): no priority levels, depth-first order (policy::TieOrder::depth_first)
// and every op fused into its main producer (policy::FusionJoin::main); with both, the spread
// candidate pipelined too (its own fusion, no levels, depth-first order). Last (`relabel`), where
// links differ by pair, the anchor and the faster answer with their devices relabelled.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <span>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "go/baselines/best_trace.hpp"
#include "go/baselines/human.hpp"
#include "go/baselines/list_scheduling.hpp"
#include "go/baselines/memory_fit.hpp"
#include "go/baselines/metis.hpp"
#include "go/baselines/relabel.hpp"
#include "go/core/parallel.hpp"
#include "go/graph/graph.hpp"
#include "go/policy/decode.hpp"
#include "go/policy/features.hpp"
#include "go/policy/to_plan.hpp"
#include "go/rl/config.hpp"
#include "go/sim/cluster.hpp"
#include "go/sim/plan.hpp"
#include "go/sim/simulator.hpp"

namespace go::rl {

// The tie orders of kAnchorTieOrders: name, TieOrder and how Anchor::describe() words it.
struct AnchorTieOrder {
  std::string_view name;
  policy::TieOrder order;
  std::string_view phrase;
};
inline constexpr AnchorTieOrder kAnchorTieOrderTable[] = {{"program", policy::TieOrder::program, ""},
                                                          {"first-ready", policy::TieOrder::first_ready, " + first-ready order"},
                                                          {"latest", policy::TieOrder::latest, " + latest-first order"},
                                                          {"depth-first", policy::TieOrder::depth_first, " + depth-first order"}};
// `name` must be in kAnchorTieOrders (choose_anchor checks with list_problem first).
inline policy::TieOrder anchor_tie_order(std::string_view name) {
  for (const AnchorTieOrder& t : kAnchorTieOrderTable)
    if (t.name == name) return t.order;
  GO_FAIL("anchor: unknown tie order '", name, "' (known: ", kAnchorTieOrders, ")");
}

// How a candidate's "fuse into producers" actions decode, by its fusion (Anchor::fusion): the
// pipelined candidates' (2) into main producers, the others' into every producer.
constexpr policy::FusionJoin anchor_join(int fusion) {
  return fusion == 2 ? policy::FusionJoin::main : policy::FusionJoin::all;
}

struct Anchor {
  std::string placement;  // one of kAnchorPlacements, or "<one> + fan-out spread", "<one> fitted to memory"
  bool ranked = false;    // upward-rank priority levels
  int fusion = 0;         // 0 none, 1 XLA-like, 2 every op into its main producer (policy::FusionJoin::main)
  policy::TieOrder ties = policy::TieOrder::program;  // order of the ops of one priority level
  bool relabelled = false;  // the devices relabelled for the links (`relabel`, go/baselines/relabel.hpp)
  // how `actions` decode (PolicyGraph::join, set by set_anchor)
  policy::FusionJoin join() const { return anchor_join(fusion); }
  Plan plan;              // decoded plan (what greedy decoding of a fresh policy gives)
  SimResult result;
  policy::Actions actions;  // rows in the PolicyGraph's order
  int candidates = 0;       // plans simulated to choose it
  // The best valid candidate of each other placement in the anchor's tie order (so that their actions
  // decode to these step times), best first: other starting points for fine-tuning's block moves.
  std::vector<std::pair<policy::Actions, double>> alternatives;
  // The tie orders not asked for are tried too, on the best four candidates, but only as answers:
  // the best of them when it is valid and faster than the anchor, for the methods that answer with
  // the best plan they simulated (best-heuristic, GO). It is never the anchor the policy reads nor a starting
  // point: fine-tuning from a latest-first anchor ends worse on Inception-v3, while that order alone
  // is the best plan on RNNLM (bench/README.md, "Latest-first order").
  struct Faster {
    Plan plan;
    SimResult result;
    std::string describe;
  };
  std::optional<Faster> faster;
  const Plan& answer() const { return faster ? faster->plan : plan; }
  const SimResult& answer_result() const { return faster ? faster->result : result; }
  std::string answer_describe() const { return faster ? faster->describe : describe(); }

  std::string describe() const {
    return describe_candidate(placement, ranked, fusion, ties) + (relabelled ? " + devices relabelled" : "");
  }
  static std::string describe_candidate(const std::string& placement, bool ranked, int fusion, policy::TieOrder ties) {
    std::string out = placement + (ranked ? " + rank priorities" : "") +
                      (fusion == 1 ? " + xla fusion" : fusion == 2 ? " + xla fusion into main producers" : "");
    for (const AnchorTieOrder& t : kAnchorTieOrderTable)
      if (t.order == ties) out += t.phrase;
    return out;
  }
};

// The ops whose output is read (a data edge) on two or more devices other than their own under
// `device`, in topological order.
inline std::vector<OpId> fan_out_ops(const OpGraph& g, std::span<const std::int32_t> device, int num_devices) {
  std::vector<OpId> out;
  std::vector<OpId> seen(static_cast<std::size_t>(num_devices), -1);  // last op that read there
  for (OpId v : g.topo_order()) {
    const std::int32_t own = device[static_cast<std::size_t>(v)];
    int others = 0;
    const auto succ = g.succ(v);
    const auto tensors = g.succ_tensors(v);
    for (std::size_t k = 0; k < succ.size() && others < 2; ++k) {
      const std::int32_t d = device[static_cast<std::size_t>(succ[k])];
      if (tensors[k] < 0 || d == own || seen[static_cast<std::size_t>(d)] == v) continue;
      seen[static_cast<std::size_t>(d)] = v;
      ++others;
    }
    if (others >= 2) out.push_back(v);
  }
  return out;
}

// The fan-out ops of `device` (fan_out_ops) and `device` with them moved round-robin over the
// devices in topological order, the k-th to device k mod num_devices, each with the ops of its
// colocation group; nullopt when there are none. The anchor's candidate also leaves them unfused:
// in a larger kernel each would reach its readers only when the whole kernel is done.
// Why: an op sends its output once to each device that reads it, on its device's copy channel in
// request order, so many such ops on one device (Transformer-XL's positional encodings, read by
// every layer on every device) queue hundreds of transfers ahead of the pipeline's first hand-offs,
// and nothing else moves them: a search changing a few ops at a time meets slower plans on the way
// (bench/README.md, "How far any plan could go").
struct FanOutSpread {
  std::vector<OpId> ops;
  std::vector<std::int32_t> device;
};
inline std::optional<FanOutSpread> spread_fan_out(const OpGraph& g, std::span<const std::int32_t> device, int num_devices) {
  std::vector<OpId> fan = fan_out_ops(g, device, num_devices);
  if (fan.empty()) return std::nullopt;
  std::vector<std::int32_t> out(device.begin(), device.end());
  std::unordered_map<std::int32_t, std::int32_t> colocated;  // colocation group -> its new device
  for (std::size_t k = 0; k < fan.size(); ++k) {
    const auto d = static_cast<std::int32_t>(k % static_cast<std::size_t>(num_devices));
    out[static_cast<std::size_t>(fan[k])] = d;
    if (const std::int32_t grp = g.op(fan[k]).colocation; grp >= 0) colocated.emplace(grp, d);
  }
  if (!colocated.empty())
    for (OpId v = 0; v < g.num_ops(); ++v)
      if (auto it = colocated.find(g.op(v).colocation); g.op(v).colocation >= 0 && it != colocated.end())
        out[static_cast<std::size_t>(v)] = it->second;
  return FanOutSpread{std::move(fan), std::move(out)};
}

// The largest sum, over one device, of its ops' times and of the transfers it sends (each output
// once per other device that reads it) under `device` (empty: every op on device 0).
inline double busiest_device_load(const OpGraph& g, const Simulator& sim, std::span<const std::int32_t> device) {
  const Cluster& c = sim.cluster();
  std::vector<double> load(static_cast<std::size_t>(c.num_devices()), 0.0);
  for (OpId v = 0; v < g.num_ops(); ++v) {
    const std::int32_t d = device.empty() ? 0 : device[static_cast<std::size_t>(v)];
    load[static_cast<std::size_t>(d)] += sim.op_cost(v, d);
  }
  if (!device.empty())
    for_each_transfer(g, device, [&](OpId v, std::int32_t e, TensorId t) {
      const std::int32_t d = device[static_cast<std::size_t>(v)];
      load[static_cast<std::size_t>(d)] += c.transfer_time(d, e, static_cast<double>(g.tensor(t).bytes));
    });
  return *std::max_element(load.begin(), load.end());
}

// Upward-rank priority levels in [0, levels): level = floor(levels * rank / max rank), capped.
inline std::vector<float> upward_rank_levels(const OpGraph& g, const Simulator& sim, int levels) {
  const auto n = static_cast<std::size_t>(g.num_ops());
  std::vector<double> rank(n, 0.0);
  const auto topo = g.topo_order();
  double top = 0;
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    double m = 0;
    for (OpId s : g.succ(*it)) m = std::max(m, rank[static_cast<std::size_t>(s)]);
    rank[static_cast<std::size_t>(*it)] = sim.op_cost(*it, 0) + m;
    top = std::max(top, rank[static_cast<std::size_t>(*it)]);
  }
  std::vector<float> out(n, 0.f);
  if (top <= 0 || levels <= 1) return out;
  for (std::size_t i = 0; i < n; ++i)
    out[i] = static_cast<float>(std::min(levels - 1, static_cast<int>(std::floor(levels * rank[i] / top))));
  return out;
}


// The anchor of graph g (with its policy graph pg and simulator sim) on cluster c.
// `which`: comma-separated subset of kAnchorPlacements; `tie_orders`: of kAnchorTieOrders, the first for
// every candidate, then the best four again in each other one; then those four in each order of
// kAnchorTieOrders not in `tie_orders`, as answers only (Anchor::faster). A heuristic that cannot handle
// the graph (or METIS in a build without it) is left out; default is used when nothing is left.
// `trace` (optional) records every candidate's simulation, in the candidates' order. `threads`: the
// candidates are simulated on that many threads (0: the hardware's); the result does not depend on it.
// `expert`: a go-plan file or dnn-partitioning expert split whose devices are the human placement
// (human_plan's PlaceOptions::expert_split, as the human method and annealing's starts take it).
inline Anchor choose_anchor(const OpGraph& g, const policy::PolicyGraph& pg, const Cluster& c, const Simulator& sim,
                            int priority_levels, bool colocate = true, const std::string& which = kAnchorPlacements,
                            std::uint64_t seed = 0, BestTrace* trace = nullptr,
                            const std::string& tie_orders = kAnchorTies, int threads = 0,
                            const std::string& expert = {}) {
  const std::string problem = list_problem(tie_orders, kAnchorTieOrders);
  GO_CHECK(problem.empty(), "anchor: the tie orders ", problem);
  const std::string unknown = list_problem(which, kAnchorPlacements);
  GO_CHECK(unknown.empty(), "anchor: the placements ", unknown);
  std::vector<policy::TieOrder> orders;
  for (const std::string& t : comma_items(tie_orders)) orders.push_back(anchor_tie_order(t));
  // The heuristic placements and the rank levels, computed side by side on `threads` threads, are
  // kept in this fixed order. A heuristic that throws go::Error (it cannot handle the graph) is
  // left out, except pipeline stages and an expert file's human placement (a file the user named
  // that does not fit the graph or cluster), whose errors are the anchor's.
  auto wanted = [&](const std::string& m) { return ("," + which + ",").find("," + m + ",") != std::string::npos; };
  std::vector<std::pair<std::string, std::function<Plan()>>> heuristics;
  auto add = [&](const char* name, std::function<Plan()> make) {
    if (wanted(name)) heuristics.emplace_back(name, std::move(make));
  };
  add("default", [&] { return default_plan(g); });
  if (c.num_devices() > 1) {
    add("human", [&] { return human_plan(g, c, expert, nullptr, &sim); });
    add("pipeline", [&] { return pipeline_plan(g, c, sim); });
    if (metis_available()) add("metis", [&] { return metis_plan(g, c, seed); });
    // Baechi's list schedulers: their placement only (priorities are the variants below)
    add("m-etf", [&] { return m_etf_plan(g, c); });
    add("m-sct", [&] { return m_sct_plan(g, c); });
    add("heft", [&] { return heft_plan(g, c); });
  }
  std::vector<std::optional<Plan>> made(heuristics.size());
  std::vector<float> ranks;
  // Handed out longest first, so that no long one starts last (80,588 ops, 8 devices: METIS 0.17-0.19
  // s, pipeline 0.11-0.15, the list schedulers 0.06-0.08, human 0.01-0.03, the rank levels 0.001).
  std::vector<std::size_t> start_order;
  for (const char* name : {"metis", "pipeline", "heft", "m-sct", "m-etf"})
    for (std::size_t j = 0; j < heuristics.size(); ++j)
      if (heuristics[j].first == name) start_order.push_back(j);
  for (std::size_t j = 0; j <= heuristics.size(); ++j)
    if (std::find(start_order.begin(), start_order.end(), j) == start_order.end()) start_order.push_back(j);
  parallel_items(0, heuristics.size() + 1, item_threads(threads, heuristics.size() + 1), "anchor",
                 [&](int, std::size_t i) {
                   const std::size_t j = start_order[i];
                   if (j == heuristics.size()) {
                     ranks = upward_rank_levels(g, sim, priority_levels);
                     return;
                   }
                   try {
                     made[j] = heuristics[j].second();
                   } catch (const Error&) {
                     if (heuristics[j].first == "pipeline" || (heuristics[j].first == "human" && !expert.empty())) throw;
                   }
                 });
  std::vector<std::pair<std::string, Plan>> placements;
  for (std::size_t j = 0; j < heuristics.size(); ++j)
    if (made[j]) placements.emplace_back(heuristics[j].first, std::move(*made[j]));
  if (placements.empty()) placements.emplace_back("default", default_plan(g));
  Anchor best;
  double best_key = std::numeric_limits<double>::infinity();
  bool best_valid = false;
  int evaluated = 0;
  struct Tried {
    bool valid;
    double key;
    std::size_t placement;
    int ranked, fused;
  };
  std::vector<Tried> tried;
  struct PlacementBest {
    bool set = false;
    double step_time = 0;
    policy::Actions actions;
  };
  // per placement, tie order and join (indexed by best_index)
  std::vector<std::array<PlacementBest, 10>> per_placement(placements.size());
  auto best_index = [](policy::TieOrder ties, int fusion) {
    return static_cast<std::size_t>(ties) * 2 + (anchor_join(fusion) == policy::FusionJoin::main ? 1 : 0);
  };
  struct Candidate {
    std::size_t pi;
    int ranked, fused;  // fused: as Anchor::fusion
    policy::TieOrder ties;
    Plan plan;  // decoded
    SimResult result;
    bool answer_only = false;  // may become Anchor::faster, never the anchor
    bool whole = false;        // result is of the whole step (simulated past an out-of-memory)
  };
  // A fused candidate is decoded from "fuse into producers" on every op: decode() then merges each
  // op with its producers in the XLA-like heuristic's order, so its groups are that heuristic's
  // (go/baselines/fusion.hpp; the two differ only at an op whose inputs are all control edges,
  // which decode tries to fuse with its first predecessor; no zoo or data/models graph has one),
  // and its actions decode back to it. Decoding the fusion is most of a candidate's cost on large
  // graphs, and neither the devices nor the groups depend on the priorities or the tie order: each
  // placement is decoded once, by its first candidate (`placed`, per placement and fusion), and
  // the others take its devices and groups.
  std::vector<std::array<std::optional<policy::Decision>, 3>> placed(placements.size());
  std::size_t spread_pi = std::numeric_limits<std::size_t>::max();  // the fan-out spread's placement, once made
  std::vector<OpId> spread_ops;
  policy::DecodeOptions dopt;
  dopt.colocate = colocate;
  auto decode_candidate = [&](Candidate& k) {
    std::optional<policy::Decision>& base = placed[k.pi][static_cast<std::size_t>(k.fused)];
    Plan p;
    const Plan& heuristic = placements[k.pi].second;
    p.device = heuristic.device.empty() ? std::vector<std::int32_t>(static_cast<std::size_t>(g.num_ops()), 0) : heuristic.device;
    if (k.ranked) p.priority = ranks;
    policy::Actions a = policy::actions_from_plan(g, pg, p, priority_levels);
    if (k.fused != 0) std::fill_n(a.fuse.data<std::int32_t>(), a.fuse.numel(), 1);
    if (k.pi == spread_pi)
      for (OpId v : spread_ops) a.fuse.data<std::int32_t>()[pg.row_of[static_cast<std::size_t>(v)]] = 0;
    policy::DecodeOptions o = dopt;
    o.ties = k.ties;
    o.join = anchor_join(k.fused);
    if (base) {
      k.plan = policy::to_plan(policy::decode(g, pg, a, c.num_devices(), o, &*base));
      return;
    }
    base = policy::decode(g, pg, a, c.num_devices(), o);
    k.plan = policy::to_plan(*base);
  };
  // A batch of candidates is decoded and simulated on `threads` threads, then taken in the
  // batch's order, so the anchor and the trace do not depend on the thread count. Candidates of one
  // placement and fusion are one item (the first decodes what the others take).
  // A simulation stops at the first out-of-memory: what an invalid candidate's whole step would
  // give (its memory excess, the key below) matters only where fewer than kOtherTieTries candidates
  // of the first order fit (the best of them are tried in the other orders) or none fits at all
  // (the least excess is the anchor); those batches simulate their invalid candidates again, whole.
  constexpr std::size_t kOtherTieTries = 4;
  auto fits = [](const SimResult& r) { return r.valid && std::isfinite(r.step_time); };
  std::vector<SimWorkspace> ws;  // per thread, made once for every batch
  auto workspaces = [&](std::size_t n) {  // threads for n items, with a workspace each
    const int nthreads = item_threads(threads, n);
    while (ws.size() < static_cast<std::size_t>(nthreads)) {
      ws.push_back(sim.make_workspace());
      ws.back().set_stop_on_oom(true);
    }
    return nthreads;
  };
  // `order` (all of the batch's indices, or empty for the batch's own order): the order in which
  // the batch is simulated and recorded in the trace. The choice among its candidates does not
  // depend on it: they are taken in the batch's order.
  auto run_batch = [&](std::vector<Candidate>& batch, std::vector<std::size_t> order) {
    if (order.empty())
      for (std::size_t j = 0; j < batch.size(); ++j) order.push_back(j);
    std::vector<std::vector<std::size_t>> items;
    for (std::size_t j : order) {
      auto same = [&](const std::vector<std::size_t>& it) {
        return batch[it[0]].pi == batch[j].pi && batch[it[0]].fused == batch[j].fused;
      };
      auto it = std::find_if(items.begin(), items.end(), same);
      if (it == items.end()) items.push_back({j});
      else it->push_back(j);
    }
    const int nthreads = workspaces(items.size());
    parallel_items(0, items.size(), nthreads, "anchor: a candidate failed", [&](int tid, std::size_t i) {
      for (std::size_t j : items[i]) {
        Candidate& k = batch[j];
        decode_candidate(k);
        k.result = sim.simulate(k.plan, ws[static_cast<std::size_t>(tid)]);
      }
    });
    std::size_t fit = 0;
    for (const Candidate& k : batch) fit += fits(k.result) ? 1 : 0;
    const bool first = evaluated == 0;
    if (fit < batch.size() && (first ? fit < kOtherTieTries : fit == 0 && !best_valid)) {
      std::vector<std::size_t> again;
      for (std::size_t j = 0; j < batch.size(); ++j)
        if (!fits(batch[j].result) && !batch[j].answer_only) again.push_back(j);
      const int nagain = workspaces(again.size());
      for (SimWorkspace& w : ws) w.set_stop_on_oom(false);
      parallel_items(0, again.size(), nagain, "anchor: a candidate failed",
                     [&](int tid, std::size_t i) {
                       Candidate& k = batch[again[i]];
                       k.result = sim.simulate(k.plan, ws[static_cast<std::size_t>(tid)]);
                       k.whole = true;
                     });
      for (SimWorkspace& w : ws) w.set_stop_on_oom(true);
    }
    if (trace)
      for (std::size_t j : order) trace->add(fits(batch[j].result), batch[j].result.step_time);
    for (Candidate& k : batch) {
      SimResult& r = k.result;
      ++evaluated;
      const bool valid = fits(r);
      if (k.answer_only) {
        constexpr double kNone = std::numeric_limits<double>::infinity();
        const double to_beat = best.faster ? best.faster->result.step_time : best_valid ? best_key : kNone;
        if (valid && r.step_time < to_beat)
          best.faster = Anchor::Faster{std::move(k.plan), std::move(r),
                                       Anchor::describe_candidate(placements[k.pi].first, k.ranked != 0, k.fused, k.ties)};
        k.plan = Plan();
        continue;
      }
      const double key = valid ? r.step_time : memory_excess(r, c);
      if (k.ties == orders[0]) tried.push_back({valid, key, k.pi, k.ranked, k.fused});
      PlacementBest& pb = per_placement[k.pi][best_index(k.ties, k.fused)];
      if (valid && (!pb.set || r.step_time < pb.step_time))
        pb = {true, r.step_time, policy::actions_from_plan(g, pg, k.plan, priority_levels)};
      if ((valid && !best_valid) || (valid == best_valid && key < best_key)) {
        best_valid = valid;
        best_key = key;
        best.placement = placements[k.pi].first;
        best.ranked = k.ranked != 0;
        best.fusion = k.fused;
        best.ties = k.ties;
        // a valid best is also the best of its placement and order, whose actions were just made
        best.actions = valid ? pb.actions : policy::actions_from_plan(g, pg, k.plan, priority_levels);
        best.plan = std::move(k.plan);
        best.result = r;  // a copy (per-device vectors): `fit` below may read the candidate's whole result
      }
      k.plan = Plan();  // memory: only the best plan is kept
    }
  };
  std::vector<Candidate> batch;
  for (std::size_t pi = 0; pi < placements.size(); ++pi)
    for (int ranked = 0; ranked < 2; ++ranked)
      for (int fused = 0; fused < 2; ++fused) batch.push_back({pi, ranked, fused, orders[0], {}, {}});
  {
    // Simulated likeliest best first, so that a run's best-so-far curve (its trace) falls early:
    // fused before unfused (the anchor is fused on every row of the paper table), rank priorities
    // before none (on 9 of its 14), then the placements by their busiest device's op and send
    // time, least first. Only the trace's order changes: the anchor is the same.
    std::vector<double> load(placements.size());
    for (std::size_t pi = 0; pi < placements.size(); ++pi)
      load[pi] = busiest_device_load(g, sim, placements[pi].second.device);
    std::vector<std::size_t> order(batch.size());
    for (std::size_t j = 0; j < order.size(); ++j) order[j] = j;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      const Candidate &x = batch[a], &y = batch[b];
      if (x.fused != y.fused) return x.fused > y.fused;
      if (x.ranked != y.ranked) return x.ranked > y.ranked;
      return load[x.pi] < load[y.pi];
    });
    const std::vector<std::size_t> simulated = order;
    run_batch(batch, std::move(order));
    // Candidates that would be fast but run out of memory (`fit`): each placement's with rank
    // priorities and XLA-like fusion (its likeliest best variant) that overflowed, where its busiest
    // device's op and send time is below the best step time that fits, simulated whole; the fastest
    // of them, where faster than that, fitted to memory by moving op sets off the devices that
    // overflow (go/baselines/memory_fit.hpp), becomes a placement of its own, decoded and simulated
    // as the others are. On gnmt8 at 121 steps (8 V100s) every human candidate overflows device 0;
    // human fitted to memory is 30% below any plan that fits (2,149 -> 1,499 ms), 44% relabelled.
    if (wanted("fit") && c.num_devices() > 1) {
      std::vector<Candidate> over;
      for (std::size_t j : simulated)
        if (batch[j].result.status == SimStatus::out_of_memory && batch[j].ranked && batch[j].fused &&
            (!best_valid || load[batch[j].pi] < best_key))
          over.push_back({batch[j].pi, batch[j].ranked, batch[j].fused, batch[j].ties, {}, batch[j].result, false,
                          batch[j].whole});
      auto simulate_all = [&](std::span<const Plan> plans, std::span<SimResult> out) {
        const int n = workspaces(plans.size());
        for (SimWorkspace& w : ws) w.set_stop_on_oom(false);  // every device's peak
        parallel_items(0, plans.size(), n, "anchor: fitting a candidate to memory", [&](int tid, std::size_t i) {
          out[i] = sim.simulate(plans[i], ws[static_cast<std::size_t>(tid)]);
        });
        for (SimWorkspace& w : ws) w.set_stop_on_oom(true);
        evaluated += static_cast<int>(plans.size());
        if (trace)  // not answers: a fitted placement is decoded and simulated as a candidate below
          for (const SimResult& r : out) trace->add(fits(r), r.step_time, false);
      };
      std::vector<Plan> plans(over.size());
      std::vector<SimResult> whole(over.size());
      // the first batch's invalid candidates were simulated whole already where too few of them fit
      // (run_batch): then all of these were, and none is simulated again
      bool all_whole = true;
      for (std::size_t i = 0; i < over.size(); ++i) {
        decode_candidate(over[i]);  // cheap: each placement's devices and groups are decoded already
        plans[i] = std::move(over[i].plan);
        whole[i] = std::move(over[i].result);
        all_whole = all_whole && over[i].whole;
      }
      if (!plans.empty() && !all_whole) simulate_all(plans, whole);
      std::size_t pick = over.size();
      for (std::size_t i = 0; i < over.size(); ++i)
        if (whole[i].status == SimStatus::out_of_memory && (!best_valid || whole[i].step_time < best_key) &&
            (pick == over.size() || whole[i].step_time < whole[pick].step_time))
          pick = i;
      if (pick < over.size()) {
        MemoryFitOptions mo;
        if (best_valid) mo.worth_below = best_key;
        const Candidate& k = over[pick];
        MemoryFit fit = fit_memory(g, c, std::move(plans[pick]), std::move(whole[pick]), simulate_all, mo);
        if (fit.fits()) {
          const std::size_t pi = placements.size();
          Plan p;
          p.device = std::move(fit.plan.device);
          placements.emplace_back(placements[k.pi].first + " fitted to memory", std::move(p));
          per_placement.emplace_back();
          placed.emplace_back();
          std::vector<Candidate> one;
          one.push_back({pi, k.ranked, k.fused, k.ties, {}, {}});
          run_batch(one, {});
        }
      }
    }
  }
  // Program order is the better tie order on most graphs (wide ones by far), first-ready on some
  // (gnmt8 at 121 steps, METIS: 2,512 vs 2,834 ms) and latest-first on others (RNNLM, Inception-v3,
  // WaveNet 4: 0.5-2.4%): the best few candidates are also tried in each other order asked for.
  std::stable_sort(tried.begin(), tried.end(), [](const Tried& a, const Tried& b) {
    return a.valid != b.valid ? a.valid : a.key < b.key;
  });
  auto try_best_in = [&](policy::TieOrder order, bool answer_only) {
    for (std::size_t i = 0; i < std::min(kOtherTieTries, tried.size()); ++i)
      batch.push_back({tried[i].placement, tried[i].ranked, tried[i].fused, order, {}, {}, answer_only});
  };
  batch.clear();
  for (std::size_t o = 1; o < orders.size(); ++o) try_best_in(orders[o], false);
  run_batch(batch, {});
  // The best candidate with its fan-out ops spread (the anchor where faster), simulated side by
  // side with the answers-only tries and before them in the trace. Neither it nor the plan it
  // spreads is an alternative of the other: they differ in a few ops.
  batch.clear();
  const std::string base = best.placement;
  if (best_valid && c.num_devices() > 2 && wanted("spread"))
    if (auto spread = spread_fan_out(g, best.plan.device, c.num_devices())) {
      Plan p;
      p.device = std::move(spread->device);
      spread_ops = std::move(spread->ops);
      spread_pi = placements.size();
      placements.emplace_back(best.placement + " + fan-out spread", std::move(p));
      per_placement.emplace_back();
      placed.emplace_back();
      batch.push_back({spread_pi, best.ranked ? 1 : 0, best.fusion, best.ties, {}, {}, false});
    }
  // The two best placements pipelined (each decoded once), candidates for the anchor: fine-tuning
  // from the pipelined anchor improves it (WaveNet 2 on 2 GPUs: 43.37 -> 42.22 ms; bench/README.md,
  // "Pipelined plans").
  if (wanted("depth-first") && c.num_devices() > 1) {
    std::vector<std::size_t> chosen;
    for (const Tried& t : tried)
      if (t.valid && chosen.size() < 2 && std::find(chosen.begin(), chosen.end(), t.placement) == chosen.end())
        chosen.push_back(t.placement);
    for (std::size_t pi : chosen) batch.push_back({pi, 0, 2, policy::TieOrder::depth_first, {}, {}, false});
    // The fan-out spread candidate pipelined too, with its own fusion: Transformer-XL's segments
    // are streams, and with the positional encodings spread each device can start on the first
    // segment early (8 V100s: 123.78 -> 106.81 ms; into main producers instead: 107.47).
    if (spread_pi < placements.size())
      batch.push_back({spread_pi, 0, best.fusion, policy::TieOrder::depth_first, {}, {}, false});
  }
  // (Depth-first order pays with no priority levels, as the pipelined candidates have it; within
  // rank levels it is not faster on the paper table's rows, so it is not tried here.)
  for (const AnchorTieOrder& t : kAnchorTieOrderTable)
    if (t.order != policy::TieOrder::depth_first && std::find(orders.begin(), orders.end(), t.order) == orders.end())
      try_best_in(t.order, true);
  run_batch(batch, {});
  // The anchor, and the answer of another tie order where there is one, with the devices relabelled
  // for the cluster's links (go/baselines/relabel.hpp: the least transfer time on idle links), each
  // kept when faster: on the DGX-1 mesh human's layer i on device i mod 8 hands off over PCIe
  // (gnmt8, 8 V100s: 547.76 -> 413.87 ms). Devices only, so the actions decode to the relabelled
  // plan (decoding reads whether two rows share a device, not which device it is).
  if (best_valid && wanted("relabel")) {
    auto relabel = [&](const Plan& p) -> std::optional<std::pair<Plan, std::vector<std::int32_t>>> {
      std::vector<std::int32_t> to = relabel_for_transfers(g, c, p.device);
      if (std::is_sorted(to.begin(), to.end())) return std::nullopt;  // the identity
      Plan q = p;
      for (std::int32_t& d : q.device) d = to[static_cast<std::size_t>(d)];
      return std::pair{std::move(q), std::move(to)};
    };
    // both simulated side by side, then taken (and recorded) in this order
    auto q = relabel(best.plan);
    auto qf = best.faster ? relabel(best.faster->plan) : std::nullopt;
    const Plan* to_run[2] = {q ? &q->first : nullptr, qf ? &qf->first : nullptr};
    SimResult ran[2];
    const int nrun = workspaces(2);
    parallel_items(0, 2, nrun, "anchor: a relabelled plan failed", [&](int tid, std::size_t i) {
      if (to_run[i]) ran[i] = sim.simulate(*to_run[i], ws[static_cast<std::size_t>(tid)]);
    });
    for (int i = 0; i < 2; ++i)
      if (to_run[i]) {
        ++evaluated;
        if (trace) trace->add(fits(ran[i]), ran[i].step_time);
      }
    if (q) {
      SimResult& r = ran[0];
      if (r.valid && std::isfinite(r.step_time) && r.step_time < best.result.step_time) {
        best.actions = best.actions.clone();
        for (std::int64_t i = 0; i < best.actions.device.numel(); ++i) {
          std::int32_t& d = best.actions.device.data<std::int32_t>()[i];
          d = q->second[static_cast<std::size_t>(d)];
        }
        best.plan = std::move(q->first);
        best.result = std::move(r);
        best.relabelled = true;
      }
    }
    if (qf) {
      SimResult& r = ran[1];
      if (r.valid && std::isfinite(r.step_time) && r.step_time < best.faster->result.step_time)
        best.faster = Anchor::Faster{std::move(qf->first), std::move(r), best.faster->describe + " + devices relabelled"};
    }
    if (best.faster && !(best.faster->result.step_time < best.result.step_time)) best.faster.reset();
  }
  best.candidates = evaluated;
  const std::size_t order = best_index(best.ties, best.fusion);
  std::vector<std::size_t> others;
  for (std::size_t pi = 0; pi < placements.size(); ++pi)
    if (per_placement[pi][order].set && placements[pi].first != base && pi != spread_pi) others.push_back(pi);
  std::stable_sort(others.begin(), others.end(), [&](std::size_t a, std::size_t b) {
    return per_placement[a][order].step_time < per_placement[b][order].step_time;
  });
  for (std::size_t pi : others)
    best.alternatives.emplace_back(per_placement[pi][order].actions, per_placement[pi][order].step_time);
  return best;
}

// Computes the anchor and stores its actions in pg.
inline Anchor set_anchor(const OpGraph& g, policy::PolicyGraph& pg, const Cluster& c, const Simulator& sim,
                         int priority_levels, bool colocate = true, const std::string& which = kAnchorPlacements,
                         std::uint64_t seed = 0, BestTrace* trace = nullptr,
                         const std::string& tie_orders = kAnchorTies, int threads = 0,
                         const std::string& expert = {}) {
  Anchor a = choose_anchor(g, pg, c, sim, priority_levels, colocate, which, seed, trace, tie_orders, threads, expert);
  pg.set_anchor(a.actions.device.clone(), a.actions.priority.clone(), a.actions.fuse.clone());
  pg.ties = a.ties;
  pg.join = a.join();
  return a;
}

}  // namespace go::rl
