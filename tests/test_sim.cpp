// Simulator: hand-computed schedules (chain, diamond, transfers, contention, priorities, fusion,
// memory), plan validation, clusters and plans in JSON, expert splits, measured profiles, traces.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "go/baselines/fusion.hpp"
#include "go/core/rng.hpp"
#include "go/graph/load.hpp"
#include "go/graph/training.hpp"
#include "go/sim/bound.hpp"
#include "go/sim/sim.hpp"

namespace test_sim {
namespace {

const std::string kRepoData = GO_DATA_DIR;
const std::string kData = std::string(GO_TEST_DATA_DIR) + "/sim";

// Small graphs with measured times and explicit tensor sizes.
struct Tiny {
  go::GraphBuilder b;
  // op with measured time `ms` (milliseconds; < 0: roofline), outputs of the given bytes.
  go::OpId op(const std::string& name, double ms, std::vector<std::int64_t> outs, std::vector<go::TensorRef> ins = {},
              std::int64_t params = 0, go::OpKind kind = go::OpKind::other) {
    go::OpSpec s;
    s.name = name;
    s.kind = kind;
    s.time = ms < 0 ? go::kNoTime : ms * 1e-3;
    s.param_bytes = params;
    for (auto bytes : outs) {
      go::TensorSpec t;
      t.shape_known = false;
      t.bytes = bytes;
      s.outputs.push_back(t);
    }
    s.inputs = std::move(ins);
    return b.add_op(std::move(s));
  }
  go::OpGraph build() { return b.build(); }
};

// Devices with 1 TFLOP/s, 1 GB/s memory, 10 us launch; links 1 GB/s, 100 us.
go::Cluster test_cluster(int n, go::ChannelModel ch = go::ChannelModel::duplex, std::int64_t memory = 1LL << 40) {
  go::DeviceSpec s;
  s.name = "test";
  s.peak_flops = 1e12;
  s.mem_bandwidth = 1e9;
  s.bandwidth_efficiency = 1.0;
  s.launch_overhead = 1e-5;
  s.memory_bytes = memory;
  s.compute_efficiency.fill(1.0);
  go::Cluster c = go::Cluster::uniform("test", s, n, 1e9, 1e-4);
  c.channels = ch;
  return c;
}

go::Plan placed(std::vector<std::int32_t> devices) {
  go::Plan p;
  p.device = std::move(devices);
  return p;
}

}  // namespace

TEST_CASE("chain on one device: step time is the sum, memory follows the last consumer", "[sim]") {
  Tiny t;
  t.op("a", 1, {100}, {}, 1000);
  t.op("b", 2, {100}, {{0, 0}});
  t.op("c", 3, {100}, {{1, 0}});
  const go::OpGraph g = t.build();
  go::Simulator sim(g, test_cluster(2));
  go::SimWorkspace ws = sim.make_workspace();
  const go::SimResult& r = sim.simulate(go::Plan{}, ws);
  REQUIRE(r.valid);
  CHECK(r.step_time == Approx(6e-3));
  CHECK(r.busy_time[0] == Approx(6e-3));
  CHECK(r.busy_time[1] == 0);
  CHECK(r.kernel_launches == 3);
  CHECK(r.transfers == 0);
  CHECK(r.resident_memory[0] == 1000);
  CHECK(r.peak_memory[0] == 1200);  // parameters + two live activations
  CHECK(r.peak_memory[1] == 0);
  CHECK(ws.start_time(1) == Approx(1e-3));
  CHECK(ws.finish_time(2) == Approx(6e-3));
}

TEST_CASE("roofline op time matches the cost model", "[sim]") {
  Tiny t;
  t.op("x", -1, {4000}, {}, 0, go::OpKind::input);
  go::OpSpec mm;
  mm.name = "mm";
  mm.kind = go::OpKind::matmul;
  mm.flops = 2e9;
  mm.param_bytes = 1000;
  go::TensorSpec out;
  out.shape = {1000};
  mm.outputs.push_back(out);
  mm.inputs.push_back({0, 0});
  t.b.add_op(mm);
  const go::OpGraph g = t.build();
  const go::Cluster c = test_cluster(1);
  go::Simulator sim(g, c);
  // 2 GFLOP at 1 TFLOP/s = 2 ms (compute-bound: 9 KB at 1 GB/s = 9 us), + 10 us launch
  CHECK(sim.op_cost(1, 0) == Approx(2e-3 + 1e-5));
  CHECK(sim.op_cost(1, 0) == go::op_time(g.op(1), c.spec(0)));
  CHECK(sim.op_cost(0, 0) == 0);  // inputs are free
  const go::SimResult r = sim.simulate(go::Plan{});
  CHECK(r.step_time == Approx(2.01e-3));
  CHECK(r.kernel_launches == 1);
}

TEST_CASE("diamond across two devices: transfers cost latency + bytes / bandwidth", "[sim]") {
  Tiny t;
  t.op("a", 1, {1000000});
  t.op("b", 2, {10}, {{0, 0}});
  t.op("c", 3, {2000000}, {{0, 0}});
  t.op("d", 1, {10}, {{1, 0}, {2, 0}});
  const go::OpGraph g = t.build();
  go::Simulator sim(g, test_cluster(2));
  go::SimWorkspace ws = sim.make_workspace();
  const go::SimResult& r = sim.simulate(placed({0, 0, 1, 0}), ws);
  REQUIRE(r.valid);
  // a 0-1 ms; a -> gpu1: 0.1 ms + 1 MB / 1 GB/s = 1.1 ms, arrives 2.1; c 2.1-5.1;
  // c -> gpu0: 0.1 + 2 = 2.1 ms, arrives 7.2; b 1-3; d 7.2-8.2
  CHECK(r.step_time == Approx(8.2e-3));
  CHECK(ws.start_time(2) == Approx(2.1e-3));
  CHECK(ws.start_time(3) == Approx(7.2e-3));
  CHECK(r.transfers == 2);
  CHECK(r.transfer_bytes == 3000000);
  CHECK(r.busy_time[0] == Approx(4e-3));
  CHECK(r.busy_time[1] == Approx(3e-3));
  REQUIRE(ws.transfers().size() == 2);
  CHECK(ws.transfers()[0].start == Approx(1e-3));
  CHECK(ws.transfers()[0].end == Approx(2.1e-3));
  // gpu1 holds a's copy (1 MB) and c's output (2 MB) while c runs
  CHECK(r.peak_memory[1] == 3000000);
}

TEST_CASE("a tensor is sent once per destination device", "[sim]") {
  Tiny t;
  t.op("a", 1, {1000000});
  t.op("b", 1, {10}, {{0, 0}});
  t.op("c", 1, {10}, {{0, 0}});
  t.op("d", 1, {10}, {{0, 0}});
  const go::OpGraph g = t.build();
  go::Simulator sim(g, test_cluster(3));
  const go::SimResult r = sim.simulate(placed({0, 1, 1, 2}));
  CHECK(r.transfers == 2);
  CHECK(r.transfer_bytes == 2000000);
  // b and c share one copy on gpu1, freed after both ran
  CHECK(r.peak_memory[1] == 1000000 + 10);
}

TEST_CASE("two transfers contend for one channel", "[sim]") {
  SECTION("two outputs of one op to the same device are serialized") {
    Tiny t;
    t.op("a", 1, {1000000, 1000000});
    t.op("b", 1, {10}, {{0, 0}});
    t.op("c", 1, {10}, {{0, 1}});
    const go::OpGraph g = t.build();
    go::Simulator sim(g, test_cluster(2));
    go::SimWorkspace ws = sim.make_workspace();
    const go::SimResult& r = sim.simulate(placed({0, 1, 1}), ws);
    // t1 1.0-2.1 ms, t2 2.1-3.2 ms; b 2.1-3.1, c 3.2-4.2
    CHECK(ws.transfers()[1].start == Approx(2.1e-3));
    CHECK(ws.start_time(2) == Approx(3.2e-3));
    CHECK(r.step_time == Approx(4.2e-3));
  }
  SECTION("two senders to one receiver: duplex and shared serialize, sender does not") {
    Tiny t;
    t.op("a0", 1, {1000000});
    t.op("a1", 1, {1000000});
    t.op("c", 1, {10}, {{0, 0}, {1, 0}});
    const go::OpGraph g = t.build();
    for (auto [ch, expect] : {std::pair{go::ChannelModel::duplex, 4.2e-3}, std::pair{go::ChannelModel::shared, 4.2e-3},
                              std::pair{go::ChannelModel::sender, 3.1e-3}}) {
      go::Simulator sim(g, test_cluster(3, ch));
      CHECK(sim.simulate(placed({0, 1, 2})).step_time == Approx(expect));
    }
  }
  SECTION("opposite directions: duplex in parallel, shared serialized") {
    Tiny t;
    t.op("a0", 1, {1000000});
    t.op("a1", 1, {1000000});
    t.op("c0", 1, {10}, {{1, 0}});
    t.op("c1", 1, {10}, {{0, 0}});
    const go::OpGraph g = t.build();
    go::Simulator duplex(g, test_cluster(2, go::ChannelModel::duplex));
    go::Simulator shared(g, test_cluster(2, go::ChannelModel::shared));
    CHECK(duplex.simulate(placed({0, 1, 0, 1})).step_time == Approx(3.1e-3));
    CHECK(shared.simulate(placed({0, 1, 0, 1})).step_time == Approx(4.2e-3));
  }
}

TEST_CASE("priorities choose among ready ops, default is first ready, first run", "[sim]") {
  Tiny t;
  t.op("x", 1, {10});
  t.op("y", 1, {10});
  t.op("z", 1, {10});
  t.op("late", 1, {10}, {{0, 0}});  // ready at 1 ms
  const go::OpGraph g = t.build();
  go::Simulator sim(g, test_cluster(1));
  go::SimWorkspace ws = sim.make_workspace();
  sim.simulate(go::Plan{}, ws);
  CHECK(ws.start_time(0) == Approx(0));
  CHECK(ws.start_time(1) == Approx(1e-3));
  CHECK(ws.start_time(2) == Approx(2e-3));
  CHECK(ws.start_time(3) == Approx(3e-3));
  go::Plan p;
  p.priority = {1, 3, 2, 10};
  sim.simulate(p, ws);
  // ready at 0: x(1), y(3), z(2) -> y, then z, then x; 'late' (10) becomes ready only after x
  CHECK(ws.start_time(1) == Approx(0));
  CHECK(ws.start_time(2) == Approx(1e-3));
  CHECK(ws.start_time(0) == Approx(2e-3));
  CHECK(ws.start_time(3) == Approx(3e-3));
  // a high priority waits for its inputs; once ready it overtakes everything queued
  p.priority = {3, 1, 2, 10};
  sim.simulate(p, ws);
  CHECK(ws.start_time(0) == Approx(0));
  CHECK(ws.start_time(3) == Approx(1e-3));
  CHECK(ws.start_time(2) == Approx(2e-3));
  CHECK(ws.start_time(1) == Approx(3e-3));
}

TEST_CASE("fusion: one launch, only external bytes, internal tensors never allocated", "[sim]") {
  Tiny t;
  t.op("x", -1, {1000000}, {}, 0, go::OpKind::input);
  t.op("e1", -1, {10000000}, {{0, 0}}, 0, go::OpKind::relu);
  t.op("e2", -1, {1000000}, {{1, 0}}, 0, go::OpKind::relu);
  t.op("e3", -1, {1000000}, {{2, 0}}, 0, go::OpKind::relu);
  const go::OpGraph g = t.build();
  go::Simulator sim(g, test_cluster(1));
  go::SimWorkspace ws = sim.make_workspace();
  const go::SimResult unfused = sim.simulate(go::Plan{}, ws);
  // e1 moves 11 MB, e2 11 MB, e3 2 MB at 1 GB/s, + 10 us each
  CHECK(unfused.step_time == Approx(24e-3 + 3e-5));
  CHECK(unfused.kernel_launches == 3);
  CHECK(unfused.memory_traffic == Approx(24e6));
  CHECK(unfused.peak_memory[0] == 11000000);
  go::Plan p;
  p.fusion = {-1, 2, 2, 2};
  const go::SimResult& fused = sim.simulate(p, ws);
  REQUIRE(fused.valid);
  // reads x (1 MB), writes e3's output (1 MB, read by nobody): 2 ms + one launch
  CHECK(fused.step_time == Approx(2e-3 + 1e-5));
  CHECK(fused.kernel_launches == 1);
  CHECK(fused.memory_traffic == Approx(2e6));
  CHECK(fused.peak_memory[0] == 2000000);
  CHECK(fused.units == 2);
  CHECK(ws.unit_of(3) == 1);
  CHECK(ws.start_time(3) == ws.start_time(1));
  SECTION("measured members: only the external traffic, at the longest member's rate") {
    Tiny m;  // elementwise: a kind the fusion rules let fuse (go/graph/fusion_rules.hpp)
    m.op("a", 1, {100}, {}, 0, go::OpKind::elementwise);
    m.op("b", 2, {100}, {{0, 0}}, 0, go::OpKind::elementwise);
    const go::OpGraph gm = m.build();
    go::Simulator sm(gm, test_cluster(1));
    go::Plan pm;
    pm.fusion = {0, 0};
    const go::SimResult r = sm.simulate(pm);
    // b is the longest: 200 bytes in 2 ms less a launch; the group writes only b's 100 bytes
    CHECK(r.step_time == Approx(1e-5 + 100 * (2e-3 - 1e-5) / 200));
    CHECK(r.kernel_launches == 1);
    CHECK(sm.simulate(go::Plan{}).step_time == Approx(3e-3));  // unfused: the measured times exactly
  }
}

TEST_CASE("fusion of measured ops: library kernels keep their time, loop traffic at measured rates", "[sim]") {
  // test_cluster: 1 GB/s, 10 us launch. Measured times cannot be split into compute and traffic, so
  // a group keeps its measured library kernel's time and streams the rest of its external traffic
  // at the rate of its longest measured loop member, at most in the time those members took.
  SECTION("a matmul with a measured bias + gelu epilogue") {
    Tiny t;
    t.op("x", -1, {1000000}, {}, 0, go::OpKind::input);
    t.op("mm", 2, {4000000}, {{0, 0}}, 1000000, go::OpKind::matmul);
    t.op("bias", 0.81, {4000000}, {{1, 0}}, 4000, go::OpKind::add);
    t.op("gelu", 1.01, {4000000}, {{2, 0}}, 0, go::OpKind::gelu);
    const go::OpGraph g = t.build();
    go::Simulator sim(g, test_cluster(1));
    CHECK(sim.simulate(go::Plan{}).step_time == Approx(3.82e-3));
    go::Plan p;
    p.fusion = {-1, 0, 0, 0};
    const go::SimResult r = sim.simulate(p);
    REQUIRE(r.valid);
    // mm: 2 ms less its launch. Loop traffic: bias's 4000 parameter bytes + gelu's 4 MB output (mm's
    // output and bias's never leave the kernel). Longest loop member: gelu, 8 MB in 1 ms.
    CHECK(r.step_time == Approx(1e-5 + (2e-3 - 1e-5) + 4004000 * 1e-3 / 8e6).epsilon(1e-12));
    CHECK(r.step_time == Approx(2.5005e-3).epsilon(1e-12));
    CHECK(r.kernel_launches == 1);
    // the traffic reported is the group's external bytes: x, the parameters, gelu's output
    CHECK(r.memory_traffic == Approx(1e6 + 1e6 + 4000 + 4e6));
  }
  SECTION("a view that only takes its launch floor does not set the rate") {
    Tiny t;
    t.op("x", -1, {1000000}, {}, 0, go::OpKind::input);
    t.op("a", 1, {1000000}, {{0, 0}}, 0, go::OpKind::elementwise);          // 2 MB, 0.99 ms
    t.op("v", 0.011, {1000000}, {{1, 0}}, 0, go::OpKind::reshape);         // 2 MB in 1 us: not a rate
    t.op("b", 2.01, {1000000}, {{2, 0}, {1, 0}}, 0, go::OpKind::elementwise);  // 3 MB, 2 ms
    const go::OpGraph g = t.build();
    go::Simulator sim(g, test_cluster(1));
    go::Plan p;
    p.fusion = {-1, 0, 0, 0};
    // reads x, writes b's output: 2 MB at b's 3 MB per 2 ms
    CHECK(sim.simulate(p).step_time == Approx(1e-5 + 2e6 * 2e-3 / 3e6).epsilon(1e-12));
  }
  SECTION("never slower than the members' own time") {
    Tiny t;
    t.op("x", -1, {1000000}, {}, 0, go::OpKind::input);
    t.op("c", 0.05, {4}, {}, 0, go::OpKind::elementwise);                  // a 4-byte fill, 40 us
    t.op("d", 0.02, {1000000}, {{0, 0}, {1, 0}}, 0, go::OpKind::elementwise);  // 2 MB in 10 us
    const go::OpGraph g = t.build();
    go::Simulator sim(g, test_cluster(1));
    go::Plan p;
    p.fusion = {-1, 0, 0};
    // c is the longest, at 4 bytes per 40 us the 2 MB would take 20 s: capped at 40 + 10 us
    CHECK(sim.simulate(p).step_time == Approx(1e-5 + 50e-6).epsilon(1e-12));
  }
  SECTION("roofline members in a measured group stream at the device's bandwidth") {
    Tiny t;
    t.op("x", -1, {1000000}, {}, 0, go::OpKind::input);
    t.op("a", 1, {1000000}, {{0, 0}}, 0, go::OpKind::elementwise);   // measured: 2 MB in 0.99 ms
    t.op("b", -1, {1000000}, {{1, 0}}, 0, go::OpKind::elementwise);  // roofline: 2 MB at 1 GB/s
    const go::OpGraph g = t.build();
    go::Simulator sim(g, test_cluster(1));
    go::Plan p;
    p.fusion = {-1, 0, 0};
    // x in, b's output out: 2 MB at a's rate (2 MB per 0.99 ms), under the cap 0.99 + 2 ms
    CHECK(sim.simulate(p).step_time == Approx(1e-5 + 0.99e-3).epsilon(1e-12));
  }
}

TEST_CASE("step-time lower bounds: hand-computed, met by the plans that reach them", "[sim][bound]") {
  // test_cluster: 1 TFLOP/s, 1 GB/s, 10 us launch. mm1 (2 GFLOP) -> relu -> mm2 (1 GFLOP), and mm3
  // (3 GFLOP) on its own; every tensor 1000 bytes.
  Tiny t;
  auto mm = [&](const std::string& name, double gflop, std::vector<go::TensorRef> ins) {
    go::OpSpec s;
    s.name = name;
    s.kind = go::OpKind::matmul;
    s.flops = gflop * 1e9;
    go::TensorSpec out;
    out.shape_known = false;
    out.bytes = 1000;
    s.outputs.push_back(out);
    s.inputs = std::move(ins);
    return t.b.add_op(std::move(s));
  };
  mm("mm1", 2, {});
  t.op("relu", -1, {1000}, {{0, 0}}, 0, go::OpKind::relu);
  mm("mm2", 1, {{1, 0}});
  mm("mm3", 3, {});
  const go::OpGraph g = t.build();
  // unfused: mm1 2.01 ms (1000 B out, 1 us of traffic: compute-bound), relu 10 + 2 us, mm2 1.01, mm3 3.01
  const double relu = 1e-5 + 2000 / 1e9;
  SECTION("one device: the sum of the work") {
    const go::StepTimeBound b = go::step_time_lower_bound(g, test_cluster(1));
    CHECK(b.unfused_path == Approx(2.01e-3 + relu + 1.01e-3));
    CHECK(b.unfused_work == Approx(6.03e-3 + relu));
    CHECK(b.unfused == Approx(6.03e-3 + relu));
    CHECK(b.fused_path == Approx(3e-3));  // mm1 + mm2's FLOPs, or mm3's: equal
    CHECK(b.fused == Approx(6e-3));
    go::Simulator sim(g, test_cluster(1));
    CHECK(sim.simulate(go::Plan{}).step_time == Approx(b.unfused));  // one device: the bound is met
  }
  SECTION("two devices: the longest path") {
    const go::StepTimeBound b = go::step_time_lower_bound(g, test_cluster(2));
    CHECK(b.unfused_work == Approx((6.03e-3 + relu) / 2));
    CHECK(b.unfused == Approx(3.02e-3 + relu));
    CHECK(b.fused == Approx(3e-3));
    go::Simulator sim(g, test_cluster(2));
    const go::SimResult& r = sim.simulate(placed({0, 0, 0, 1}));
    CHECK(r.step_time == Approx(3.02e-3 + relu));  // the chain on one device, mm3 on the other
    CHECK(r.step_time >= b.unfused);
    go::Plan p = placed({0, 0, 0, 1});
    p.fusion = {0, 0, -1, -1};  // relu into mm1 (two matmuls never share a kernel)
    const go::SimResult& f = sim.simulate(p);
    REQUIRE(f.valid);
    CHECK(f.step_time >= b.fused);
    CHECK(f.step_time < b.unfused);  // fusing beats every unfused plan, never the fused bound
    // within the rules each matmul is in a group of its own kind: one launch + its FLOPs at least
    CHECK(b.valid_path == Approx(2.01e-3 + 1.01e-3));
    CHECK(b.valid_work == Approx(6.03e-3 / 2));
    CHECK(b.valid == Approx(3.02e-3));
    CHECK(f.step_time >= b.valid * (1 - 1e-12));
    CHECK(f.step_time == Approx(b.valid));  // mm1 + relu (2.01 ms: relu's 1 us of traffic hides under mm1's FLOPs), mm2 1.01
  }
  SECTION("valid plans: a backward library kernel and an alone op count whole") {
    Tiny m;
    m.op("x", -1, {1000}, {}, 0, go::OpKind::input);
    go::OpSpec grad;  // a matmul of the backward pass: never fused (roofline: launch + max(FLOPs, bytes))
    grad.name = "grad";
    grad.kind = go::OpKind::matmul;
    grad.role = go::OpRole::backward;
    grad.flops = 1e9;
    go::TensorSpec out;
    out.shape_known = false;
    out.bytes = 3000000;  // 3 ms of traffic at 1 GB/s (input 1000 B + output): memory-bound
    grad.outputs.push_back(out);
    grad.inputs.push_back({0, 0});
    m.b.add_op(std::move(grad));
    m.op("upd", 2, {1000}, {{1, 0}}, 0, go::OpKind::update);  // measured, alone: its 2 ms
    m.op("add", 1, {1000}, {{2, 0}}, 0, go::OpKind::add);     // measured loop op: nothing
    const go::OpGraph h = m.build();
    const go::StepTimeBound b = go::step_time_lower_bound(h, test_cluster(1));
    const double grad_time = 1e-5 + 3001000 / 1e9;
    CHECK(b.fused == Approx(1e-3));  // grad's FLOPs only: the rules ignored
    CHECK(b.valid == Approx(grad_time + 2e-3));
    CHECK(b.unfused == Approx(grad_time + 3e-3));
    go::Simulator sim(h, test_cluster(1));
    CHECK(sim.simulate(go::Plan{}).step_time >= b.valid);
  }
  SECTION("valid plans: the traffic the rules force between gradient kernels") {
    // x -> g1 -> dropout -> g2, g1 and g2 matmuls of the backward pass (never fused), all roofline:
    // whatever the plan, the dropout reads g1's 2 MB and writes the 1 MB g2 reads (3 ms at 1 GB/s)
    go::GraphBuilder m;
    auto add = [&](const std::string& name, go::OpKind kind, go::OpRole role, double flops, std::int64_t bytes,
                   std::vector<go::TensorRef> ins) {
      go::OpSpec s;
      s.name = name;
      s.kind = kind;
      s.role = role;
      s.flops = flops;
      go::TensorSpec out;
      out.shape_known = false;
      out.bytes = bytes;
      s.outputs.push_back(out);
      s.inputs = std::move(ins);
      return m.add_op(std::move(s));
    };
    add("x", go::OpKind::input, go::OpRole::forward, 0, 1000, {});
    add("g1", go::OpKind::matmul, go::OpRole::backward, 1e9, 2000000, {{0, 0}});
    add("drop", go::OpKind::dropout, go::OpRole::backward, 0, 1000000, {{1, 0}});
    add("g2", go::OpKind::matmul, go::OpRole::backward, 1e9, 1000, {{2, 0}});
    const go::OpGraph h = m.build();
    // the dropout is a loop kernel of its own between them: its launch counts too
    const double g1 = 1e-5 + 2001000 / 1e9, g2 = 1e-5 + 1001000 / 1e9, drop = 3000000 / 1e9, launch = 1e-5;
    const go::StepTimeBound b = go::step_time_lower_bound(h, test_cluster(2));
    CHECK(b.valid_compute == Approx(g1 + launch + g2));  // the dropout's FLOPs: none
    CHECK(b.valid_traffic == Approx(g1 + launch + drop + g2));
    CHECK(b.valid == Approx(g1 + launch + drop + g2));
    CHECK(b.valid_path == Approx(g1 + launch + drop + g2));
    go::Simulator sim(h, test_cluster(2));
    // the chain on one device meets it; across devices it only adds
    CHECK(sim.simulate(go::Plan{}).step_time == Approx(b.valid));
    CHECK(sim.simulate(placed({0, 0, 1, 1})).step_time > b.valid);
    // a measured dropout of 1 us, under a launch: its measured time is all a lone op takes, so no
    // launch counts for it
    go::GraphBuilder mm;
    for (go::OpId v = 0; v < h.num_ops(); ++v) {
      go::OpSpec s = go::op_spec(h, v);
      if (v == 2) s.time = 1e-6;
      mm.add_op(std::move(s));
    }
    const go::OpGraph hm = mm.build();
    const go::StepTimeBound bm = go::step_time_lower_bound(hm, test_cluster(2));
    CHECK(bm.valid == Approx(g1 + g2));
    CHECK(go::Simulator(hm, test_cluster(2)).simulate(go::Plan{}).step_time == Approx(g1 + 1e-6 + g2));
  }
  SECTION("empty graph, measured ops") {
    CHECK(go::step_time_lower_bound(go::OpGraph{}, test_cluster(2)).fused == 0);
    Tiny m;
    m.op("x", -1, {1000}, {}, 0, go::OpKind::input);
    m.op("conv", 2, {1000}, {{0, 0}}, 0, go::OpKind::conv);    // a library kernel: 2 ms less its launch
    m.op("add", 1, {1000}, {{1, 0}}, 0, go::OpKind::add);      // a measured loop op: nothing when fused
    const go::StepTimeBound b = go::step_time_lower_bound(m.build(), test_cluster(1));
    CHECK(b.unfused == Approx(3e-3));
    CHECK(b.fused == Approx(2e-3 - 1e-5));
    CHECK(b.valid == Approx(2e-3));  // within the rules the conv's group takes its whole measured time
    CHECK(b.valid_traffic == 0);     // measured ops: the traffic floors do not apply
    CHECK(go::step_time_lower_bound(m.build(), test_cluster(1), go::CostSource::roofline).unfused < 1e-4);
  }
}

TEST_CASE("out of memory is a verdict, not a crash", "[sim]") {
  Tiny t;
  t.op("a", 1, {1000000}, {}, 100000);
  t.op("b", 1, {1000000}, {{0, 0}});
  t.op("c", 1, {10}, {{1, 0}});
  const go::OpGraph g = t.build();
  SECTION("activations") {
    go::Simulator sim(g, test_cluster(2, go::ChannelModel::duplex, 2000000));
    go::SimWorkspace ws = sim.make_workspace();
    const go::SimResult& r = sim.simulate(go::Plan{}, ws);
    CHECK_FALSE(r.valid);
    CHECK(r.status == go::SimStatus::out_of_memory);
    CHECK(r.problem_device == 0);
    CHECK(r.peak_memory[0] == 2100000);
    CHECK(r.step_time == Approx(3e-3));  // the step still ran to the end
    const std::string why = go::sim_reason(r, g, sim.cluster());
    CHECK(why.find("out of memory on device 0 ('gpu0')") == 0);
    CHECK(why.find("op 'b'") != std::string::npos);
    // spread over two devices it fits
    CHECK(sim.simulate(placed({0, 1, 1}), ws).valid);
  }
  SECTION("parameters alone") {
    go::Simulator sim(g, test_cluster(1, go::ChannelModel::duplex, 50000));
    const go::SimResult r = sim.simulate(go::Plan{});
    CHECK(r.status == go::SimStatus::out_of_memory);
    CHECK(go::sim_reason(r, g, sim.cluster()).find("parameters alone") != std::string::npos);
  }
  SECTION("stop_on_oom") {
    go::SimOptions o;
    o.stop_on_oom = true;
    go::Simulator sim(g, test_cluster(1, go::ChannelModel::duplex, 2000000), o);
    const go::SimResult r = sim.simulate(go::Plan{});
    CHECK(r.status == go::SimStatus::out_of_memory);
    CHECK(r.step_time == Approx(1e-3));
  }
  SECTION("a workspace that stops at the first out-of-memory") {
    go::Simulator sim(g, test_cluster(2, go::ChannelModel::duplex, 2000000));
    go::SimWorkspace whole = sim.make_workspace(), stops = sim.make_workspace();
    stops.set_stop_on_oom(true);
    const go::SimResult& r = sim.simulate(go::Plan{}, stops);
    CHECK(r.status == go::SimStatus::out_of_memory);
    CHECK(r.step_time == Approx(1e-3));  // stopped where b started, as with SimOptions::stop_on_oom
    CHECK(sim.simulate(go::Plan{}, whole).step_time == Approx(3e-3));
    // a plan that fits: the same result either way
    const go::SimResult a = sim.simulate(placed({0, 1, 1}), whole);
    const go::SimResult& b = sim.simulate(placed({0, 1, 1}), stops);
    REQUIRE(a.valid);
    CHECK(b.valid);
    CHECK(b.step_time == a.step_time);
    CHECK(b.peak_memory == a.peak_memory);
    CHECK(b.transfers == a.transfers);
    // switched off, the workspace runs whole steps again
    stops.set_stop_on_oom(false);
    CHECK(sim.simulate(go::Plan{}, stops).step_time == Approx(3e-3));
  }
}

TEST_CASE("invalid plans are reported with the same reason as check_plan", "[sim]") {
  Tiny t;  // elementwise ops: every group below is legal by the fusion rules, and fails for another reason
  const auto ew = go::OpKind::elementwise;
  t.op("a", 1, {10}, {}, 0, ew);
  t.op("b", 1, {10}, {{0, 0}}, 0, ew);
  t.op("c", 1, {10}, {{0, 0}, {1, 0}}, 0, ew);
  t.op("d", 1, {10}, {{2, 0}}, 0, ew);
  t.op("e", 1, {10}, {{3, 0}}, 0, ew);
  t.b.spec(3).colocation = 4;
  t.b.spec(4).colocation = 4;
  const go::OpGraph g = t.build();
  go::Simulator sim(g, test_cluster(2));
  go::SimWorkspace ws = sim.make_workspace();
  auto expect = [&](const go::Plan& p, go::SimStatus status, const std::string& text) {
    const go::SimResult& r = sim.simulate(p, ws);
    CHECK_FALSE(r.valid);
    CHECK(r.status == status);
    CHECK(std::isinf(r.step_time));
    CHECK(go::sim_reason(r, g, sim.cluster()) == text);
    CHECK(go::check_plan(g, p, 2) == text);
  };
  expect(placed({0, 0, 2, 0, 0}), go::SimStatus::bad_device,
         "op 'c' (id 2) is placed on device 2 but the cluster has 2 device(s)");
  expect(placed({0, 0, 0, 0, 1}), go::SimStatus::colocation_split,
         "colocation group 4 spans devices 0 and 1: op 'd' (id 3) and op 'e' (id 4)");
  go::Plan p = placed({0, 1, 0, 0, 0});
  p.fusion = {3, 3, -1, -1, -1};
  expect(p, go::SimStatus::fusion_spans_devices,
         "fusion group 3 spans devices 0 and 1: op 'a' (id 0) and op 'b' (id 1)");
  p = placed({0, 0, 0, 0, 0});
  p.fusion = {1, -1, 1, -1, -1};  // a -> b -> c leaves the group {a, c} and re-enters it
  expect(p, go::SimStatus::fusion_not_convex,
         "fusion group 1 is not convex: a path leaves it and re-enters it through op 'b' (id 1)");
  p.fusion = {-1, 4, -1, -1, 3};
  CHECK(sim.simulate(p, ws).valid);  // singleton groups are fine
  p.fusion = {4, -1, -1, -1, 4};  // {a, e}: a -> ... -> e through b, c, d
  expect(p, go::SimStatus::fusion_not_convex,
         "fusion group 4 is not convex: a path leaves it and re-enters it through op 'c' (id 2)");
  p.fusion = {-1, -1, -1, -1, 5};
  expect(p, go::SimStatus::bad_fusion_id, "op 'e' (id 4) has fusion group 5 (valid: -1, or 0 to 4)");
  p.fusion.clear();
  p.priority = {0, 0, NAN, 0, 0};
  expect(p, go::SimStatus::bad_priority, "op 'c' (id 2) has a non-finite priority");
  // a plan of the wrong size is a programming error
  CHECK_THROWS_WITH(sim.simulate(placed({0, 0}), ws), Catch::Contains("plan has 2 device entries for a graph of 5 ops"));
  // after all that the workspace still simulates a good plan
  CHECK(sim.simulate(go::Plan{}, ws).step_time == Approx(5e-3));
}

TEST_CASE("two convex fusion groups that depend on each other", "[sim]") {
  // a -> b, c -> d, a -> d, c -> b: groups {a, d} no... use {a, d} and {c, b}: a->b (g2), c->d (g1)
  Tiny t;  // elementwise ops: legal groups by the fusion rules
  const auto ew = go::OpKind::elementwise;
  t.op("a", 1, {10}, {}, 0, ew);
  t.op("c", 1, {10}, {}, 0, ew);
  t.op("b", 1, {10}, {{0, 0}, {1, 0}}, 0, ew);
  t.op("d", 1, {10}, {{0, 0}, {1, 0}}, 0, ew);
  t.op("x", 1, {10}, {{0, 0}}, 0, ew);
  t.op("y", 1, {10}, {{4, 0}, {3, 0}}, 0, ew);
  const go::OpGraph g = t.build();
  go::Simulator sim(g, test_cluster(1));
  go::Plan p;
  p.fusion = {2, 1, 2, 1, -1, -1};  // {a, b} and {c, d}: both convex, no cycle (c->b, a->d are across)
  // {a,b} needs c (group 1); {c,d} needs a (group 2): a cycle between the groups
  const go::SimResult r = sim.simulate(p);
  CHECK(r.status == go::SimStatus::fusion_cycle);
  CHECK(go::sim_reason(r, g, sim.cluster()) == "fusion groups 1 and 2 depend on each other (fusing them would create a cycle)");
  CHECK(go::check_plan(g, p, 1) == go::sim_reason(r, g, sim.cluster()));
}

TEST_CASE("control edges order ops and cross devices as latency only", "[sim]") {
  Tiny t;
  t.op("a", 1, {1000000});
  go::OpSpec s;
  s.name = "b";
  s.time = 1e-3;
  s.control_inputs = {0};
  t.b.add_op(s);
  const go::OpGraph g = t.build();
  go::Simulator sim(g, test_cluster(2));
  go::SimWorkspace ws = sim.make_workspace();
  const go::SimResult& r = sim.simulate(placed({0, 1}), ws);
  CHECK(r.transfers == 0);
  CHECK(ws.start_time(1) == Approx(1.1e-3));
  CHECK(r.step_time == Approx(2.1e-3));
}

TEST_CASE("measured profile on one device: step time is the sum of the measured times", "[sim][real]") {
  for (const std::string rel : {"real-data/msr-fiddle-pipedream/resnet50/graph.txt", "real-data/msr-fiddle-pipedream/gnmt/graph.txt",
                                "real-data/msr-fiddle-dnn-partitioning/throughput-inputs/OperatorGraphs/bert_l-3_training.json"}) {
    const std::string path = kRepoData + "/" + rel;
    REQUIRE(std::filesystem::exists(path));  // shipped in data/
    const go::OpGraph g = go::load_graph(path);
    double sum = 0;
    for (const go::Op& o : g.ops()) sum += go::op_time(o, go::DeviceSpec::v100());
    go::SimOptions o;
    o.check_colocation = false;
    go::Simulator sim(g, go::cluster_preset("v100x1"), o);
    const go::SimResult r = sim.simulate(go::Plan{});
    INFO(rel);
    // Measured times already contain the launch; nothing is added: step = sum exactly (rounding aside).
    CHECK(r.step_time == Approx(sum).epsilon(1e-12));
    CHECK(r.busy_time[0] == Approx(sum).epsilon(1e-12));
    CHECK(r.transfers == 0);
  }
}

TEST_CASE("the human-expert splits load as plans", "[sim][real]") {
  const std::string dir = kRepoData + "/real-data/msr-fiddle-dnn-partitioning";
  REQUIRE(std::filesystem::exists(dir));  // shipped in data/
  for (const std::string name :
       {"bert24_inference", "bert24_training", "gnmt_inference", "gnmt_training", "inceptionv3_inference", "resnet50_inference"}) {
    INFO(name);
    const go::OpGraph g = go::load_graph(dir + "/throughput-inputs/LayerGraphs/" + name + ".json");
    const go::Plan p = go::load_plan(dir + "/human-experts/" + name + "_expert.json", g);
    REQUIRE(p.device.size() == static_cast<std::size_t>(g.num_ops()));
    CHECK(go::check_plan(g, p, 6) == "");
    go::Simulator sim(g, go::cluster_preset("v100x6"));
    go::SimWorkspace ws = sim.make_workspace();
    const go::SimResult& r = sim.simulate(p, ws);
    CHECK(r.valid);
    std::vector<std::int64_t> load(6, 0);
    for (const go::Op& o : g.ops()) load[static_cast<std::size_t>(p.device[static_cast<std::size_t>(o.id)])] += o.param_bytes;
    for (int d = 0; d < 6; ++d) CHECK(r.resident_memory[static_cast<std::size_t>(d)] == load[static_cast<std::size_t>(d)]);
    // model parallelism over a chain cannot beat the sum of the work, and transfers happen
    double work = 0;
    for (double b : r.busy_time) work += b;
    CHECK(r.step_time >= work / 6);
    CHECK(r.transfers > 0);
    // the split round-trips through the go-plan format
    const go::Plan q = go::plan_from_json(go::plan_to_json(p, g), g, "roundtrip");
    CHECK(q.device == p.device);
  }
}

TEST_CASE("expert split errors name the file and the node", "[sim]") {
  Tiny t;
  t.op("a", 1, {10});
  t.op("b", 1, {10}, {{0, 0}});
  const go::OpGraph g = t.build();
  using nlohmann::json;
  CHECK_THROWS_WITH(go::plan_from_json(json::parse(R"({"fpgas": [{"nodes": [0]}, {"nodes": [7]}]})"), g, "x.json"),
                    "x.json: device 1 lists node id 7, which is not in the graph");
  CHECK_THROWS_WITH(go::plan_from_json(json::parse(R"({"fpgas": [{"nodes": [0]}]})"), g, "x.json"),
                    "x.json: op 'b' (id 1) is not placed on any device");
  CHECK_THROWS_WITH(go::plan_from_json(json::parse(R"({"fpgas": [{"nodes": [0, 1]}, {"nodes": [1]}]})"), g, "x.json"),
                    "x.json: op 'b' (id 1) is listed twice (device 0 and 1)");
  CHECK_THROWS_WITH(go::plan_from_json(json::parse(R"({"fpgas": [{"nodes": [0, 1]}], "cpus": [{"nodes": [1]}]})"), g, "x.json"),
                    Catch::Contains("CPU placement is not modelled"));
  const go::Plan p = go::plan_from_json(json::parse(R"({"device_ops": [[1], [0]], "priority": [1, 2]})"), g, "y.json");
  CHECK(p.device == std::vector<std::int32_t>{1, 0});
  CHECK(p.priority == std::vector<float>{1, 2});
  CHECK_THROWS_WITH(go::plan_from_json(json::parse(R"({"format": "go-plan", "num_ops": 3, "device": [0, 0, 0]})"), g, "z.json"),
                    "z.json: the plan is for 3 ops but the graph has 2");
  CHECK_THROWS_WITH(go::plan_from_json(json::parse(R"({"device": [0, 0], "fusion": [0, 5]})"), g, "z.json"),
                    "z.json: fusion[1] is 5 (valid: -1, or 0 to 1)");
  // "devices" for "device" would otherwise simulate everything on device 0 and call the plan valid
  CHECK_THROWS_WITH(go::plan_from_json(json::parse(R"({"format": "go-plan", "devices": [1, 1]})"), g, "z.json"),
                    "z.json: unknown key \"devices\" (known: format, version, graph, num_ops, device, device_ops, "
                    "priority, fusion)");
  // a document that sets nothing (a results file given as a plan) would simulate the default plan
  CHECK_THROWS_WITH(go::plan_from_json(json::parse(R"({})"), g, "z.json"),
                    "z.json: the plan sets nothing: give \"device\" (or \"device_ops\"), \"priority\" or "
                    "\"fusion\" (every op on device 0 is {\"device\": [0, 0, ...]})");
  CHECK_THROWS_WITH(go::plan_from_json(json::parse(R"({"format": "go-plan", "num_ops": 2})"), g, "z.json"),
                    Catch::Contains("the plan sets nothing"));
  CHECK(go::plan_from_json(json::parse(R"({"priority": [2, 1]})"), g, "z.json").device.empty());
  CHECK_THROWS_WITH(go::parse_plan(R"({"device": [0, 1], "device": [1, 1]})", g, "z.json"),
                    "z.json: the key \"device\" appears twice in one object; keep one of them");
}

TEST_CASE("plans round-trip through JSON files", "[sim]") {
  Tiny t;
  t.op("a", 1, {10});
  t.op("b", 1, {10}, {{0, 0}});
  t.op("c", 1, {10}, {{1, 0}});
  const go::OpGraph g = t.build();
  go::Plan p;
  p.device = {0, 1, 1};
  p.priority = {0.5f, -2.0f, 3.0f};
  p.fusion = {-1, 2, 2};
  const std::string path = (std::filesystem::temp_directory_path() / "go_test_sim_plan.json").string();
  go::save_plan(p, g, path);
  const go::Plan q = go::load_plan(path, g);
  CHECK(q.device == p.device);
  CHECK(q.priority == p.priority);
  CHECK(q.fusion == p.fusion);
  std::filesystem::remove(path);
  const go::Plan f = go::load_plan(kData + "/tiny_plan.json", g);
  CHECK(f.device == std::vector<std::int32_t>{0, 1, 1});
  CHECK(f.fusion == std::vector<std::int32_t>{-1, 0, 0});
}

TEST_CASE("cluster presets, JSON and validation", "[sim]") {
  for (const std::string& name : go::cluster_preset_names()) {
    INFO(name);
    const go::Cluster c = go::cluster_preset(name);
    CHECK_NOTHROW(c.validate());
    const go::Cluster back = go::cluster_from_json(go::cluster_to_json(c), "roundtrip");
    CHECK(back.num_devices() == c.num_devices());
    CHECK(back.bandwidth == c.bandwidth);
    CHECK(back.latency == c.latency);
    CHECK(back.devices[0].spec.peak_flops == c.devices[0].spec.peak_flops);
    CHECK(back.devices[0].spec.compute_efficiency == c.devices[0].spec.compute_efficiency);
    CHECK(back.channels == c.channels);
  }
  const go::Cluster v8 = go::cluster_preset("v100x8");
  CHECK(v8.num_devices() == 8);
  CHECK(v8.spec(0).memory_bytes == 16LL << 30);
  CHECK(v8.link_bandwidth(0, 3) == 25e9);  // same quad
  CHECK(v8.link_bandwidth(1, 5) == 25e9);  // i <-> i + 4
  CHECK(v8.link_bandwidth(1, 6) == 10e9);  // through the host
  const go::Cluster k80 = go::cluster_preset("k80x2");
  CHECK(k80.transfer_time(0, 1, 7.6e9) == Approx(1.0 + 25e-6));
  CHECK(k80.spec(1).launch_overhead == 5.7e-6);
  CHECK(go::cluster_preset("p100x4").link_bandwidth(2, 3) == 10e9);
  CHECK(go::cluster_preset("h100x8").spec(7).memory_bytes == 80LL << 30);
  CHECK_THROWS_WITH(go::cluster_preset("tpux4"), Catch::Contains("unknown cluster preset 'tpux4'"));
  CHECK_THROWS_WITH(go::load_cluster("v100"), Catch::Contains("unknown cluster preset 'v100'"));

  const go::Cluster pairs = go::load_cluster(kData + "/pairs.json");
  CHECK(pairs.name == "pairs");
  CHECK(pairs.num_devices() == 4);
  CHECK(pairs.link_bandwidth(0, 1) == 50e9);
  CHECK(pairs.link_bandwidth(1, 2) == 12e9);
  CHECK(pairs.link_latency(3, 0) == 2e-5);
  CHECK(pairs.channels == go::ChannelModel::shared);
  CHECK(pairs.spec(0).memory_bytes == 8000000000LL);
  CHECK(pairs.spec(0).compute_efficiency[go::op_kind_index(go::OpKind::conv)] == 0.5);
  const go::Cluster mixed = go::load_cluster(kData + "/mixed.json");
  CHECK(mixed.devices[1].name == "slow");
  CHECK(mixed.spec(1).peak_flops == 9.3e12);
  CHECK(mixed.link_latency(0, 1) == 1e-5);
  CHECK(mixed.link_bandwidth(1, 0) == 5e9);

  CHECK_THROWS_WITH(go::load_cluster(kData + "/bad_cluster.json"),
                    kData + "/bad_cluster.json: link 0 -> 1 has invalid bandwidth -1 (need at least 1 bytes/s)");
  // values far outside any machine, which would make step times infinite, are refused by name
  for (const auto& [text, says] : std::vector<std::pair<std::string, std::string>>{
           {R"({"devices": {"count": 2}, "links": {"bandwidth": 1e9, "latency": 1e308}})", "has invalid latency 1e+308"},
           {R"({"devices": {"count": 2, "peak_flops": 1e-300}, "links": {"bandwidth": 1e9}})", "has invalid peak_flops"},
           {R"({"devices": {"count": 2, "mem_bandwidth": 1e-300}, "links": {"bandwidth": 1e9}})", "has invalid mem_bandwidth"},
           {R"({"devices": {"count": 2, "bandwidth_efficiency": 1e-300}, "links": {"bandwidth": 1e9}})",
            "has invalid bandwidth_efficiency"},
           {R"({"devices": {"count": 2, "launch_overhead": 1e9}, "links": {"bandwidth": 1e9}})", "has invalid launch_overhead"}}) {
    INFO(text);
    CHECK_THROWS_WITH(go::parse_cluster(text, "x.json"), Catch::StartsWith("x.json: ") && Catch::Contains(says));
  }
  // the limits themselves are accepted
  CHECK_NOTHROW(go::parse_cluster(R"({"devices": {"count": 2, "peak_flops": 1, "mem_bandwidth": 1}, "links": {"bandwidth": 1, "latency": 1000}})",
                                  "x.json"));
  CHECK_THROWS_WITH(go::load_cluster(kData + "/no_such.json"), Catch::Contains("no_such.json: cannot open"));
  CHECK_THROWS_WITH(go::parse_cluster("{\"devices\": {\"count\": 2}, \"links\": {\"bandwidth\": [[1, 2]]}}", "m.json"),
                    "m.json: links: \"bandwidth\" must be a number or a 2 x 2 matrix");
  CHECK_THROWS_WITH(go::parse_cluster("{\"devices\": {\"count\": 2, \"type\": \"tpu\"}, \"links\": {\"bandwidth\": 1}}", "m.json"),
                    Catch::Contains("m.json: devices: unknown device preset 'tpu'"));
  CHECK_THROWS_WITH(go::parse_cluster("{\"devices\": [{}], \"links\": {\"bandwidth\": 1e9}, \"channels\": \"x\"}", "m.json"),
                    "m.json: \"channels\" is 'x', expected duplex, shared or sender");
  CHECK_THROWS_WITH(go::parse_cluster("{", "m.json"), Catch::StartsWith("m.json: invalid JSON:"));
  // a misspelled key would silently leave the preset's value in place: refused, naming the object
  for (const auto& [text, says] : std::vector<std::pair<std::string, std::string>>{
           {R"({"devices": {"count": 2, "memory_byte": 1}, "links": {"bandwidth": 1e9}})",
            "m.json: devices: unknown key \"memory_byte\" (known: name, count, type,"},
           {R"({"devices": {"count": 2}, "links": {"bandwith": 1e9}})", "m.json: links: unknown key \"bandwith\""},
           {R"({"devices": {"count": 2}, "chanels": "shared", "links": {"bandwidth": 1e9}})",
            "m.json: unknown key \"chanels\" (known: format, version, name, devices, channels, links, calibration)"},
           {R"({"devices": [{"name": "a"}, {"name": "b", "peak_flop": 1}], "links": {"bandwidth": 1e9}})",
            "m.json: device 1: unknown key \"peak_flop\""},
           {R"({"devices": {"count": 4}, "links": {"topology": "groups", "group_size": 2,
                "intra": {"bandwidth": 1e9, "latency": 0}, "inter": {"bandwidht": 1e9, "latency": 0}}})",
            "m.json: links: inter: unknown key \"bandwidht\""},
           {R"({"devices": [{"count": 2}], "links": {"bandwidth": 1e9}})", "not to a device of a list"},
           {R"({"devices": {"count": 2, "name": "g"}, "links": {"bandwidth": 1e9}})", "names one device of a list"},
           {R"({"devices": {"count": 2}, "links": {"bandwidth": 1e9, "bandwidth": 2e9}})",
            "m.json: the key \"bandwidth\" appears twice in one object"},
           {R"({"devices": [{"name": "a"}, {"name": "b"}, {"name": "a"}], "links": {"bandwidth": 1e9}})",
            "devices 0 and 2 are both named 'a'; device names must differ"}}) {
    INFO(text);
    CHECK_THROWS_WITH(go::parse_cluster(text, "m.json"), Catch::StartsWith("m.json: ") && Catch::Contains(says));
  }
  // the same devices with distinct names are fine
  CHECK(go::parse_cluster(R"({"devices": [{"name": "a"}, {"name": "b"}, {"name": "c"}], "links": {"bandwidth": 1e9}})", "m.json")
            .num_devices() == 3);
}

