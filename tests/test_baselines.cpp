// Baseline optimizers (include/go/baselines): small graphs with a known optimum, memory limits,
// fusion validity, the registry, and every method on every zoo graph for 2, 4 and 8 devices.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "go/baselines/place.hpp"
#include "go/graph/load.hpp"
#include "go/graph/training.hpp"
#include "go/graph/zoo.hpp"
#include "go/sim/sim.hpp"

using Catch::Matchers::Contains;

namespace {

struct Tiny {
  go::GraphBuilder b;
  go::OpId op(const std::string& name, double ms, std::int64_t out_bytes, std::vector<go::OpId> ins = {},
              std::int64_t params = 0, go::OpKind kind = go::OpKind::matmul) {
    go::OpSpec s;
    s.name = name;
    s.kind = kind;
    s.time = ms * 1e-3;
    s.param_bytes = params;
    go::TensorSpec t;
    t.shape_known = false;
    t.bytes = out_bytes;
    s.outputs.push_back(t);
    for (go::OpId i : ins) s.inputs.push_back(go::TensorRef{i, 0});
    return b.add_op(std::move(s));
  }
  go::OpGraph build() { return b.build(); }
};

// Devices with `memory` bytes each; links 1 GB/s, 100 us.
go::Cluster test_cluster(int n, std::int64_t memory = 1LL << 40) {
  go::DeviceSpec s;
  s.name = "test";
  s.peak_flops = 1e12;
  s.mem_bandwidth = 1e9;
  s.launch_overhead = 1e-5;
  s.memory_bytes = memory;
  return go::Cluster::uniform("test", s, n, 1e9, 1e-4);
}

// "metis" only when the build links METIS (GO_WITH_METIS, cmake/baselines.cmake).
std::vector<std::string> with_metis(std::vector<std::string> v) {
  if (!go::metis_available()) std::erase(v, std::string("metis"));
  return v;
}
const std::vector<std::string> kHeuristics = with_metis({"heft", "m-etf", "m-sct", "metis"});
const std::vector<std::string> kAll =
    with_metis({"default", "human", "metis", "heft", "m-topo", "m-etf", "m-sct", "random", "anneal"});

go::PlaceOptions small_budget(std::int64_t budget = 300) {
  go::PlaceOptions o;
  o.budget = budget;
  o.seed = 7;
  return o;
}

}  // namespace

TEST_CASE("baselines: registry and errors", "[baselines]") {
  if (!go::metis_available()) WARN("built without METIS: the metis method is not tested");
  const auto names = go::place_method_names();
  for (const auto& m : kAll) CHECK(std::find(names.begin(), names.end(), m) != names.end());
  Tiny t;
  t.op("a", 1, 8);
  const go::OpGraph g = t.build();
  CHECK_THROWS_WITH(go::place("nope", g, test_cluster(2)), Contains("unknown method 'nope'") && Contains("m-etf"));
  CHECK_THROWS_WITH(go::parse_fusion_mode("tvm"), Contains("unknown fusion mode"));
  go::register_place_method({"all-on-last", "test method", [](const go::OpGraph& gr, const go::Cluster& c,
                                                               const go::PlaceOptions&, go::PlaceResult& r) {
                               r.note = "registered";
                               return go::Plan::single_device(gr.num_ops(), c.num_devices() - 1);
                             }});
  const go::PlaceResult r = go::place("all-on-last", g, test_cluster(3));
  CHECK(r.valid);
  CHECK(r.plan.device[0] == 2);
  CHECK(r.note == "registered");
  CHECK(go::place_method_list().find("all-on-last") != std::string::npos);
}

