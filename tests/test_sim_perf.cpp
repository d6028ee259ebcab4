// Simulator fast paths: the priority ready queues order by an integer key built from the float
// priority (negative priorities, ties, -0 == +0 must behave as float comparison), and the
// workspace's fixed-size transfer storage reports exactly the transfers of the last simulation.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "go/sim/sim.hpp"

namespace {

go::Cluster one_cluster(int n) {
  go::DeviceSpec s;
  s.name = "test";
  s.peak_flops = 1e12;
  s.mem_bandwidth = 1e9;
  s.bandwidth_efficiency = 1.0;
  s.launch_overhead = 1e-5;
  s.memory_bytes = 1LL << 40;
  s.compute_efficiency.fill(1.0);
  return go::Cluster::uniform("test", s, n, 1e9, 1e-4);
}

// n independent ops with measured time 1 ms each (all ready at time 0).
go::OpGraph independent_ops(int n) {
  go::GraphBuilder b;
  for (int i = 0; i < n; ++i) {
    go::OpSpec s;
    s.name = "op" + std::to_string(i);
    s.kind = go::OpKind::other;
    s.time = 1e-3;
    go::TensorSpec t;
    t.shape_known = false;
    t.bytes = 16;
    s.outputs.push_back(t);
    b.add_op(std::move(s));
  }
  return b.build();
}

}  // namespace

TEST_CASE("priority queue order: larger first, ties (and -0 vs +0) in ready order", "[sim][perf]") {
  const int n = 300;
  const go::OpGraph g = independent_ops(n);
  go::Simulator sim(g, one_cluster(1));
  go::SimWorkspace ws = sim.make_workspace();
  std::mt19937 rng(7);
  const float pool[] = {-0.0f, 0.0f, -1.0f, 1.0f, -3.5f, 2.0f, 1e30f, -1e30f, 1e-40f, -1e-40f, 0.5f, -0.5f};
  for (int rep = 0; rep < 20; ++rep) {
    go::Plan p = go::Plan::single_device(n, 0);
    p.priority.resize(static_cast<std::size_t>(n));
    for (auto& x : p.priority) x = pool[rng() % (sizeof pool / sizeof pool[0])];
    const go::SimResult& r = sim.simulate(p, ws);
    REQUIRE(r.valid);
    // expected: units ready at time 0 are queued in topological order; the highest priority runs
    // first, equal priorities (float ==) in queue order
    std::vector<go::OpId> order(g.topo_order().begin(), g.topo_order().end());
    std::stable_sort(order.begin(), order.end(), [&](go::OpId a, go::OpId b) {
      return p.priority[static_cast<std::size_t>(a)] > p.priority[static_cast<std::size_t>(b)];
    });
    for (int k = 0; k < n; ++k) {
      INFO("rep " << rep << " rank " << k << " op " << order[static_cast<std::size_t>(k)]);
      CHECK(ws.start_time(order[static_cast<std::size_t>(k)]) == Approx(k * 1e-3).margin(1e-12));
    }
  }
}

TEST_CASE("transfers() holds exactly the last simulation's transfers", "[sim][perf]") {
  // a chain a -> b -> c alternating devices: two transfers; then a one-device plan: none
  go::GraphBuilder b;
  go::OpId prev = -1;
  for (int i = 0; i < 3; ++i) {
    go::OpSpec s;
    s.name = "op" + std::to_string(i);
    s.kind = go::OpKind::other;
    s.time = 1e-3;
    go::TensorSpec t;
    t.shape_known = false;
    t.bytes = 1000;
    s.outputs.push_back(t);
    if (prev >= 0) s.inputs.push_back(go::TensorRef{prev, 0});
    prev = b.add_op(std::move(s));
  }
  const go::OpGraph g = b.build();
  go::Simulator sim(g, one_cluster(2));
  go::SimWorkspace ws = sim.make_workspace();
  go::Plan split;
  split.device = {0, 1, 0};
  const go::SimResult& r = sim.simulate(split, ws);
  REQUIRE(r.valid);
  CHECK(r.transfers == 2);
  REQUIRE(ws.transfers().size() == 2);
  CHECK(ws.transfers()[0].src == 0);
  CHECK(ws.transfers()[0].dst == 1);
  CHECK(ws.transfers()[1].src == 1);
  CHECK(ws.transfers()[1].dst == 0);
  CHECK(ws.transfers()[1].start >= ws.transfers()[0].end);
  const go::SimResult& r1 = sim.simulate(go::Plan::single_device(3, 0), ws);
  CHECK(r1.transfers == 0);
  CHECK(ws.transfers().empty());
}