TEST_CASE("heterogeneous devices use their own op costs", "[sim]") {
  Tiny t;
  t.op("x", -1, {4}, {}, 0, go::OpKind::input);
  go::OpSpec mm;
  mm.name = "mm";
  mm.kind = go::OpKind::matmul;
  mm.flops = 1e10;
  go::TensorSpec out;
  out.shape = {1};
  mm.outputs.push_back(out);
  mm.inputs.push_back({0, 0});
  t.b.add_op(mm);
  const go::OpGraph g = t.build();
  const go::Cluster c = go::load_cluster(kData + "/mixed.json");
  go::Simulator sim(g, c);
  CHECK(sim.op_cost(1, 0) == go::op_time(g.op(1), c.spec(0)));
  CHECK(sim.op_cost(1, 1) == go::op_time(g.op(1), c.spec(1)));
  CHECK(sim.op_cost(1, 1) > sim.op_cost(1, 0));
  CHECK(sim.simulate(placed({1, 1})).step_time == Approx(sim.op_cost(1, 1)));
}

TEST_CASE("training graphs: colocate() repairs a plan, updates follow their weights", "[sim]") {
  go::GraphBuilder b;
  go::OpSpec x;
  x.name = "x";
  x.kind = go::OpKind::input;
  go::TensorSpec ts;
  ts.shape = {32, 256};
  x.outputs.push_back(ts);
  b.add_op(x);
  for (int i = 1; i <= 4; ++i) {
    go::OpSpec s;
    s.name = "fc" + std::to_string(i);
    s.kind = go::OpKind::matmul;
    s.flops = 2.0 * 32 * 256 * 256;
    s.param_bytes = 256 * 256 * 4;
    s.outputs.push_back(ts);
    s.inputs.push_back({i - 1, 0});
    b.add_op(s);
  }
  const go::OpGraph fwd = b.build();
  const go::OpGraph g = go::make_training_graph(fwd);
  go::Simulator sim(g, go::cluster_preset("v100x2"));
  go::Plan p;
  p.device.resize(static_cast<std::size_t>(g.num_ops()));
  for (go::OpId i = 0; i < g.num_ops(); ++i) p.device[static_cast<std::size_t>(i)] = i % 2;
  go::SimWorkspace ws = sim.make_workspace();
  CHECK(sim.simulate(p, ws).status == go::SimStatus::colocation_split);
  go::colocate(g, p);
  CHECK(go::check_plan(g, p, 2) == "");
  const go::SimResult& r = sim.simulate(p, ws);
  REQUIRE(r.valid);
  CHECK(r.transfers > 0);
  // weights (4 x 256 KB) + momentum (4 x 256 KB) are resident
  CHECK(r.resident_memory[0] + r.resident_memory[1] == 8 * 256 * 256 * 4);
}