TEST_CASE("baselines: two independent chains on two devices", "[baselines]") {
  // chains a0..a4 and b0..b4, 1 ms per op, no edge between them: the optimum puts one chain per
  // device, 5 ms; one device takes 10 ms.
  Tiny t;
  go::OpId pa = -1, pb = -1;
  for (int i = 0; i < 5; ++i) {
    pa = t.op("a" + std::to_string(i), 1, 1 << 20, pa < 0 ? std::vector<go::OpId>{} : std::vector<go::OpId>{pa});
    pb = t.op("b" + std::to_string(i), 1, 1 << 20, pb < 0 ? std::vector<go::OpId>{} : std::vector<go::OpId>{pb});
  }
  const go::OpGraph g = t.build();
  const go::Cluster c = test_cluster(2);
  CHECK(go::place("default", g, c).step_time == Approx(10e-3));
  for (const auto& m : kHeuristics) {
    INFO(m);
    const go::PlaceResult r = go::place(m, g, c);
    CHECK(r.valid);
    CHECK(r.step_time == Approx(5e-3));
  }
  for (const auto& m : {"random", "anneal"}) {
    INFO(m);
    const go::PlaceResult r = go::place(m, g, c, small_budget());
    CHECK(r.valid);
    CHECK(r.simulations == 300);
    CHECK(r.step_time == Approx(5e-3));
  }
  // m-TOPO fills device 0 to total/k + the largest op (Baechi's cap) in depth-first order: the first
  // chain and one op of the second, which then runs after a0 on device 0 and sends its output: the
  // documented approximation is between the optimum and one device.
  const go::PlaceResult topo = go::place("m-topo", g, c);
  CHECK(topo.valid);
  CHECK(topo.plan.device[1] == 0);  // b0 (op 1) joins chain a
  int on0 = 0;
  for (auto d : topo.plan.device) on0 += d == 0;
  CHECK(on0 == 6);
  CHECK(topo.step_time < 7.5e-3);
}

TEST_CASE("baselines: a diamond", "[baselines]") {
  // a -> {b, c} -> d; b and c take 10 ms each, tensors of 1 KB (a transfer costs ~0.1 ms): the
  // optimum runs b and c on different devices, ~0.2 ms of transfers + 20.2 ms of compute... i.e.
  // about 10.4 ms against 20.2 ms on one device.
  Tiny t;
  const auto a = t.op("a", 0.1, 1000);
  const auto b = t.op("b", 10, 1000, {a});
  const auto c = t.op("c", 10, 1000, {a});
  t.op("d", 0.1, 1000, {b, c});
  const go::OpGraph g = t.build();
  const go::Cluster cl = test_cluster(2);
  const double one = go::place("default", g, cl).step_time;
  CHECK(one == Approx(20.2e-3));
  for (const auto& m : {"heft", "m-etf", "m-sct", "anneal", "random"}) {
    INFO(m);
    const go::PlaceResult r = go::place(m, g, cl, small_budget(100));
    CHECK(r.valid);
    CHECK(r.plan.device[static_cast<std::size_t>(b)] != r.plan.device[static_cast<std::size_t>(c)]);
    CHECK(r.step_time < 10.5e-3);
  }
  // with 1 GB tensors on the branches the transfers (1 s) dominate: one device is optimal
  Tiny t2;
  const auto a2 = t2.op("a", 0.1, 1000000000);
  const auto b2 = t2.op("b", 10, 1000000000, {a2});
  const auto c2 = t2.op("c", 10, 1000000000, {a2});
  t2.op("d", 0.1, 1000, {b2, c2});
  const go::OpGraph g2 = t2.build();
  // (METIS is left out: its compute balance is a hard constraint, so it always splits b and c.)
  for (const auto& m : {"heft", "m-etf", "m-sct", "anneal", "random"}) {
    INFO(m);
    const go::PlaceResult r = go::place(m, g2, cl, small_budget(100));
    CHECK(r.step_time == Approx(20.2e-3));
  }
}

