// The `exact` MILP placer (go/baselines/exact.hpp) on graphs whose optimum is known by hand: the
// objective, the placement, the proof, and that the plan simulates to the objective, transfers
// queueing on the devices' channels included. Without CBC in the build every test checks the error and passes with a SKIP warning.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "go/baselines/exact.hpp"
#include "go/baselines/place.hpp"
#include "go/sim/sim.hpp"
#include "tiny_graph.hpp"

namespace test_exact {
using Catch::Matchers::Contains;

namespace {

using go_test::test_cluster;
using go_test::test_device;
using go_test::Tiny;

// test_cluster's links: a transfer of b bytes takes 0.1 ms + b ns.
double transfer_ms(std::int64_t bytes) { return 0.1 + static_cast<double>(bytes) * 1e-6; }

// The plan's simulated step time, ms.
double simulated_ms(const go::OpGraph& g, const go::Cluster& c, const go::Plan& p) {
  const go::SimResult r = go::Simulator(g, c).simulate(p);
  REQUIRE(r.valid);
  return r.step_time * 1e3;
}

#define GO_CBC_OR_SKIP()                                                                                  \
  do {                                                                                                    \
    if (!go::exact_available()) {                                                                         \
      Tiny t_;                                                                                            \
      t_.op("a", 1, 8);                                                                                   \
      CHECK_THROWS_WITH(go::exact_solve(t_.build(), test_cluster(2)), Contains("apt-get install coinor-libcbc-dev")); \
      WARN("SKIP (built without CBC): the exact method is not tested");                                   \
      return;                                                                                             \
    }                                                                                                     \
  } while (0)

// s -> {a, b} -> j, 1 + 4 + 4 + 1 ms, every tensor `bytes`: on one device 10 ms; with a and b apart
// the best is s, a on one device and b, j on the other: 6 ms + one transfer (s -> b and a -> j
// overlap with the other branch), so splitting pays while a transfer is under 4 ms.
go::OpGraph fork_join(std::int64_t bytes) {
  Tiny t;
  const auto s = t.op("s", 1, bytes);
  const auto a = t.op("a", 4, bytes, {s});
  const auto b = t.op("b", 4, bytes, {s});
  t.op("j", 1, bytes, {a, b});
  return t.build();
}

}  // namespace

TEST_CASE("exact: empty and one-op graphs", "[exact]") {
  GO_CBC_OR_SKIP();
  const go::ExactSolution e = go::exact_solve(go::GraphBuilder().build(), test_cluster(2));
  CHECK(e.optimal);
  CHECK(e.objective == 0);
  CHECK(e.plan.device.empty());
  Tiny t;
  t.op("a", 3, 8);
  const go::OpGraph g = t.build();
  const go::ExactSolution s = go::exact_solve(g, test_cluster(2));
  CHECK(s.optimal);
  CHECK(s.objective * 1e3 == Approx(3.0));
  CHECK(simulated_ms(g, test_cluster(2), s.plan) == Approx(3.0));
}

TEST_CASE("exact: two independent ops go to two devices", "[exact]") {
  GO_CBC_OR_SKIP();
  Tiny t;
  t.op("a", 2, 8);
  t.op("b", 2, 8);
  const go::OpGraph g = t.build();
  const go::Cluster c = test_cluster(2);
  const go::ExactSolution e = go::exact_solve(g, c);
  CHECK(e.optimal);
  CHECK(e.objective * 1e3 == Approx(2.0));
  CHECK(e.plan.device[0] != e.plan.device[1]);
  CHECK(simulated_ms(g, c, e.plan) == Approx(2.0));
}

TEST_CASE("exact: a chain stays on one device", "[exact]") {
  GO_CBC_OR_SKIP();
  Tiny t;
  const auto a = t.op("a", 1, 1 << 20);
  const auto b = t.op("b", 2, 1 << 20, {a});
  t.op("c", 3, 1 << 20, {b});
  const go::OpGraph g = t.build();
  const go::Cluster c = test_cluster(4);
  const go::ExactSolution e = go::exact_solve(g, c);
  CHECK(e.optimal);
  CHECK(e.objective * 1e3 == Approx(6.0));
  CHECK(e.plan.device[0] == e.plan.device[1]);
  CHECK(e.plan.device[1] == e.plan.device[2]);
  CHECK(simulated_ms(g, c, e.plan) == Approx(6.0));
}

TEST_CASE("exact: fork-join splits only when the transfer is worth it", "[exact]") {
  GO_CBC_OR_SKIP();
  const go::Cluster c = test_cluster(2);
  {  // 1 MB: 1.1 ms transfers, 6 + 1.1 < 10
    const go::OpGraph g = fork_join(1'000'000);
    const go::ExactSolution e = go::exact_solve(g, c);
    CHECK(e.optimal);
    CHECK(e.used_cbc);
    CHECK(e.objective * 1e3 == Approx(6.0 + transfer_ms(1'000'000)));
    CHECK(e.plan.device[1] != e.plan.device[2]);                  // a and b apart
    CHECK(e.plan.device[3] != e.plan.device[0]);                  // j with the branch s does not run
    CHECK(simulated_ms(g, c, e.plan) == Approx(e.objective * 1e3));  // the two transfers do not overlap
  }
  {  // 5 MB: 5.1 ms transfers, 6 + 5.1 > 10: one device
    const go::OpGraph g = fork_join(5'000'000);
    const go::ExactSolution e = go::exact_solve(g, c);
    CHECK(e.optimal);
    CHECK(e.used_cbc);  // the lower bound (6 ms) does not prove 10 ms: CBC does
    CHECK(e.objective * 1e3 == Approx(10.0));
    for (int v = 1; v < 4; ++v) CHECK(e.plan.device[static_cast<std::size_t>(v)] == e.plan.device[0]);
    CHECK(simulated_ms(g, c, e.plan) == Approx(10.0));
  }
}

TEST_CASE("exact: links that differ per device pair", "[exact]") {
  GO_CBC_OR_SKIP();
  // 4 devices in pairs: 10 GB/s, 10 us inside a pair, 0.1 GB/s, 1 ms across; 1 MB tensors take
  // 0.11 ms inside a pair and 11 ms across, so the fork-join splits inside a pair
  const go::Cluster c = go::Cluster::grouped("pairs", test_device(1LL << 40), 4, 2, 1e10, 1e-5, 1e8, 1e-3);
  const go::OpGraph g = fork_join(1'000'000);
  const go::ExactSolution e = go::exact_solve(g, c);
  CHECK(e.optimal);
  CHECK(e.objective * 1e3 == Approx(6.11));
  CHECK(e.plan.device[1] != e.plan.device[2]);
  CHECK(e.plan.device[1] / 2 == e.plan.device[2] / 2);
  CHECK(simulated_ms(g, c, e.plan) == Approx(6.11));
}

TEST_CASE("exact: memory capacity forces a split", "[exact]") {
  GO_CBC_OR_SKIP();
  // a -> b, 1 ms each, 600 bytes of parameters each on devices of 1000 bytes: together they need
  // 1216 bytes, so b runs on the other device after an 8-byte transfer
  Tiny t;
  const auto a = t.op("a", 1, 8, {}, 600);
  t.op("b", 1, 8, {a}, 600);
  const go::OpGraph g = t.build();
  const go::Cluster c = test_cluster(2, 1000);
  const go::ExactSolution e = go::exact_solve(g, c);
  CHECK(e.optimal);
  CHECK(e.plan.device[0] != e.plan.device[1]);
  CHECK(e.objective * 1e3 == Approx(2.0 + transfer_ms(8)));
  CHECK(simulated_ms(g, c, e.plan) == Approx(2.0 + transfer_ms(8)));
  CHECK(e.memory_modelled);
  CHECK_THAT(e.note, Contains("runs out of memory"));
  CHECK(e.lower_bound * 1e3 == Approx(2.0));  // the memory-free optimum
  // without the cap they share a device
  const go::ExactSolution f = go::exact_solve(g, test_cluster(2));
  CHECK(f.plan.device[0] == f.plan.device[1]);
  CHECK(f.objective * 1e3 == Approx(2.0));
  // an op larger than every device
  Tiny big;
  big.op("w", 1, 8, {}, 5000);
  CHECK_THROWS_WITH(go::exact_solve(big.build(), c), Contains("exact: no placement fits"));
}

TEST_CASE("exact: errors and the place() method", "[exact]") {
  GO_CBC_OR_SKIP();
  Tiny t;
  for (int i = 0; i < go::kExactMaxOps + 1; ++i) t.op("op" + std::to_string(i), 1, 8);
  CHECK_THROWS_WITH(go::exact_solve(t.build(), test_cluster(2)), Contains("201 ops") && Contains("at most 200 ops"));
  // through place(): the note carries the proof, the MILP objective and the simulated step time
  const go::OpGraph g = fork_join(1'000'000);
  go::PlaceOptions o;
  o.time_limit = 10;
  const go::PlaceResult r = go::place("exact", g, test_cluster(2), o);
  CHECK(r.valid);
  CHECK_THAT(r.note, Contains("optimal (proven)") && Contains("MILP makespan 7.1 ms") && Contains("lower bound 7.1 ms") &&
                          Contains("simulated 7.1 ms"));
  CHECK(r.step_time * 1e3 == Approx(6.0 + transfer_ms(1'000'000)));
  // every heuristic is at least the optimum here (the model is exact on this graph)
  for (const char* m : {"default", "heft", "m-etf", "m-sct", "m-topo"}) CHECK(go::place(m, g, test_cluster(2)).step_time >= r.step_time * (1 - 1e-9));
}

TEST_CASE("exact: the MILP optimum bounds every unfused plan's simulated step time", "[exact]") {
  GO_CBC_OR_SKIP();
  // s feeds four 3 ms branches with 2 MB each (2.1 ms transfers, which queue on s's send channel
  // in the simulator but not in the model), joined by j
  Tiny t;
  const auto s = t.op("s", 1, 2'000'000);
  std::vector<go::OpId> mid;
  for (int i = 0; i < 4; ++i) mid.push_back(t.op("m" + std::to_string(i), 3, 8, {s}));
  t.op("j", 1, 8, mid);
  const go::OpGraph g = t.build();
  const go::Cluster c = test_cluster(4);
  const go::ExactSolution e = go::exact_solve(g, c);
  CHECK(e.optimal);
  CHECK_FALSE(e.memory_modelled);
  const double sim = simulated_ms(g, c, e.plan);
  CHECK(e.lower_bound == e.objective);
  CHECK(e.converged);
  CHECK(sim == Approx(e.objective * 1e3));
  for (const char* m : {"default", "human", "heft", "m-topo", "m-etf", "m-sct", "random"}) {
    const go::PlaceResult r = go::place(m, g, c);
    INFO(m);
    CHECK(r.step_time >= e.objective * (1 - 1e-9));
  }
}

TEST_CASE("exact: sends from one device queue on its channel", "[exact]") {
  GO_CBC_OR_SKIP();
  // s (1 ms, 1 MB out) feeds three 4 ms branches on 3 devices. Without contention: 1 + 1.1 + 4 =
  // 6.1 ms. The two remote branches' copies leave s's send channel one after the other (1 -> 2.1 ->
  // 3.2), so the last branch ends at 7.2; two branches with s end at 9, all on one device at 13.
  Tiny t;
  const auto s = t.op("s", 1, 1'000'000);
  for (int i = 0; i < 3; ++i) t.op("m" + std::to_string(i), 4, 8, {s});
  const go::OpGraph g = t.build();
  const go::Cluster c = test_cluster(3);
  const go::ExactSolution e = go::exact_solve(g, c);
  CHECK(e.used_cbc);
  CHECK(e.optimal);
  CHECK(e.converged);
  CHECK(e.objective * 1e3 == Approx(5.0 + 2 * transfer_ms(1'000'000)));
  CHECK(e.lower_bound * 1e3 == Approx(7.2));  // the contention rows raise the bound too
  CHECK(e.channel_pairs >= 1);
  CHECK(e.rounds >= 2);  // the first plan (6.1 ms in the model) queues in the simulator
  for (int i = 1; i < 4; ++i)
    for (int j = i + 1; j < 4; ++j) CHECK(e.plan.device[static_cast<std::size_t>(i)] != e.plan.device[static_cast<std::size_t>(j)]);
  CHECK(simulated_ms(g, c, e.plan) == Approx(7.2));
  CHECK(e.simulated * 1e3 == Approx(7.2));
  CHECK_THAT(e.note, Contains("optimal (proven)") && Contains("converged"));
}

TEST_CASE("exact: receives on one device queue on its channel, per the channel model", "[exact]") {
  GO_CBC_OR_SKIP();
  // three independent 4 ms producers (1 MB each) joined by j (1 ms) on 3 devices. Duplex: the two
  // copies into j's device queue on its receive channel (4 -> 5.1 -> 6.2), j ends at 7.2; two
  // producers on one device: 8 + 1 = 9. Sender channels only: the copies overlap, 4 + 1.1 + 1 = 6.1.
  Tiny t;
  std::vector<go::OpId> p;
  for (int i = 0; i < 3; ++i) p.push_back(t.op("p" + std::to_string(i), 4, 1'000'000));
  t.op("j", 1, 8, p);
  const go::OpGraph g = t.build();
  go::Cluster c = test_cluster(3);
  REQUIRE(c.channels == go::ChannelModel::duplex);
  const go::ExactSolution e = go::exact_solve(g, c);
  CHECK(e.optimal);
  CHECK(e.converged);
  CHECK(e.objective * 1e3 == Approx(5.0 + 2 * transfer_ms(1'000'000)));
  CHECK(simulated_ms(g, c, e.plan) == Approx(7.2));
  c.channels = go::ChannelModel::sender;
  const go::ExactSolution f = go::exact_solve(g, c);
  CHECK(f.optimal);
  CHECK(f.converged);
  CHECK(f.objective * 1e3 == Approx(5.0 + transfer_ms(1'000'000)));
  CHECK(simulated_ms(g, c, f.plan) == Approx(6.1));
  // Duplex on 4 devices: still 7.2 (j alone on the fourth device waits for three copies, 8.3). The
  // first solve (6.1 ms, no channel rows) queues in the simulator; the two tensors that met then get
  // rows for every two destinations (16 job pairs), so the next solve cannot meet the same queue on
  // other devices. It can with another two tensors (j beside another producer): one round each.
  const go::Cluster c4 = test_cluster(4);
  const go::ExactSolution h = go::exact_solve(g, c4);
  CHECK(h.optimal);
  CHECK(h.converged);
  CHECK(h.objective * 1e3 == Approx(5.0 + 2 * transfer_ms(1'000'000)));
  CHECK(h.simulated * 1e3 == Approx(7.2));
  CHECK(simulated_ms(g, c4, h.plan) == Approx(7.2));
  CHECK(h.channel_pairs % 16 == 0);
  CHECK(h.channel_pairs <= 3 * 16);
  CHECK(h.rounds <= 4);
}

TEST_CASE("exact: two tensors of one producer to one device leave in tensor order", "[exact]") {
  GO_CBC_OR_SKIP();
  // s (1 ms) writes t0 and t1 (1 MB each) and is colocated with z (5 ms): that device is busy to 6.
  // b (1 ms) reads t0, a (3 ms) reads t1. On the other device t0 arrives at 2.1 and t1, sent after
  // it, at 3.2: b 2.1-3.1, a 3.2-6.2. (Without the queue a would start at 2.1 and end by 6.1; b
  // with s ends at 7, a with s at 9, all with s at 10.) So 6.2.
  go::GraphBuilder gb;
  auto spec = [](const char* name, double ms, int outputs, std::vector<go::TensorRef> in, std::int32_t coloc) {
    go::OpSpec o;
    o.name = name;
    o.kind = go::OpKind::matmul;
    o.time = ms * 1e-3;
    o.colocation = coloc;
    for (int i = 0; i < outputs; ++i) {
      go::TensorSpec t;
      t.shape_known = false;
      t.bytes = 1'000'000;
      o.outputs.push_back(t);
    }
    o.inputs = std::move(in);
    return o;
  };
  const go::OpId s = gb.add_op(spec("s", 1, 2, {}, 0));
  gb.add_op(spec("z", 5, 1, {}, 0));
  gb.add_op(spec("b", 1, 1, {go::TensorRef{s, 0}}, -1));
  gb.add_op(spec("a", 3, 1, {go::TensorRef{s, 1}}, -1));
  const go::OpGraph g = gb.build();
  const go::Cluster c = test_cluster(2);
  const go::ExactSolution e = go::exact_solve(g, c);
  CHECK(e.used_cbc);
  CHECK(e.optimal);
  CHECK(e.converged);
  CHECK(e.objective * 1e3 == Approx(1.0 + 2 * transfer_ms(1'000'000) + 3.0));
  CHECK(e.plan.device[2] == e.plan.device[3]);
  CHECK(e.plan.device[2] != e.plan.device[0]);
  CHECK(simulated_ms(g, c, e.plan) == Approx(6.2));
}

}  // namespace test_exact