TEST_CASE("Chrome trace: one track per device and per used link", "[sim]") {
  Tiny t;
  t.op("a", 1, {1000000});
  t.op("b", 2, {10}, {{0, 0}});
  t.op("c", 3, {10}, {{0, 0}});
  const go::OpGraph g = t.build();
  go::Simulator sim(g, test_cluster(2));
  go::SimWorkspace ws = sim.make_workspace();
  ws.set_record_memory(true);
  const go::Plan p = placed({0, 0, 1});
  sim.simulate(p, ws);
  const nlohmann::json j = go::chrome_trace(sim, p, ws);
  REQUIRE(j.contains("traceEvents"));
  int ops = 0, transfers = 0, counters = 0;
  std::vector<std::string> threads;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X" && e["pid"] == 0) ++ops;
    if (e["ph"] == "X" && e["pid"] == 1) {
      ++transfers;
      CHECK(e["name"] == "a:0");
      CHECK(e["ts"].get<double>() == Approx(1000));
      CHECK(e["dur"].get<double>() == Approx(1100));
      CHECK(e["args"]["bytes"] == 1000000);
      CHECK(e["args"]["producer"] == 0);
    }
    if (e["ph"] == "X" && e["pid"] == 0) CHECK(g.name(e["args"]["index"].get<go::OpId>()) == e["name"]);
    if (e["ph"] == "C") ++counters;
    if (e["ph"] == "M" && e["name"] == "thread_name") threads.push_back(e["args"]["name"]);
  }
  CHECK(ops == 3);
  CHECK(transfers == 1);
  CHECK(counters > 0);
  CHECK(threads == std::vector<std::string>{"gpu0 (test)", "gpu1 (test)", "gpu0 -> gpu1"});
  CHECK(j["otherData"]["step_time_ms"].get<double>() == Approx(5.1));  // c: 2.1-5.1 ms
}