TEST_CASE("baselines: a chain that does not fit one device", "[baselines]") {
  // 4 ops of 400 MB parameters each, devices of 1 GB: one device is out of memory; two devices
  // hold two ops each (the optimum: one cut).
  Tiny t;
  go::OpId p = -1;
  for (int i = 0; i < 4; ++i)
    p = t.op("l" + std::to_string(i), 1, 1 << 20, p < 0 ? std::vector<go::OpId>{} : std::vector<go::OpId>{p}, 400000000);
  const go::OpGraph g = t.build();
  const go::Cluster c = test_cluster(2, 1000000000);
  const go::PlaceResult d = go::place("default", g, c);
  CHECK_FALSE(d.valid);
  CHECK(d.status == go::SimStatus::out_of_memory);
  CHECK_THAT(d.reason, Contains("out of memory"));
  for (const auto& m : with_metis({"human", "metis", "heft", "m-topo", "m-etf", "m-sct", "random", "anneal"})) {
    INFO(m);
    const go::PlaceResult r = go::place(m, g, c, small_budget(200));
    CHECK(r.valid);
    int cuts = 0;
    for (int i = 0; i + 1 < 4; ++i) cuts += r.plan.device[static_cast<std::size_t>(i)] != r.plan.device[static_cast<std::size_t>(i) + 1];
    CHECK(cuts == 1);
  }
  // on one device nothing fits: every method says so
  for (const auto& m : {"m-etf", "heft", "m-topo"}) {
    const go::PlaceResult r = go::place(m, g, test_cluster(1, 1000000000));
    CHECK_FALSE(r.valid);
    CHECK(r.status == go::SimStatus::out_of_memory);
    CHECK_THAT(r.note, Contains("memory estimate"));
  }
}

TEST_CASE("baselines: list schedulers emit priorities in schedule order", "[baselines]") {
  Tiny t;
  const auto a = t.op("a", 1, 1000);
  const auto b = t.op("b", 1, 1000, {a});
  const auto c = t.op("c", 5, 1000, {a});
  t.op("d", 1, 1000, {b, c});
  const go::OpGraph g = t.build();
  for (const auto& m : {"heft", "m-etf", "m-sct"}) {
    INFO(m);
    const go::PlaceResult r = go::place(m, g, test_cluster(1));
    REQUIRE(r.plan.has_priority());
    for (go::OpId v = 0; v < g.num_ops(); ++v)
      for (go::OpId w : g.succ(v)) CHECK(r.plan.priority[static_cast<std::size_t>(v)] > r.plan.priority[static_cast<std::size_t>(w)]);
    // HEFT's upward rank runs the long branch c before b
    if (std::string(m) == "heft") CHECK(r.plan.priority[static_cast<std::size_t>(c)] > r.plan.priority[static_cast<std::size_t>(b)]);
  }
}

TEST_CASE("baselines: xla fusion is valid and saves launches", "[baselines][fusion]") {
  go::ZooOptions o;
  o.batch = 2;
  o.seq = 4;
  o.hidden = 32;
  const go::OpGraph g = go::make_training_graph(go::make_zoo_graph("rnnlm2", o));
  const go::Cluster c = go::cluster_preset("v100x4");
  for (const auto& m : {"default", "human", "m-etf"}) {
    INFO(m);
    go::PlaceOptions po;
    const go::PlaceResult plain = go::place(m, g, c, po);
    po.fusion = go::FusionMode::xla;
    const go::PlaceResult fused = go::place(m, g, c, po);
    REQUIRE(fused.plan.has_fusion());
    CHECK(go::check_plan(g, fused.plan, c.num_devices()).empty());
    CHECK(fused.valid);
    go::Simulator sim(g, c);
    auto ws = sim.make_workspace();
    const auto launches_plain = sim.simulate(plain.plan, ws).kernel_launches;
    const auto launches_fused = sim.simulate(fused.plan, ws).kernel_launches;
    CHECK(launches_fused < launches_plain);
    CHECK(fused.step_time <= plain.step_time * 1.001);
  }
}

