// Training graphs: forward + backward + update built from forward graphs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "go/graph/cost.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/io.hpp"
#include "go/graph/json.hpp"
#include "go/graph/load.hpp"
#include "go/graph/training.hpp"

namespace test_graph_training {
namespace {

go::OpSpec make_op(std::int64_t id, std::string name, go::OpKind kind, std::vector<go::TensorRef> inputs,
                   double flops = 0, std::int64_t param_bytes = 0) {
  go::OpSpec s;
  s.id = id;
  s.name = std::move(name);
  s.kind = kind;
  s.inputs = std::move(inputs);
  s.flops = flops;
  s.param_bytes = param_bytes;
  go::TensorSpec t;
  t.shape = {4, 16};
  s.outputs.push_back(t);
  return s;
}

bool reads(const go::OpGraph& g, go::OpId consumer, go::OpId producer) {
  auto p = g.pred(consumer);
  return std::find(p.begin(), p.end(), producer) != p.end();
}

go::OpId id_of(const go::OpGraph& g, const std::string& name) {
  auto id = g.find(name);
  INFO(name);
  REQUIRE(id.has_value());
  return *id;
}

}  // namespace

TEST_CASE("training: gradient ops, accumulation, updates and saved activations", "[graph][training]") {
  // x -> conv -> relu -> {fa, fb} -> add -> (sink)
  go::GraphBuilder b;
  b.add_op(make_op(0, "x", go::OpKind::input, {}));
  b.add_op(make_op(1, "conv", go::OpKind::conv, {{0, 0}}, 1000, 256));
  b.add_op(make_op(2, "relu", go::OpKind::relu, {{1, 0}}, 64));
  auto fa = make_op(3, "fa", go::OpKind::matmul, {{2, 0}}, 2000, 1024);
  fa.colocation = 7;
  b.add_op(fa);
  b.add_op(make_op(4, "fb", go::OpKind::matmul, {{2, 0}}, 3000, 1024));
  b.add_op(make_op(5, "add", go::OpKind::add, {{3, 0}, {4, 0}}, 64));
  const go::OpGraph fwd = b.build();
  go::TrainingOptions opts;
  opts.optimizer = go::Optimizer::adam;
  const go::OpGraph g = go::make_training_graph(fwd, opts);
  CHECK_NOTHROW(g.validate());
  CHECK(g.info().training);
  // forward ops are kept as they were (same dense ids and names)
  for (go::OpId i = 0; i < fwd.num_ops(); ++i) {
    CHECK(g.name(i) == fwd.name(i));
    CHECK(g.op(i).role == go::OpRole::forward);
    CHECK(g.op(i).flops == fwd.op(i).flops);
  }
  // one gradient op per forward op that needs a gradient; none for the data input
  CHECK_FALSE(g.find("x/grad").has_value());
  const auto conv = id_of(g, "conv"), relu = id_of(g, "relu"), a = id_of(g, "fa"), bb = id_of(g, "fb"),
             add = id_of(g, "add"), x = id_of(g, "x");
  const auto dconv = id_of(g, "conv/grad"), drelu = id_of(g, "relu/grad"), da = id_of(g, "fa/grad"),
             db = id_of(g, "fb/grad"), dadd = id_of(g, "add/grad"), loss = id_of(g, "loss"), seed = id_of(g, "loss/grad");
  for (auto d : {dconv, drelu, da, db, dadd}) {
    CHECK(g.op(d).role == go::OpRole::backward);
    CHECK(g.topo_position(d) > g.topo_position(loss));
  }
  CHECK(g.op(dconv).kind == go::OpKind::conv);
  // the loss reads the sink; the sink's gradient op reads the seed
  CHECK(reads(g, loss, add));
  CHECK(reads(g, seed, loss));
  CHECK(reads(g, dadd, seed));
  // gradient flow: add/grad -> fa/grad, fb/grad -> accumulate -> relu/grad -> conv/grad
  CHECK(reads(g, da, dadd));
  CHECK(reads(g, db, dadd));
  const auto acc = id_of(g, "relu/grad_sum");
  CHECK(g.op(acc).kind == go::OpKind::accumulate);
  CHECK(reads(g, acc, da));
  CHECK(reads(g, acc, db));
  CHECK(g.op(acc).flops == 64);  // 4x16 elements, one extra operand
  CHECK(reads(g, drelu, acc));
  CHECK(reads(g, dconv, drelu));
  // saved activations: matmul/conv gradients read their forward inputs, relu its output
  CHECK(reads(g, da, relu));
  CHECK(reads(g, dconv, x));
  CHECK(reads(g, drelu, relu));
  CHECK_FALSE(reads(g, dadd, a));  // add needs no activations
  // FLOPs: matmul grads with input + weight gradients = 2x; the first conv only needs dW = 1x
  CHECK(g.op(da).flops == 2 * 2000);
  CHECK(g.op(db).flops == 2 * 3000);
  CHECK(g.op(dconv).flops == 1000);
  CHECK(g.op(dconv).num_outputs == 1);  // only the weight gradient
  CHECK(g.op(da).num_outputs == 2);     // input gradient + weight gradient
  CHECK(g.outputs(da)[0].bytes == 4 * 16 * 4);
  CHECK(g.outputs(da)[1].bytes == 1024);
  // one update per parameter, reading its gradient, colocated with the owner of the weights
  int updates = 0;
  for (const go::Op& o : g.ops())
    if (o.role == go::OpRole::update) {
      ++updates;
      CHECK(o.kind == go::OpKind::update);
      REQUIRE(g.in_degree(o.id) == 1);
      const go::OpId grad = g.pred(o.id)[0];
      CHECK(g.op(grad).role == go::OpRole::backward);
      const go::OpId owner = *g.find(g.name(grad).substr(0, g.name(grad).size() - 5));
      CHECK(o.colocation == g.op(owner).colocation);
      CHECK(o.colocation >= 0);
      CHECK(o.param_bytes == 2 * fwd.op(owner).param_bytes);  // Adam moments
    }
  CHECK(updates == fwd.num_params());
  CHECK(g.op(a).colocation == 7);  // existing groups kept
  CHECK(g.op(conv).colocation != g.op(bb).colocation);
  // the training graph survives the JSON round trip
  CHECK(go::graph_difference(g, go::parse_json_graph(go::save_json_string(g), "t.json")) == "");
}

TEST_CASE("training: resnet50 costs about 3x its forward pass", "[graph][training]") {
  const go::OpGraph fwd = go::load_graph(std::string(GO_DATA_DIR) + "/models/resnet50.onnx");
  const go::OpGraph g = go::make_training_graph(fwd);
  CHECK_NOTHROW(g.validate());
  const auto f = go::graph_stats(fwd), t = go::graph_stats(g);
  const double ratio = t.flops / f.flops;
  INFO("training / forward FLOPs " << ratio);
  CHECK(ratio > 2.8);
  CHECK(ratio < 3.1);
  int grads = 0, updates = 0;
  for (const go::Op& o : g.ops()) {
    grads += o.role == go::OpRole::backward && o.kind == go::OpKind::conv;
    updates += o.role == go::OpRole::update;
  }
  CHECK(grads == f.kind_counts[go::op_kind_index(go::OpKind::conv)]);
  CHECK(updates == fwd.num_params());
  // momentum state doubles the resident bytes of the weights
  CHECK(t.param_bytes == 2 * f.param_bytes);
  CHECK(t.critical.time > f.critical.time);
}

TEST_CASE("training: PipeDream backward times and already-expanded graphs", "[graph][training]") {
  const std::string base = std::string(GO_DATA_DIR) + "/real-data/";
  const go::OpGraph fwd = go::load_graph(base + "msr-fiddle-pipedream/resnet18/graph.txt");
  const go::OpGraph g = go::make_training_graph(fwd);
  CHECK_NOTHROW(g.validate());
  double bwd = 0, measured = 0;
  for (const go::Op& o : fwd.ops()) bwd += o.backward_time;
  for (const go::Op& o : g.ops())
    if (o.role == go::OpRole::backward && o.has_time()) measured += o.time;
  CHECK(measured == Approx(bwd).epsilon(1e-12));
  // dnn-partitioning training graphs already hold their backward ops: returned as they are
  const go::OpGraph dp =
      go::load_graph(base + "msr-fiddle-dnn-partitioning/throughput-inputs/OperatorGraphs/bert_l-3_training.json");
  const go::OpGraph dt = go::make_training_graph(dp);
  CHECK(dt.num_ops() == dp.num_ops());
  CHECK(dt.num_edges() == dp.num_edges());
  CHECK(dt.info().training);
}

TEST_CASE("training: no optimizer, and integer values carry no gradient", "[graph][training]") {
  // x -> fc -> {shape (an i64 size read off fc's output), act}; act reads both
  go::GraphBuilder b;
  b.add_op(make_op(0, "x", go::OpKind::input, {}));
  b.add_op(make_op(1, "fc", go::OpKind::matmul, {{0, 0}}, 1000, 256));
  auto shape = make_op(2, "shape", go::OpKind::reshape, {{1, 0}});
  shape.outputs[0].dtype = go::ElemType::i64;
  shape.outputs[0].shape = {2};
  b.add_op(shape);
  b.add_op(make_op(3, "act", go::OpKind::mul, {{1, 0}, {2, 0}}, 64));
  const go::OpGraph fwd = b.build();
  go::TrainingOptions none;
  none.optimizer = go::Optimizer::none;
  const go::OpGraph g = go::make_training_graph(fwd, none);
  CHECK_NOTHROW(g.validate());
  CHECK_FALSE(g.find("shape/grad").has_value());
  // fc's output has one gradient contribution (act's), so no accumulate op sums it
  int accumulates = 0, updates = 0;
  for (const go::Op& o : g.ops()) {
    accumulates += o.kind == go::OpKind::accumulate;
    updates += o.role == go::OpRole::update;
  }
  CHECK(accumulates == 0);
  CHECK(updates == 0);
  CHECK(go::graph_stats(g).param_bytes == 256);  // no optimizer state
  CHECK(reads(g, id_of(g, "fc/grad"), id_of(g, "act/grad")));
  // the default optimizer (momentum) adds an update op for fc's weights
  const go::OpGraph m = go::make_training_graph(fwd);
  CHECK(m.find("fc/update").has_value());
}

TEST_CASE("training: program order runs forward depth-first and backward in its mirror", "[graph][training]") {
  // x -> a1 -> a2 -> sum, x -> b1 -> b2 -> sum: two branches, as two segments of a wide model
  go::GraphBuilder b;
  b.add_op(make_op(0, "x", go::OpKind::input, {}));
  b.add_op(make_op(1, "a1", go::OpKind::matmul, {{0, 0}}, 1000, 256));
  b.add_op(make_op(2, "a2", go::OpKind::relu, {{1, 0}}, 64));
  b.add_op(make_op(3, "b1", go::OpKind::matmul, {{0, 0}}, 1000, 256));
  b.add_op(make_op(4, "b2", go::OpKind::relu, {{3, 0}}, 64));
  b.add_op(make_op(5, "sum", go::OpKind::add, {{2, 0}, {4, 0}}, 64));
  const go::OpGraph fwd = b.build();
  const go::OpGraph g = go::make_training_graph(fwd);
  const std::vector<go::OpId> seq = go::program_order(g);
  REQUIRE(seq.size() == static_cast<std::size_t>(g.num_ops()));
  std::vector<int> at(seq.size(), -1);
  for (std::size_t i = 0; i < seq.size(); ++i) {
    REQUIRE(at[static_cast<std::size_t>(seq[i])] == -1);  // a permutation
    at[static_cast<std::size_t>(seq[i])] = static_cast<int>(i);
  }
  auto pos = [&](const std::string& name) { return at[static_cast<std::size_t>(id_of(g, name))]; };
  // forward: one branch to its end before the other (first-ready would run a1, b1, a2, b2)
  CHECK(pos("x") < pos("a1"));
  CHECK(pos("a1") + 1 == pos("a2"));
  CHECK(pos("a2") + 1 == pos("b1"));
  CHECK(pos("b1") + 1 == pos("b2"));
  // every forward op before every gradient or update op
  int last_forward = -1, first_other = static_cast<int>(seq.size());
  for (const go::Op& o : g.ops()) {
    const int p = at[static_cast<std::size_t>(o.id)];
    if (o.role == go::OpRole::forward)
      last_forward = std::max(last_forward, p);
    else
      first_other = std::min(first_other, p);
  }
  CHECK(last_forward < first_other);
  // backward mirrors the forward: the later branch's gradients first, each branch from its end
  CHECK(pos("b2/grad") < pos("b1/grad"));
  CHECK(pos("b1/grad") < pos("a2/grad"));
  CHECK(pos("a2/grad") < pos("a1/grad"));
  // an update reads no forward activation: it runs right after the gradient it applies
  CHECK(pos("b1/grad") < pos("b1/update"));
  CHECK(pos("b1/update") < pos("a2/grad"));
  // a forward graph's program order is its depth-first order
  CHECK(go::program_order(fwd) == go::depth_first_topo_order(fwd));
  // empty graph
  CHECK(go::program_order(go::GraphBuilder().build()).empty());
}

TEST_CASE("graph: depth-first order with the weights first runs one stream through every layer", "[graph]") {
  // two streams (x0, x1) through two layers whose weights (w1, w2) are made with their layer, as a
  // model's code makes them: without the weights first, w2 is reached only after both streams'
  // first layer, so the search goes layer by layer
  go::GraphBuilder b;
  b.add_op(make_op(0, "x0", go::OpKind::input, {}));
  b.add_op(make_op(1, "x1", go::OpKind::input, {}));
  b.add_op(make_op(2, "w1", go::OpKind::input, {}));
  b.add_op(make_op(3, "a0", go::OpKind::matmul, {{0, 0}, {2, 0}}, 1000, 64));
  b.add_op(make_op(4, "a1", go::OpKind::matmul, {{1, 0}, {2, 0}}, 1000, 64));
  b.add_op(make_op(5, "w2", go::OpKind::constant, {}));
  b.add_op(make_op(6, "b0", go::OpKind::matmul, {{3, 0}, {5, 0}}, 1000, 64));
  b.add_op(make_op(7, "b1", go::OpKind::matmul, {{4, 0}, {5, 0}, {3, 0}}, 1000, 64));  // reads a0 too
  const go::OpGraph g = b.build();
  auto names = [&](const std::vector<go::OpId>& order) {
    std::string out;
    for (go::OpId v : order) out += (out.empty() ? "" : " ") + g.name(v);
    return out;
  };
  CHECK(names(go::depth_first_topo_order(g)) == "x0 x1 w1 a0 a1 w2 b0 b1");
  CHECK(names(go::depth_first_topo_order(g, true)) == "x0 x1 w1 w2 a0 b0 a1 b1");
  // an op with no input that is not a source (a random-number op) is searched from, not put first
  go::GraphBuilder b2;
  b2.add_op(make_op(0, "w", go::OpKind::input, {}));
  b2.add_op(make_op(1, "noise", go::OpKind::elementwise, {}, 0, 64));
  b2.add_op(make_op(2, "y", go::OpKind::add, {{0, 0}, {1, 0}}, 16, 64));
  const go::OpGraph g2 = b2.build();
  CHECK(g2.name(go::depth_first_topo_order(g2, true)[0]) == "w");
  CHECK(go::depth_first_topo_order(g2, true).size() == 3);
  CHECK(go::depth_first_topo_order(go::GraphBuilder().build(), true).empty());
}

}  // namespace test_graph_training
