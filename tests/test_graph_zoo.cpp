// The workload zoo: every generator builds a valid graph whose weights and FLOPs match closed-form
// counts, scales with its options, and expands into a training graph.
#include <catch2/catch.hpp>

#include <string>

#include "go/graph/cost.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/load.hpp"
#include "go/graph/training.hpp"
#include "go/graph/zoo.hpp"

using Catch::Matchers::Contains;

TEST_CASE("zoo: every workload builds, validates and trains", "[graph][zoo]") {
  for (const auto& name : go::zoo_names()) {
    INFO(name);
    const go::OpGraph g = go::load_graph("zoo:" + name);
    CHECK_NOTHROW(g.validate());
    CHECK(g.info().format == "zoo");
    CHECK(g.info().name == name);
    CHECK(g.num_ops() > 200);
    const auto st = go::graph_stats(g);
    CHECK(st.flops > 0);
    CHECK(st.param_bytes > 0);
    for (const auto& t : g.tensors()) CHECK(t.rank >= 0);
    const go::OpGraph t = go::make_training_graph(g);
    CHECK_NOTHROW(t.validate());
    // every weight variable gets exactly one update op
    int updates = 0;
    for (const go::Op& o : t.ops()) updates += o.role == go::OpRole::update;
    CHECK(updates == g.num_params());
    CHECK(go::graph_stats(t).flops > 2.0 * st.flops);
  }
  REQUIRE_THROWS_WITH(go::load_graph("zoo:alexnet9000"), Contains("zoo:alexnet9000") && Contains("rnnlm"));
}

TEST_CASE("zoo: closed-form sizes", "[graph][zoo]") {
  SECTION("rnnlm") {
    go::ZooOptions o;
    o.batch = 4;
    o.layers = 2;
    o.seq = 10;
    o.hidden = 32;
    const go::OpGraph g = go::make_zoo_graph("rnnlm", o);
    const double V = 32000, H = 32, B = 4, S = 10;
    // weights: embedding, 2 x (kernel [2H, 4H] + bias), softmax kernel + bias
    CHECK(go::graph_stats(g).param_bytes == static_cast<std::int64_t>(4 * (V * H + 2 * (8 * H * H + 4 * H) + H * V + V)));
    double gate_flops = 0;
    int cells = 0;
    for (const go::Op& o2 : g.ops())
      if (g.name(o2.id).find("/gates") != std::string::npos) {
        gate_flops += o2.flops;
        ++cells;
      }
    CHECK(cells == 2 * 10);
    CHECK(gate_flops == S * 2 * (2 * B * 4 * H * 2 * H + B * 4 * H));
    // the weights are shared across time: each step's gate matmul reads the layer's variable
    const auto kernel = *g.find("lstm0/kernel");
    CHECK(g.op(kernel).kind == go::OpKind::constant);
    CHECK(g.out_degree(kernel) == 10);
  }
  SECTION("graphs scale with their options toward the paper's sizes") {
    go::ZooOptions o;
    o.layers = 8;
    o.seq = 100;
    const go::OpGraph g = go::make_zoo_graph("gnmt", o);
    CHECK(g.num_ops() > 20000);
    // GDP's held-out 8-layer GNMT training graph has more than 50,000 ops
    const go::OpGraph t = go::make_training_graph(g);
    CHECK(t.num_ops() > 50000);
    CHECK_NOTHROW(t.validate());
    // longer sequences reach GO's largest graphs (80,000 ops)
    o.seq = 160;
    CHECK(go::make_training_graph(go::make_zoo_graph("gnmt", o)).num_ops() > 80000);
  }
  SECTION("transformer_xl memory") {
    go::ZooOptions o;
    o.layers = 2;
    o.segments = 3;
    o.seq = 16;
    o.hidden = 64;
    o.batch = 2;
    const go::OpGraph g = go::make_zoo_graph("transformer_xl", o);
    // segments after the first attend over memory + segment (2S keys)
    const auto s0 = *g.find("seg0/layer1/scores"), s1 = *g.find("seg1/layer1/scores");
    CHECK(g.op(s1).flops == 2 * g.op(s0).flops);
    CHECK(g.find("seg1/layer0/with_memory").has_value());
    CHECK_FALSE(g.find("seg0/layer0/with_memory").has_value());
  }
}
