// Graph IR: construction, CSR adjacency, topological order, validation errors, cost model, the JSON
// format's round trip, and bad input files (each error is one line naming the file).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "go/graph/cost.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/io.hpp"
#include "go/graph/json.hpp"
#include "go/graph/load.hpp"

namespace test_graph {
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

go::OpSpec make_op(std::int64_t id, std::string name, go::OpKind kind, std::vector<go::TensorRef> inputs,
                   std::vector<std::int64_t> shape = {2, 8}) {
  go::OpSpec s;
  s.id = id;
  s.name = std::move(name);
  s.kind = kind;
  s.inputs = std::move(inputs);
  go::TensorSpec t;
  t.shape = std::move(shape);
  s.outputs.push_back(t);
  return s;
}

// a -> b, a -> c, b -> d, c -> d; ids are sparse and ops are added out of order.
go::OpGraph diamond() {
  go::GraphInfo info;
  info.source = "diamond";
  go::GraphBuilder b(info);
  b.add_op(make_op(10, "a", go::OpKind::input, {}));
  b.add_op(make_op(30, "c", go::OpKind::relu, {{10, 0}}));
  b.add_op(make_op(40, "d", go::OpKind::add, {{20, 0}, {30, 0}}));
  b.add_op(make_op(20, "b", go::OpKind::matmul, {{10, 0}}));
  return b.build();
}

struct TempDir {
  fs::path path;
  TempDir() {
    std::random_device rd;
    path = fs::temp_directory_path() / ("go_test_graph_" + std::to_string(rd()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string write(const std::string& name, const std::string& data) const {
    const auto p = (path / name).string();
    std::ofstream(p, std::ios::binary) << data;
    return p;
  }
};

std::string read_bytes(const std::string& p) { return go::detail::read_file(p); }

const std::string kModels = std::string(GO_DATA_DIR) + "/models/";

// load_graph(path) must throw a one-line go::Error naming the file (and `problem` when given).
void require_load_error(const std::string& path, const std::string& problem = "") {
  try {
    go::load_graph(path);
    FAIL("loading " << path << " did not throw");
  } catch (const go::Error& e) {
    const std::string msg = e.what();
    INFO(msg);
    CHECK_THAT(msg, Contains(fs::path(path).filename().string()));
    CHECK(msg.find('\n') == std::string::npos);
    if (!problem.empty()) CHECK_THAT(msg, Contains(problem));
  }
}

}  // namespace

TEST_CASE("graph: topological order and CSR in both directions", "[graph]") {
  const go::OpGraph g = diamond();
  REQUIRE(g.num_ops() == 4);
  REQUIRE(g.num_edges() == 4);
  // dense ids follow insertion order; source ids are kept
  CHECK(g.name(0) == "a");
  CHECK(g.name(3) == "b");
  CHECK(g.op(3).source_id == 20);
  CHECK(g.op(2).id == 2);
  const auto a = *g.find("a"), b = *g.find("b"), c = *g.find("c"), d = *g.find("d");
  // topological order: a first, d last, every edge forward
  auto order = g.topo_order();
  REQUIRE(order.size() == 4);
  CHECK(order.front() == a);
  CHECK(order.back() == d);
  for (go::OpId u = 0; u < g.num_ops(); ++u)
    for (go::OpId w : g.succ(u)) CHECK(g.topo_position(u) < g.topo_position(w));
  for (std::size_t k = 0; k < order.size(); ++k) CHECK(g.topo_position(order[k]) == static_cast<std::int32_t>(k));
  // out-CSR
  auto sa = std::vector<go::OpId>(g.succ(a).begin(), g.succ(a).end());
  std::sort(sa.begin(), sa.end());
  CHECK(sa == std::vector<go::OpId>{std::min(b, c), std::max(b, c)});
  CHECK(g.out_degree(a) == 2);
  CHECK(g.out_degree(d) == 0);
  CHECK(std::vector<go::OpId>(g.succ(b).begin(), g.succ(b).end()) == std::vector<go::OpId>{d});
  // in-CSR keeps operand order: d reads b then c
  CHECK(std::vector<go::OpId>(g.pred(d).begin(), g.pred(d).end()) == std::vector<go::OpId>{b, c});
  CHECK(g.in_degree(a) == 0);
  CHECK(g.pred_tensors(d)[0] == g.op(b).first_output);
  CHECK(g.succ_tensors(a)[0] == g.op(a).first_output);
  REQUIRE(g.out_offsets().size() == 5);
  CHECK(g.out_offsets().back() == 4);
  CHECK(g.in_offsets().back() == 4);
  // sizes: 2x8 f32 = 64 bytes each
  CHECK(g.op(a).output_bytes == 64);
  CHECK(g.op(d).input_bytes == 128);
  CHECK(g.tensor(g.op(d).first_output).rank == 2);
  CHECK(g.shape(g.op(d).first_output)[1] == 8);
  CHECK(g.numel(g.op(d).first_output) == 16);
  CHECK(g.inputs(d).size() == 2);
  CHECK(std::vector<go::OpId>(g.input_producers(d).begin(), g.input_producers(d).end()) == std::vector<go::OpId>{b, c});
  CHECK_NOTHROW(g.validate());
}

TEST_CASE("graph: parallel tensors, repeated operands and control edges", "[graph]") {
  go::GraphBuilder b;
  auto split = make_op(0, "split", go::OpKind::split, {});
  split.outputs.push_back(split.outputs[0]);  // two outputs
  b.add_op(split);
  b.add_op(make_op(1, "mul", go::OpKind::mul, {{0, 0}, {0, 1}, {0, 1}}));  // reads output 1 twice
  auto last = make_op(2, "after", go::OpKind::other, {});
  last.control_inputs = {1, 0};
  b.add_op(last);
  const go::OpGraph g = b.build();
  CHECK(g.inputs(1).size() == 3);                  // operand list as given
  // each operand's producer, in operand order; control inputs are not operands
  CHECK(std::vector<go::OpId>(g.input_producers(1).begin(), g.input_producers(1).end()) == std::vector<go::OpId>{0, 0, 0});
  CHECK(g.input_producers(2).empty());
  CHECK(g.input_producers(0).empty());
  CHECK(g.in_degree(1) == 2);                      // one edge per distinct tensor
  CHECK(g.op(1).input_bytes == 128);
  CHECK(g.in_degree(2) == 2);                      // control edges
  CHECK(g.pred_tensors(2)[0] == -1);
  CHECK(g.out_degree(0) == 3);
  CHECK(g.outputs(0).size() == 2);
  CHECK(g.outputs(0)[1].output_index == 1);
  CHECK(g.topo_order().back() == 2);
  CHECK_NOTHROW(g.validate());
}

TEST_CASE("graph: validation errors name the offending op", "[graph][errors]") {
  go::GraphInfo info;
  info.source = "handmade.json";
  SECTION("cycle") {
    go::GraphBuilder b(info);
    b.add_op(make_op(0, "in", go::OpKind::input, {}));
    b.add_op(make_op(1, "loop_a", go::OpKind::add, {{0, 0}, {2, 0}}));
    b.add_op(make_op(2, "loop_b", go::OpKind::relu, {{1, 0}}));
    b.add_op(make_op(3, "out", go::OpKind::relu, {{2, 0}}));
    REQUIRE_THROWS_AS(b.build(), go::Error);
    go::GraphBuilder b2(info);
    b2.add_op(make_op(0, "in", go::OpKind::input, {}));
    b2.add_op(make_op(1, "loop_a", go::OpKind::add, {{0, 0}, {2, 0}}));
    b2.add_op(make_op(2, "loop_b", go::OpKind::relu, {{1, 0}}));
    REQUIRE_THROWS_WITH(b2.build(), Contains("handmade.json") && Contains("cycle") && Contains("'loop_a'") &&
                                        Contains("'loop_b'"));
  }
  SECTION("self loop") {
    go::GraphBuilder b(info);
    b.add_op(make_op(0, "selfish", go::OpKind::relu, {{0, 0}}));
    REQUIRE_THROWS_WITH(b.build(), Contains("cycle") && Contains("'selfish'"));
  }
  SECTION("unknown reference") {
    go::GraphBuilder b(info);
    b.add_op(make_op(0, "in", go::OpKind::input, {}));
    b.add_op(make_op(1, "reader", go::OpKind::relu, {{7, 0}}));
    REQUIRE_THROWS_WITH(b.build(), Contains("handmade.json") && Contains("'reader'") && Contains("unknown op id 7"));
  }
  SECTION("unknown control reference") {
    go::GraphBuilder b(info);
    auto s = make_op(5, "waiter", go::OpKind::relu, {});
    s.control_inputs = {99};
    b.add_op(s);
    REQUIRE_THROWS_WITH(b.build(), Contains("'waiter'") && Contains("unknown op id 99"));
  }
  SECTION("output index out of range") {
    go::GraphBuilder b(info);
    b.add_op(make_op(0, "in", go::OpKind::input, {}));
    b.add_op(make_op(1, "reader", go::OpKind::relu, {{0, 3}}));
    REQUIRE_THROWS_WITH(b.build(), Contains("'reader'") && Contains("output 3") && Contains("'in'"));
  }
  SECTION("duplicate ids") {
    go::GraphBuilder b(info);
    b.add_op(make_op(4, "first", go::OpKind::input, {}));
    b.add_op(make_op(4, "second", go::OpKind::relu, {}));
    REQUIRE_THROWS_WITH(b.build(), Contains("duplicate op id 4") && Contains("'first'") && Contains("'second'"));
  }
  SECTION("negative sizes") {
    auto build_with = [&](auto&& edit) {
      go::GraphBuilder b(info);
      b.add_op(make_op(0, "in", go::OpKind::input, {}));
      auto s = make_op(1, "bad_op", go::OpKind::conv, {{0, 0}});
      edit(s);
      b.add_op(s);
      return b.build();
    };
    REQUIRE_THROWS_WITH(build_with([](go::OpSpec& s) { s.param_bytes = -4; }),
                        Contains("'bad_op'") && Contains("negative param_bytes"));
    REQUIRE_THROWS_WITH(build_with([](go::OpSpec& s) { s.temp_bytes = -1; }),
                        Contains("'bad_op'") && Contains("negative temp_bytes"));
    REQUIRE_THROWS_WITH(build_with([](go::OpSpec& s) { s.flops = -10; }), Contains("'bad_op'") && Contains("flops"));
    REQUIRE_THROWS_WITH(build_with([](go::OpSpec& s) { s.time = -0.5; }), Contains("'bad_op'") && Contains("time"));
    REQUIRE_THROWS_WITH(build_with([](go::OpSpec& s) { s.outputs[0].bytes = -8; }),
                        Contains("'bad_op'") && Contains("negative size"));
    REQUIRE_THROWS_WITH(build_with([](go::OpSpec& s) { s.outputs[0].shape = {4, -2}; }),
                        Contains("'bad_op'") && Contains("negative dimension"));
    REQUIRE_THROWS_WITH(build_with([](go::OpSpec& s) { s.params = {{"w", -16}}; }),
                        Contains("'bad_op'") && Contains("negative size"));
  }
}

TEST_CASE("graph: parameters", "[graph]") {
  go::GraphBuilder b;
  auto x = make_op(0, "x", go::OpKind::input, {});
  auto conv = make_op(1, "conv", go::OpKind::conv, {{0, 0}});
  conv.params = {{"conv.weight", 1000}, {"conv.bias", 24}};
  auto fc = make_op(2, "fc", go::OpKind::matmul, {{1, 0}});
  fc.param_bytes = 400;  // one implicit parameter named after the op
  b.add_op(x);
  b.add_op(conv);
  b.add_op(fc);
  const go::OpGraph g = b.build();
  CHECK(g.num_params() == 3);
  CHECK(g.op(1).param_bytes == 1024);
  REQUIRE(g.op_params(1).size() == 2);
  CHECK(g.op_params(1)[1].name == "conv.bias");
  CHECK(g.op_params(2)[0].name == "fc");
  CHECK(g.op_params(2)[0].op == 2);
  CHECK(g.op_params(0).empty());
  go::GraphBuilder bad;
  conv.param_bytes = 5;
  bad.add_op(x);
  bad.add_op(conv);
  REQUIRE_THROWS_WITH(bad.build(), Contains("'conv'") && Contains("add up to 1024"));
}

TEST_CASE("graph: roofline cost model, measured override, critical path", "[graph][cost]") {
  go::DeviceSpec dev;
  dev.peak_flops = 1e12;
  dev.mem_bandwidth = 1e11;
  dev.bandwidth_efficiency = 1.0;
  dev.launch_overhead = 1e-6;
  dev.compute_efficiency.fill(0.5);
  go::Op op;
  op.kind = go::OpKind::matmul;
  op.flops = 1e9;           // compute: 1e9 / (1e12 * 0.5) = 2 ms
  op.input_bytes = 1000000; // memory: 2e6 / 1e11 = 20 us
  op.output_bytes = 1000000;
  CHECK(go::op_time(op, dev) == Approx(2e-3 + 1e-6));
  op.flops = 1e3;           // now memory-bound
  CHECK(go::op_time(op, dev) == Approx(2e-5 + 1e-6));
  op.param_bytes = 2000000; // parameters are read too
  CHECK(go::op_time(op, dev) == Approx(4e-5 + 1e-6));
  op.time = 0.25;           // a measured time wins
  CHECK(go::op_time(op, dev) == 0.25);
  go::Op view;
  view.kind = go::OpKind::reshape;
  view.input_bytes = 1 << 20;
  CHECK(go::op_time(view, dev) == 0.0);
  // per-kind efficiency
  go::Op conv;
  conv.kind = go::OpKind::conv;
  conv.flops = 1e9;
  dev.compute_efficiency[go::op_kind_index(go::OpKind::conv)] = 0.25;
  CHECK(go::op_time(conv, dev) == Approx(4e-3 + 1e-6));
  CHECK(go::DeviceSpec::preset("k80").peak_flops < go::DeviceSpec::preset("v100").peak_flops);
  REQUIRE_THROWS_AS(go::DeviceSpec::preset("tpu9000"), go::Error);

  // critical path of the diamond with times a=1, b=5, c=2, d=1 -> a, b, d = 7
  const go::OpGraph g = diamond();
  std::vector<double> t(4);
  t[static_cast<std::size_t>(*g.find("a"))] = 1;
  t[static_cast<std::size_t>(*g.find("b"))] = 5;
  t[static_cast<std::size_t>(*g.find("c"))] = 2;
  t[static_cast<std::size_t>(*g.find("d"))] = 1;
  auto cp = go::critical_path(g, t);
  CHECK(cp.time == 7);
  CHECK(cp.ops == std::vector<go::OpId>{*g.find("a"), *g.find("b"), *g.find("d")});
  auto st = go::graph_stats(g);
  CHECK(st.nodes == 4);
  CHECK(st.edges == 4);
  CHECK(st.kind_counts[go::op_kind_index(go::OpKind::relu)] == 1);
  CHECK(st.activation_bytes == 4 * 64);
}

TEST_CASE("graph json: save then load gives the same graph", "[graph][json]") {
  go::GraphInfo info;
  info.name = "roundtrip";
  info.batch = 16;
  info.num_devices = 4;
  info.device_memory = 1LL << 34;
  info.num_cpus = 2;
  info.training = true;
  go::GraphBuilder b(info);
  auto x = make_op(5, "x", go::OpKind::input, {}, {16, 3, 32, 32});
  b.add_op(x);
  auto conv = make_op(7, "conv \"quoted\" name", go::OpKind::conv, {{5, 0}}, {16, 8, 32, 32});
  conv.flops = 1.0 / 3.0 * 1e9;
  conv.params = {{"w", 864}, {"b", 32}};
  conv.time = 1.2345678901234567e-4;
  conv.backward_time = 2.5e-4;
  conv.colocation = 3;
  conv.temp_bytes = 4096;
  b.add_op(conv);
  auto split = make_op(9, "split", go::OpKind::split, {{7, 0}}, {16, 4, 32, 32});
  go::TensorSpec unknown;
  unknown.shape_known = false;
  unknown.bytes = 777;
  unknown.dtype = go::ElemType::f16;
  split.outputs.push_back(unknown);
  split.role = go::OpRole::backward;
  b.add_op(split);
  auto upd = make_op(11, "update", go::OpKind::update, {{9, 1}, {9, 0}, {9, 1}}, {});
  upd.role = go::OpRole::update;
  upd.control_inputs = {7};
  upd.outputs[0].dtype = go::ElemType::i64;
  b.add_op(upd);
  const go::OpGraph g = b.build();
  const std::string text = go::save_json_string(g);
  const go::OpGraph h = go::parse_json_graph(text, "roundtrip.json");
  CHECK(go::graph_difference(g, h) == "");
  CHECK(h.op(1).time == g.op(1).time);
  CHECK(h.info().device_memory == 1LL << 34);
  // file round trip, and a second save is byte-identical
  TempDir dir;
  const auto path = (dir.path / "g.json").string();
  go::save_json(h, path);
  const go::OpGraph k = go::load_graph(path);
  CHECK(go::graph_difference(g, k) == "");
  CHECK(go::save_json_string(k) == text);
  // a real model survives the round trip too
  const go::OpGraph r = go::load_graph(kModels + "resnet18.onnx");
  const go::OpGraph r2 = go::parse_json_graph(go::save_json_string(r), "resnet18.json");
  CHECK(go::graph_difference(r, r2) == "");
  CHECK(r2.info().format == "json");
}

TEST_CASE("graph json: the annotated example loads", "[graph][json]") {
  const go::OpGraph g = go::load_graph(std::string(GO_TEST_DATA_DIR) + "/graph/example.json");
  CHECK(g.info().name == "two-layer-mlp");
  CHECK(g.info().batch == 32);
  REQUIRE(g.num_ops() == 5);
  const auto fc1 = *g.find("fc1");
  CHECK(g.op(fc1).kind == go::OpKind::matmul);
  CHECK(g.op(fc1).flops == 2.0 * 32 * 784 * 256);
  CHECK(g.op(fc1).param_bytes == (784 * 256 + 256) * 4);
  CHECK(g.op(fc1).has_time());
  CHECK(g.op(fc1).colocation == 1);
  CHECK(g.op(*g.find("relu1")).output_bytes == 32 * 256 * 4);
  const auto loss = *g.find("loss");
  CHECK(g.in_degree(loss) == 2);  // data from fc2, control from fc1
  CHECK(g.op(loss).temp_bytes == 1280);
  CHECK(g.tensor(g.op(loss).first_output).rank == 0);
  CHECK(g.op(*g.find("fc2")).param_bytes == 10280);
  CHECK(g.topo_order().back() == loss);
}

TEST_CASE("graph load: bad input files fail with one line naming the file", "[graph][errors]") {
  TempDir dir;
  const std::string onnx = read_bytes(kModels + "resnet18.onnx");
  SECTION("truncated ONNX") {
    require_load_error(dir.write("truncated.onnx", onnx.substr(0, onnx.size() / 2)), "not a valid ONNX model");
    require_load_error(dir.write("truncated_head.onnx", onnx.substr(0, 7)));
  }
  SECTION("corrupt bytes") {
    std::mt19937 rng(7);
    std::string junk(4096, '\0');
    for (auto& c : junk) c = static_cast<char>(rng() & 0xff);
    require_load_error(dir.write("corrupt.onnx", junk));
    require_load_error(dir.write("corrupt.bin", junk));  // unknown extension: tried as ONNX
  }
  SECTION("empty file") {
    for (const char* name : {"empty.onnx", "empty.json", "empty.txt", "empty"})
      require_load_error(dir.write(name, ""), "empty file");
  }
  SECTION("missing file") { require_load_error((dir.path / "nope.onnx").string(), "cannot open"); }
  SECTION("invalid JSON") {
    require_load_error(dir.write("invalid.json", R"({"format": "go-graph", "ops": [ {"id": 0,, ] })"), "invalid JSON");
    require_load_error(dir.write("truncated.json", R"({"format": "go-graph", "ops": [ {"id": 0, "na)"), "invalid JSON");
    require_load_error(dir.write("array.json", "[1, 2, 3]"));
    require_load_error(dir.write("other.json", R"({"hello": "world"})"), "unrecognized");
    require_load_error(dir.write("badfield.json", R"({"format": "go-graph", "ops": [ {"id": 0, "flops": "many"} ]})"),
                       "flops");
    require_load_error(dir.write("badkind.json", R"({"format": "go-graph", "ops": [ {"id": 0, "kind": "warp"} ]})"),
                       "unknown kind 'warp'");
  }
  SECTION("cycle") {
    require_load_error(dir.write("cycle.json", R"({"format": "go-graph", "ops": [
        {"id": 0, "name": "p", "inputs": [1], "outputs": [{"bytes": 4}]},
        {"id": 1, "name": "q", "inputs": [0], "outputs": [{"bytes": 4}]} ]})"),
                       "cycle");
  }
  SECTION("unknown reference") {
    require_load_error(dir.write("unknown_ref.json", R"({"format": "go-graph", "ops": [
        {"id": 0, "name": "p", "outputs": [{"bytes": 4}]},
        {"id": 1, "name": "q", "inputs": [[42, 0]]} ]})"),
                       "unknown op id 42");
    require_load_error(dir.write("unknown_ref_dnn.json", R"({"maxSizePerFPGA": 1000, "maxFPGAs": 2, "maxCPUs": 1,
        "nodes": [{"id": 1, "name": "a", "fpgaLatency": 1, "size": 0}],
        "edges": [{"sourceId": 1, "destId": 5, "cost": 0, "size": 4}]})"),
                       "unknown op id 5");
    require_load_error(dir.write("unknown_ref_pd.txt", "node1 -- Input0 -- forward_compute_time=0.000, "
                                                       "backward_compute_time=0.000, activation_size=4.0, "
                                                       "parameter_size=0.000\n\tnode1 -- node9\n"),
                       "unknown op node9");
  }
  SECTION("negative sizes") {
    require_load_error(dir.write("negative_output.json", R"({"format": "go-graph", "ops": [
        {"id": 0, "name": "neg", "outputs": [{"bytes": -5}]} ]})"),
                       "'neg'");
    require_load_error(dir.write("negative_param.json", R"({"format": "go-graph", "ops": [
        {"id": 0, "name": "negp", "param_bytes": -1} ]})"),
                       "negative param_bytes");
    require_load_error(dir.write("negative_shape.json", R"({"format": "go-graph", "ops": [
        {"id": 0, "name": "negs", "outputs": [{"shape": [2, -3]}]} ]})"),
                       "negative dimension");
    require_load_error(dir.write("negative_time.json", R"({"format": "go-graph", "ops": [
        {"id": 0, "name": "negt", "time": -1} ]})"),
                       "negative time");
    require_load_error(dir.write("negative_dnn.json", R"({"maxSizePerFPGA": 1000, "maxFPGAs": 2, "maxCPUs": 1,
        "nodes": [{"id": 1, "name": "a", "fpgaLatency": 1, "size": -10}], "edges": []})"),
                       "negative or invalid size");
    require_load_error(dir.write("negative_pd.txt", "node1 -- Conv2d(3, 8, kernel_size=(1, 1)) -- "
                                                    "forward_compute_time=1.0, backward_compute_time=1.0, "
                                                    "activation_size=-4.0, parameter_size=0.000\n"),
                       "negative");
  }
  SECTION("byte counts that would overflow a sum") {
    // 3 x 4e18 fits no int64 sum: the graph is refused at the op that crosses the total, so that no
    // report (parameters, a device's peak memory) can come out negative
    require_load_error(dir.write("huge_total.json", R"({"format": "go-graph", "ops": [
        {"id": 0, "name": "a", "param_bytes": 1000000000000000}, {"id": 1, "name": "b", "param_bytes": 1000000000000000},
        {"id": 2, "name": "c", "params": [{"name": "w", "bytes": 1125899906842624}]},
        )" + [] {
                         std::string more;
                         for (int i = 3; i < 70; ++i)
                           more += R"({"id": )" + std::to_string(i) + R"(, "temp_bytes": 1125899906842624},)";
                         return more;
                       }() + R"({"id": 70} ]})"),
                       "add up to more than 72057594037927936 B");
    require_load_error(dir.write("huge_param.json", R"({"format": "go-graph", "ops": [
        {"id": 0, "name": "big", "param_bytes": 4000000000000000000} ]})"),
                       "'big' (id 0) has param_bytes 4000000000000000000, more than the 1125899906842624 B");
    require_load_error(dir.write("huge_output.json", R"({"format": "go-graph", "ops": [
        {"id": 0, "name": "big", "outputs": [{"shape": [1125899906842624, 2], "dtype": "f32"}]} ]})"),
                       "too large to count its bytes");
    // at the limits: one field of exactly 2^50, and the builder's per-op sum of parameters
    const go::OpGraph g = go::load_graph(dir.write("at_limit.json", R"({"format": "go-graph", "ops": [
        {"id": 0, "params": [{"name": "w", "bytes": 1125899906842624}, {"name": "v", "bytes": 1125899906842624}]} ]})"));
    CHECK(g.op(0).param_bytes == 2 * go::kMaxBytes);
    CHECK(go::graph_stats(g).param_bytes == 2 * go::kMaxBytes);
  }
  SECTION("unknown and repeated keys") {
    // a misspelled key is an error, not an absent field read as its default
    require_load_error(dir.write("input.json", R"({"format": "go-graph", "ops": [
        {"id": 0, "name": "a"}, {"id": 1, "name": "b", "input": [0]} ]})"),
                       "op 'b' (id 1): unknown key \"input\" (known: id, name, kind, role, flops,");
    require_load_error(dir.write("flop.json", R"({"format": "go-graph", "ops": [ {"id": 0, "flop": 5} ]})"),
                       "unknown key \"flop\"");
    require_load_error(dir.write("top.json", R"({"format": "go-graph", "op": [], "ops": []})"), "unknown key \"op\"");
    require_load_error(dir.write("out.json", R"({"format": "go-graph", "ops": [ {"id": 0, "outputs": [{"byte": 4}]} ]})"),
                       "an output: unknown key \"byte\" (known: shape, dtype, bytes)");
    require_load_error(dir.write("param.json", R"({"format": "go-graph", "ops": [ {"id": 0, "params": [{"size": 4}]} ]})"),
                       "a parameter: unknown key \"size\" (known: name, bytes)");
    // JSON readers disagree on which of two equal keys counts: refused, wherever the object is
    require_load_error(dir.write("dup_top.json", R"({"format": "go-graph", "ops": [], "ops": [ {"id": 0} ]})"),
                       "the key \"ops\" appears twice in one object");
    require_load_error(dir.write("dup_op.json", R"({"format": "go-graph", "ops": [ {"id": 0, "flops": 1, "flops": 2} ]})"),
                       "the key \"flops\" appears twice");
    require_load_error(dir.write("dup_dnn.json", R"({"maxSizePerFPGA": 1000, "maxFPGAs": 2, "maxCPUs": 1,
        "nodes": [{"id": 1, "name": "a", "fpgaLatency": 1, "fpgaLatency": 2, "size": 0}], "edges": []})"),
                       "the key \"fpgaLatency\" appears twice");
    // the same key in two objects, and in nested objects, is fine
    const go::OpGraph g = go::load_graph(dir.write("ok.json", R"({"format": "go-graph", "name": "n", "ops": [
        {"id": 0, "name": "a", "outputs": [{"bytes": 4}]}, {"id": 1, "name": "b", "inputs": [0], "outputs": [{"bytes": 4}]} ]})"));
    CHECK(g.num_ops() == 2);
    CHECK(g.num_edges() == 1);
  }
  SECTION("output bytes that contradict the shape") {
    require_load_error(dir.write("bytes_shape.json", R"({"format": "go-graph", "ops": [
        {"id": 0, "name": "x", "outputs": [{"shape": [2, 3], "dtype": "f32", "bytes": 25}]} ]})"),
                       "output 0 has \"bytes\" 25 but its shape and dtype f32 hold 24 bytes");
    const go::OpGraph g = go::load_graph(dir.write("bytes_agree.json", R"({"format": "go-graph", "ops": [
        {"id": 0, "outputs": [{"shape": [2, 3], "dtype": "f16", "bytes": 12}, {"shape": null, "bytes": 25}]} ]})"));
    CHECK(g.tensor(g.op(0).first_output).bytes == 12);
    CHECK(g.tensor(g.op(0).first_output + 1).bytes == 25);
  }
  SECTION("duplicate ids") {
    require_load_error(dir.write("dup.json", R"({"format": "go-graph", "ops": [
        {"id": 3, "name": "one"}, {"id": 3, "name": "two"} ]})"),
                       "duplicate op id 3");
  }
  SECTION("malformed PipeDream") {
    require_load_error(dir.write("malformed.txt", "node1 -- Conv2d(3, 8) forward_compute_time=1.0\n"), "malformed");
    require_load_error(dir.write("badnum.txt", "node1 -- Input0 -- forward_compute_time=abc, backward_compute_time=0, "
                                               "activation_size=4.0, parameter_size=0\n"),
                       "not a finite number");
    // a key given twice would silently take the last value; an unknown one would be dropped
    const std::string line = "node1 -- Input0 -- forward_compute_time=1.0, backward_compute_time=0, "
                             "activation_size=4.0, parameter_size=0";
    require_load_error(dir.write("twice.txt", line + ", forward_compute_time=99\n"),
                       ":1: node1: forward_compute_time is given twice");
    require_load_error(dir.write("unknown_key.txt", line + ", flops=5\n"), ":1: node1: unknown attribute 'flops'");
    // a negative feature count is refused as a negative channel count is, not counted as 0 FLOPs
    require_load_error(dir.write("linear_neg.txt", "node1 -- Linear(in_features=-9216, out_features=4096, bias=True) -- "
                                                   "forward_compute_time=1.0, backward_compute_time=1.0, "
                                                   "activation_size=4.0, parameter_size=0\n"),
                       "'node1' (id 1) has negative or invalid flops");
    // a number too small for a double is 0 (as Python reads it); one too large is no number
    const go::OpGraph tiny = go::load_graph(dir.write("tiny.txt", "node1 -- ReLU() -- forward_compute_time=1e-400, "
                                                                  "backward_compute_time=0, activation_size=4.0, "
                                                                  "parameter_size=0\n"));
    CHECK(tiny.op(0).time == 0.0);
    require_load_error(dir.write("huge.txt", "node1 -- ReLU() -- forward_compute_time=1e400, backward_compute_time=0, "
                                             "activation_size=4.0, parameter_size=0\n"),
                       ":1: node1: forward_compute_time is not a finite number: '1e400'");
    // sizes past the graph's limits (graph.hpp's kMaxBytes) name the line, as other errors do
    require_load_error(dir.write("param_big.txt", "node1 -- ReLU() -- forward_compute_time=1, backward_compute_time=0, "
                                                  "activation_size=4.0, parameter_size=1e17\n"),
                       ":1: op 'node1' (id 1) has negative or invalid parameter_size 1e+17 (at most 2^50 bytes)");
    require_load_error(dir.write("act_big.txt", "node1 -- ReLU() -- forward_compute_time=1, backward_compute_time=0, "
                                                "activation_size=[4.0; 2e15], parameter_size=0\n"),
                       ":1: op 'node1' (id 1) has negative or invalid activation_size 2e+15 (at most 2^50 bytes)");
  }
}