TEST_CASE("Chrome trace: a unit's index is its OpId, also in a training graph", "[sim]") {
  const go::OpGraph g = go::make_training_graph(go::load_graph("zoo:rnnlm2:seq=3"));
  go::Simulator sim(g, go::cluster_preset("v100x2"));
  go::SimWorkspace ws = sim.make_workspace();
  go::Plan p;
  p.device.resize(static_cast<std::size_t>(g.num_ops()));
  for (go::OpId i = 0; i < g.num_ops(); ++i) p.device[static_cast<std::size_t>(i)] = i < g.num_ops() / 2 ? 0 : 1;
  go::colocate(g, p);
  REQUIRE(sim.simulate(p, ws).valid);
  const nlohmann::json j = go::chrome_trace(sim, p, ws);
  int units = 0, other_source = 0, transfers = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X") continue;
    if (e["pid"] == 1) {
      const auto producer = e["args"]["producer"].get<go::OpId>();
      CHECK(e["name"].get<std::string>().rfind(g.name(producer) + ":", 0) == 0);
      ++transfers;
      continue;
    }
    const auto i = e["args"]["index"].get<go::OpId>();
    CHECK(g.name(i) == e["name"].get<std::string>());  // unfused: the name alone
    CHECK(e["tid"] == p.device[static_cast<std::size_t>(i)]);
    other_source += e["args"]["op"].get<std::int64_t>() != i ? 1 : 0;
    ++units;
  }
  CHECK(units > 0);
  CHECK(transfers > 0);
  CHECK(other_source > 0);  // source ids are not indices here, so the check above reads "index"
}

