// Simulator fast paths: the priority ready queues order by an integer key built from the float
// priority (negative priorities, ties, -0 == +0 must behave as float comparison), and the
// workspace's fixed-size transfer storage reports exactly the transfers of the last simulation.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "go/sim/sim.hpp"
#include "sim_same.hpp"

namespace test_sim_perf {
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

TEST_CASE("a reused workspace gives a fresh workspace's results across fused and unfused plans", "[sim][perf]") {
  // The fused path keeps per-group state in the workspace between simulations (undone at the next
  // fused plan): alternate valid, invalid and unfused plans on one workspace and compare each result
  // with a fresh workspace's.
  std::mt19937 rng(11);
  go::GraphBuilder b;
  const int n = 80;
  for (int i = 0; i < n; ++i) {
    go::OpSpec s;
    s.name = "op" + std::to_string(i);
    // elementwise ops fuse by the fusion rules; op 5 (other) never does, so a run holding it is
    // illegal and the workspace must recover from that too
    s.kind = i == 5 ? go::OpKind::other : go::OpKind::elementwise;
    s.time = 1e-4 * static_cast<double>(1 + rng() % 5);
    s.temp_bytes = static_cast<std::int64_t>(rng() % 3) * 64;
    for (int k = 0; k < 2; ++k) {
      go::TensorSpec t;
      t.shape_known = false;
      t.bytes = 100 + static_cast<std::int64_t>(rng() % 1000);
      s.outputs.push_back(t);
    }
    for (int k = 0; i > 0 && k < 1 + static_cast<int>(rng() % 3); ++k)
      s.inputs.push_back(go::TensorRef{static_cast<std::int64_t>(rng() % static_cast<unsigned>(i)),
                                       static_cast<std::int32_t>(rng() % 2)});
    if (i > 2 && rng() % 5 == 0) s.control_inputs.push_back(static_cast<std::int64_t>(rng() % static_cast<unsigned>(i)));
    b.add_op(std::move(s));
  }
  const go::OpGraph g = b.build();
  go::Simulator sim(g, one_cluster(3));
  go::SimWorkspace ws = sim.make_workspace();
  auto topo = g.topo_order();
  int fused_valid = 0, fused_invalid = 0, illegal = 0;
  for (int rep = 0; rep < 300; ++rep) {
    go::Plan p;
    p.device.resize(static_cast<std::size_t>(n));
    for (auto& d : p.device) d = static_cast<std::int32_t>(rng() % 3);
    if (rng() % 2) {
      p.priority.resize(static_cast<std::size_t>(n));
      for (auto& x : p.priority) x = static_cast<float>(rng() % 7);
    }
    const unsigned mode = rng() % 4;
    if (mode > 0) {
      p.fusion.assign(static_cast<std::size_t>(n), -1);
      // runs of consecutive ops (topological order) on one device: convex; mode 3 adds random ids
      for (std::size_t i = 0; i < topo.size();) {
        const std::size_t len = 1 + rng() % 4;
        const auto f = static_cast<std::int32_t>(i);  // one id per run
        for (std::size_t k = i; k < std::min(topo.size(), i + len); ++k) {
          p.device[static_cast<std::size_t>(topo[k])] = p.device[static_cast<std::size_t>(topo[i])];
          p.fusion[static_cast<std::size_t>(topo[k])] = f;
        }
        i += len;
      }
      if (rng() % 2) p.fusion[5] = -1;  // half the plans leave op 5 out
      if (mode == 3)
        for (int k = 0; k < 3; ++k) p.fusion[rng() % static_cast<unsigned>(n)] = static_cast<std::int32_t>(rng() % 90) - 5;
    }
    const go::SimResult expect = sim.simulate(p);  // fresh workspace
    go::SimWorkspace fresh = sim.make_workspace();
    sim.simulate(p, fresh);
    const go::SimResult& got = sim.simulate(p, ws);
    INFO("rep " << rep << " mode " << mode);
    go::test::check_same_simulation(got, ws, expect, fresh, n);
    if (!p.fusion.empty()) ++(got.valid ? fused_valid : fused_invalid);
    illegal += got.status == go::SimStatus::fusion_illegal;
  }
  CHECK(fused_valid > 20);
  CHECK(fused_invalid > 20);
  CHECK(illegal > 10);
}

}  // namespace test_sim_perf