TEST_CASE("baselines: every method on every zoo graph for 2, 4 and 8 devices", "[baselines][zoo]") {
  // Small zoo sizes keep this to seconds (the default sizes are measured in bench/README.baselines.md).
  // Every method gives a plan the simulator accepts; on these sizes every graph fits one device, so
  // every plan must fit.
  for (const auto& name : go::zoo_names()) {
    go::ZooOptions o;
    o.batch = 2;
    if (name.rfind("rnnlm", 0) == 0 || name.rfind("gnmt", 0) == 0) {
      o.seq = 4;
      o.hidden = 32;
      o.vocab = 100;
    } else if (name.rfind("transformer_xl", 0) == 0) {
      o.seq = 8;
      o.hidden = 32;
      o.segments = 2;
      o.vocab = 50;
    } else if (name.rfind("wavenet", 0) == 0) {
      o.seq = 64;
      o.segments = 2;
      o.depth = 4;
      o.hidden = 8;
    } else if (name == "amoebanet") {
      o.depth = 1;
      o.hidden = 8;
      o.image = 128;
    } else {
      o.image = 160;
    }
    const go::OpGraph g = go::make_training_graph(go::make_zoo_graph(name, o));
    for (int k : {2, 4, 8}) {
      const go::Cluster c = go::cluster_preset("v100x" + std::to_string(k));
      for (const auto& m : kAll) {
        INFO(name << " on " << k << " devices: " << m);
        const go::PlaceResult r = go::place(m, g, c, small_budget(20));
        CHECK(r.valid);
        CHECK(std::isfinite(r.step_time));
        CHECK(go::check_plan(g, r.plan, k).empty());
        std::set<std::int32_t> used(r.plan.device.begin(), r.plan.device.end());
        if (m == "default") CHECK(used.size() == 1);
      }
    }
  }
}

TEST_CASE("baselines: human uses the dnn-partitioning expert split next to the graph", "[baselines][real]") {
  const std::string root = std::string(GO_SHARED_DIR) + "/real-data/msr-fiddle-dnn-partitioning";
  const go::OpGraph g = go::load_graph(root + "/throughput-inputs/LayerGraphs/gnmt_training.json");
  const go::PlaceResult six = go::place("human", g, go::cluster_preset("v100x6"));
  CHECK_THAT(six.note, Contains("expert split gnmt_training_expert.json"));
  CHECK(six.valid);
  CHECK(six.plan.device == go::load_plan(root + "/human-experts/gnmt_training_expert.json", g).device);
  // the split uses 6 devices: on 4 the generic rule applies, and says so
  const go::PlaceResult four = go::place("human", g, go::cluster_preset("v100x4"));
  CHECK_THAT(four.note, Contains("generic rule"));
  CHECK(four.valid);
}

TEST_CASE("baselines: the seed makes random choices reproducible", "[baselines]") {
  go::ZooOptions o;
  o.batch = 2;
  o.seq = 4;
  o.hidden = 32;
  const go::OpGraph g = go::make_training_graph(go::make_zoo_graph("gnmt2", o));
  const go::Cluster c = go::cluster_preset("v100x4");
  for (const auto& m : with_metis({"random", "anneal", "metis"})) {
    INFO(m);
    const auto a = go::place(m, g, c, small_budget(30));
    const auto b = go::place(m, g, c, small_budget(30));
    CHECK(a.plan.device == b.plan.device);
    CHECK(a.plan.priority == b.plan.priority);
    CHECK(a.step_time == b.step_time);
  }
}

TEST_CASE("baselines: every method on the default-size zoo training graphs", "[baselines][zoo]") {
  // The default sizes of bench/README.baselines.md (~5 s; random/anneal get 10 simulations). Every
  // plan passes the simulator's checks (place() throws otherwise) and is valid or out of memory with
  // the reason. Where human fits, heft and metis fit too; the other methods' out-of-memory results are
  // listed (documented failures: m-topo's last device takes the rest; m-etf/m-sct on amoebanet x2
  // stay 0.05% over after their memory feedback; default does not fit the large graphs).
  std::string oom;
  for (const auto& name : go::zoo_names()) {
    const go::OpGraph g = go::make_training_graph(go::make_zoo_graph(name));
    for (int k : {2, 4, 8}) {
      const go::Cluster c = go::cluster_preset("v100x" + std::to_string(k));
      const bool human_fits = go::place("human", g, c).valid;
      for (const auto& m : kAll) {
        INFO(name << " on " << k << " devices: " << m);
        const go::PlaceResult r = go::place(m, g, c, small_budget(10));
        CHECK((r.valid || r.status == go::SimStatus::out_of_memory));
        if (!r.valid) {
          CHECK_THAT(r.reason, Contains("out of memory"));
          oom += " " + name + "/" + std::to_string(k) + "/" + m;
        }
        if (human_fits && (m == "heft" || m == "metis")) CHECK(r.valid);
      }
    }
  }
  WARN("out of memory (graph/devices/method):" << oom);
}