// The critical path (go/sim/critical_path.hpp) on hand-timed steps, then its invariants on
// random and fused plans of a training graph.
TEST_CASE("critical path: a hand-off, device order, a busy link", "[sim]") {
  const go::Cluster c = test_cluster(2);
  {  // a (1 ms) on gpu0; b (2 ms) reads it there, c (3 ms) on gpu1: a's 1 MB goes over 1.0-2.1 ms
    Tiny t;
    t.op("a", 1, {1000000});
    t.op("b", 2, {10}, {{0, 0}});
    t.op("c", 3, {10}, {{0, 0}});
    const go::OpGraph g = t.build();
    go::Simulator sim(g, c);
    go::SimWorkspace ws = sim.make_workspace();
    const go::Plan p = placed({0, 0, 1});
    REQUIRE(sim.simulate(p, ws).step_time == Approx(5.1e-3));
    const go::StepPath cp = go::step_critical_path(sim, p, ws);
    REQUIRE(cp.units.size() == 2);
    CHECK(cp.units[0].unit == 2);
    CHECK(cp.units[0].link == go::PathLink::transfer);
    CHECK(cp.units[0].ready == Approx(2.1e-3));
    CHECK(cp.units[1].unit == 0);
    CHECK(cp.units[1].link == go::PathLink::start);
    CHECK(cp.compute == Approx(4e-3));
    CHECK(cp.transfers == Approx(1.1e-3));
    CHECK(cp.link_wait == Approx(0).margin(1e-12));
    CHECK(cp.gaps == Approx(0).margin(1e-12));
    CHECK(cp.end == Approx(5.1e-3));
    CHECK(cp.links(go::PathLink::transfer) == 1);
    REQUIRE(cp.compute_by_device.size() == 2);
    CHECK(cp.compute_by_device[0] == Approx(1e-3));
    CHECK(cp.compute_by_device[1] == Approx(3e-3));
    // all on gpu0: b and c both wait for a, and the later of them for the other
    const go::Plan q = placed({0, 0, 0});
    REQUIRE(sim.simulate(q, ws).step_time == Approx(6e-3));
    const go::StepPath cq = go::step_critical_path(sim, q, ws);
    REQUIRE(cq.units.size() == 3);
    CHECK(cq.units[0].link == go::PathLink::device);
    CHECK(cq.units[1].link == go::PathLink::data);
    CHECK(cq.units[2].unit == 0);
    CHECK(cq.compute == Approx(6e-3));
    CHECK(cq.links(go::PathLink::device) == 1);
    CHECK(cq.links(go::PathLink::data) == 1);
  }
  {  // a (1 ms) has two 1 MB outputs, read on gpu1 by b and c (1 ms each): one waits for the link
    Tiny t;
    t.op("a", 1, {1000000, 1000000});
    t.op("b", 1, {10}, {{0, 0}});
    t.op("c", 1, {10}, {{0, 1}});
    const go::OpGraph g = t.build();
    go::Simulator sim(g, c);
    go::SimWorkspace ws = sim.make_workspace();
    const go::Plan p = placed({0, 1, 1});
    REQUIRE(sim.simulate(p, ws).step_time == Approx(4.2e-3));
    const go::StepPath cp = go::step_critical_path(sim, p, ws);
    REQUIRE(cp.units.size() == 2);
    CHECK(cp.units[0].link == go::PathLink::transfer);
    CHECK(cp.compute == Approx(2e-3));
    CHECK(cp.transfers == Approx(1.1e-3));
    CHECK(cp.link_wait == Approx(1.1e-3));  // the second transfer starts when the first ends
    CHECK(cp.gaps == Approx(0).margin(1e-12));
  }
}