TEST_CASE("graph load: a UTF-8 byte-order mark before a text profile is skipped", "[graph]") {
  const std::string rd = std::string(GO_DATA_DIR) + "/real-data/";
  for (const auto& [name, path, suffix] :
       {std::tuple<std::string, std::string, std::string>{"graph.txt", rd + "msr-fiddle-pipedream/resnet18/graph.txt", ""},
        {"bert_large-inf-512-8.csv", rd + "neusight/label/NVIDIA_L4/bert_large-inf-512-8.csv", ":layers=2"}}) {
    INFO(name);
    TempDir plain_dir, marked_dir;  // the same file name (a NeuSight profile's batch and model come from it)
    const std::string text = read_bytes(path);
    const go::OpGraph plain = go::load_graph(plain_dir.write(name, text) + suffix);
    const go::OpGraph marked = go::load_graph(marked_dir.write(name, "\xEF\xBB\xBF" + text) + suffix);
    CHECK(plain.num_ops() > 10);
    CHECK(go::graph_difference(plain, marked) == "");
  }
}

TEST_CASE("graph load: mutated ONNX files load or fail cleanly, never crash", "[graph][errors]") {
  TempDir dir;
  const std::string onnx = read_bytes(kModels + "resnet18.onnx");
  std::mt19937 rng(2024);
  int failed = 0, loaded = 0;
  for (int trial = 0; trial < 150; ++trial) {
    std::string bytes = onnx;
    if (trial % 3 == 0) {
      bytes.resize(1 + rng() % (bytes.size() - 1));
    } else {
      const int flips = 1 + static_cast<int>(rng() % 8);
      for (int k = 0; k < flips; ++k) bytes[rng() % bytes.size()] = static_cast<char>(rng() & 0xff);
    }
    const auto path = dir.write("mutant.onnx", bytes);
    try {
      const go::OpGraph g = go::load_graph(path);
      g.validate();
      ++loaded;
    } catch (const go::Error& e) {
      const std::string msg = e.what();
      INFO(msg);
      CHECK_THAT(msg, Contains("mutant.onnx"));
      CHECK(msg.find('\n') == std::string::npos);
      ++failed;
    }
  }
  CHECK(failed > 0);
  CHECK(failed + loaded == 150);
}

}  // namespace test_graph