TEST_CASE("critical path: parts add up to the step on random and fused plans", "[sim]") {
  const go::OpGraph g = go::make_training_graph(go::load_graph("zoo:transformer_xl2:seq=8"));
  const go::Cluster c = go::cluster_preset("v100x4");
  go::Simulator sim(g, c);
  go::SimWorkspace ws = sim.make_workspace();
  go::Rng rng(7);
  for (int k = 0; k < 12; ++k) {
    go::Plan p;
    p.device.resize(static_cast<std::size_t>(g.num_ops()));
    // runs of ops on one device (per-op random devices would make every edge a hand-off)
    std::int32_t d = 0;
    for (auto& x : p.device) {
      if (rng.uniform_double() < 0.01) d = static_cast<std::int32_t>(rng.uniform_int(4));
      x = d;
    }
    go::colocate(g, p);
    if (k % 2) go::apply_xla_fusion(g, p);
    if (k % 3 == 1) {
      p.priority.resize(p.device.size());
      for (auto& x : p.priority) x = static_cast<float>(rng.uniform_double());
    }
    const go::SimResult& r = sim.simulate(p, ws);
    REQUIRE(r.valid);
    const go::StepPath cp = go::step_critical_path(sim, p, ws);
    REQUIRE(!cp.units.empty());
    CHECK(cp.end == Approx(r.step_time).epsilon(1e-12));
    CHECK(cp.compute + cp.transfers + cp.link_wait + cp.gaps == Approx(r.step_time).epsilon(1e-9));
    CHECK(cp.compute <= r.step_time * (1 + 1e-12));
    CHECK(cp.link_wait >= -1e-12);
    CHECK(cp.links(go::PathLink::start) <= 1);  // only the first unit can have started unheld
    double by_device = 0;
    for (double b : cp.compute_by_device) by_device += b;
    CHECK(by_device == Approx(cp.compute));
    for (std::size_t i = 0; i < cp.units.size(); ++i) {
      const auto& u = cp.units[i];
      CHECK(u.start >= u.ready - 1e-12);  // nothing on the path starts before what let it
      CHECK(u.finish <= r.step_time * (1 + 1e-12));
      if (i > 0) CHECK(u.finish <= cp.units[i - 1].start + 1e-12);  // the path goes back in time
    }
  }
}

}  // namespace test_sim
