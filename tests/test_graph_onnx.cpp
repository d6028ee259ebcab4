// ONNX importer: the model exports of data/models (published multiply-accumulate counts) and a synthetic
// model exercising shape inference and FLOPs of each supported operator.
#include <catch2/catch.hpp>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "go/graph/cost.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/io.hpp"
#include "go/graph/load.hpp"
#include "go/graph/onnx.hpp"
#include "onnx_model_maker.hpp"

namespace test_graph_onnx {
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

const std::string kModels = std::string(GO_DATA_DIR) + "/models/";

double macs_per_image(const go::OpGraph& g) {
  // The batch is the first dimension of the (single) data input.
  go::OpId input = -1;
  for (const go::Op& o : g.ops())
    if (o.kind == go::OpKind::input) {
      REQUIRE(input == -1);
      input = o.id;
    }
  REQUIRE(input >= 0);
  const auto shape = g.shape(g.op(input).first_output);
  REQUIRE(shape.size() == 4);
  const double batch = static_cast<double>(shape[0]);
  CHECK(g.info().batch == shape[0]);
  return go::graph_stats(g).flops / 2.0 / batch;
}

}  // namespace

TEST_CASE("onnx: published multiply-accumulate counts of the model exports", "[graph][onnx]") {
  struct Case {
    const char* file;
    double gmacs;
    std::int64_t side;
  };
  for (const Case& c : {Case{"resnet18.onnx", 1.81, 224}, Case{"resnet50.onnx", 4.09, 224},
                        Case{"inception_v3.onnx", 5.71, 299}, Case{"vgg16.onnx", 15.47, 224},
                        Case{"mobilenet_v2.onnx", 0.30, 224}}) {
    INFO(c.file);
    const go::OpGraph g = go::load_graph(kModels + c.file);
    CHECK_NOTHROW(g.validate());
    CHECK(g.info().format == "onnx");
    CHECK(g.info().batch == 32);
    const auto in_shape = g.shape(g.op(*g.find("input.1")).first_output);
    CHECK(in_shape[2] == c.side);
    const double macs = macs_per_image(g) / 1e9;
    INFO("GMACs per image " << macs << " vs published " << c.gmacs);
    CHECK(macs == Approx(c.gmacs).epsilon(0.10));
    CHECK(g.topo_order().size() == static_cast<std::size_t>(g.num_ops()));
    // every tensor's shape is known (value_info + inference) and every conv has weights
    for (const auto& t : g.tensors()) CHECK(t.rank >= 0);
    for (const go::Op& o : g.ops())
      if (o.kind == go::OpKind::conv) CHECK(o.param_bytes > 0);
  }
}

TEST_CASE("onnx: parameter counts of the weightless exports", "[graph][onnx]") {
  // Published parameter counts (BatchNorm folded into the convolutions by the exporter).
  const go::OpGraph r18 = go::load_graph(kModels + "resnet18.onnx");
  CHECK(go::graph_stats(r18).param_bytes / 4 == Approx(11.69e6).epsilon(0.01));
  const go::OpGraph vgg = go::load_graph(kModels + "vgg16.onnx");
  CHECK(go::graph_stats(vgg).param_bytes / 4 == Approx(138.36e6).epsilon(0.01));
  const go::OpGraph mb = go::load_graph(kModels + "mobilenet_v2.onnx");
  CHECK(go::graph_stats(mb).param_bytes / 4 == Approx(3.50e6).epsilon(0.01));
  // The fc layer's weight and bias belong to the Gemm.
  for (const go::Op& o : r18.ops())
    if (o.kind == go::OpKind::matmul) CHECK(o.param_bytes == (1000 * 512 + 1000) * 4);
}

TEST_CASE("onnx: the Transformer encoder export", "[graph][onnx]") {
  const go::OpGraph g = go::load_graph(kModels + "transformer_enc.onnx");
  CHECK_NOTHROW(g.validate());
  const auto st = go::graph_stats(g);
  // one data input [8, 128, 512]; every weight is a parameter
  CHECK(st.kind_counts[go::op_kind_index(go::OpKind::input)] == 1);
  CHECK(g.info().batch == 8);
  // 6 layers x (in_proj 512x1536+1536, out_proj 512x512+512, ff 512x2048+2048 and 2048x512+512, 2 norms)
  const double per_layer = 512.0 * 1536 + 1536 + 512.0 * 512 + 512 + 512.0 * 2048 + 2048 + 2048.0 * 512 + 512 + 4 * 512;
  CHECK(st.param_bytes == static_cast<std::int64_t>(6 * per_layer * 4));
  CHECK(g.num_params() == 6 * 12);
  // matmul FLOPs: per layer QKV, scores, attention x V, output projection, two feed-forward layers
  const double tokens = 8 * 128;
  const double per_layer_flops = 2 * tokens * 512 * 1536 + 2 * (2.0 * 64 * 128 * 128 * 64) +
                                 (2 * tokens * 512 * 512 + tokens * 512) + 2 * (2 * tokens * 512 * 2048);
  double matmul_flops = 0;
  for (const go::Op& o : g.ops())
    if (o.kind == go::OpKind::matmul) matmul_flops += o.flops;
  CHECK(matmul_flops == Approx(6 * per_layer_flops).epsilon(1e-6));
  CHECK(st.kind_counts[go::op_kind_index(go::OpKind::softmax)] == 6);
  CHECK(st.kind_counts[go::op_kind_index(go::OpKind::reduce)] == 24);  // decomposed LayerNorm: 2 ReduceMean each
  for (const auto& t : g.tensors()) CHECK(t.rank >= 0);
}

// ---- a synthetic model, built with the protobuf API (tests/onnx_model_maker.hpp) ----
using namespace onnx_test;

TEST_CASE("onnx: shape inference and FLOPs per operator", "[graph][onnx]") {
  ModelMaker m;
  m.input("x", {2, 8, 17, 17});
  m.input("w", {16, 4, 3, 3});
  m.input("b", {16});
  m.input("bn_s", {16});
  m.input("bn_b", {16});
  m.input("bn_m", {16});
  m.input("bn_v", {16});
  m.input("chan", {16, 1, 1});
  m.input("idx", {4, 3}, 7);  // a second data input (int64 indices)
  m.initializer("table", {100, 16});
  auto* conv = m.node("Conv", "conv", {"x", "w_id", "b"}, {"c"});
  m.node("Identity", "weight_alias", {"w"}, {"w_id"});  // Identity of a parameter: folded away
  ModelMaker::i(conv, "group", 2);
  ModelMaker::ints(conv, "strides", {2, 2});
  ModelMaker::ints(conv, "dilations", {2, 2});
  ModelMaker::ints(conv, "pads", {1, 1, 1, 1});
  m.node("BatchNormalization", "bn", {"c", "bn_s", "bn_b", "bn_m", "bn_v"}, {"n"});
  m.node("Relu", "relu", {"n"}, {"r"});
  m.node("Add", "add", {"r", "chan"}, {"a"});  // broadcasting
  m.node("Sigmoid", "sigmoid", {"a"}, {"sg"});
  m.node("Tanh", "tanh", {"sg"}, {"th"});
  m.node("Erf", "erf", {"th"}, {"ef"});
  m.node("Gelu", "gelu", {"ef"}, {"ge"});
  m.node("Mul", "mul", {"ge", "a"}, {"mu"});
  m.node("Div", "div", {"mu", "chan"}, {"dv"});
  m.node("Sub", "sub", {"dv", "a"}, {"sb"});
  auto* mp = m.node("MaxPool", "maxpool", {"sb"}, {"mp"});
  ModelMaker::ints(mp, "kernel_shape", {3, 3});
  ModelMaker::ints(mp, "strides", {2, 2});
  ModelMaker::ints(mp, "pads", {1, 1, 1, 1});
  auto* ap = m.node("AveragePool", "avgpool", {"sb"}, {"ap"});
  ModelMaker::ints(ap, "kernel_shape", {2, 2});
  ModelMaker::ints(ap, "strides", {2, 2});
  auto* cat = m.node("Concat", "concat", {"mp", "ap"}, {"cat"});
  ModelMaker::i(cat, "axis", 1);
  m.node("GlobalAveragePool", "gap", {"cat"}, {"gp"});
  auto* fl = m.node("Flatten", "flatten", {"gp"}, {"fl"});
  ModelMaker::i(fl, "axis", 1);
  m.input("fc_w", {6, 32});
  m.input("fc_b", {6});
  auto* gemm = m.node("Gemm", "gemm", {"fl", "fc_w", "fc_b"}, {"gm"});
  ModelMaker::i(gemm, "transB", 1);
  auto* sm = m.node("Softmax", "softmax", {"gm"}, {"sm"});
  ModelMaker::i(sm, "axis", -1);
  // sequence branch: x2 [3, 4, 7]
  m.input("seq", {3, 4, 7});
  m.input("mm_w", {7, 5});
  m.node("MatMul", "matmul", {"seq", "mm_w"}, {"mm"});
  m.input("bmm_b", {3, 5, 4});
  m.node("MatMul", "bmm", {"mm", "bmm_b"}, {"bmm"});  // batched [3,4,5] x [3,5,4]
  m.input("ln_s", {7});
  m.input("ln_b", {7});
  m.node("LayerNormalization", "layernorm", {"seq", "ln_s", "ln_b"}, {"ln"});
  auto* rm = m.node("ReduceMean", "reducemean", {"ln"}, {"rm"});
  ModelMaker::ints(rm, "axes", {1});
  ModelMaker::i(rm, "keepdims", 0);
  m.int_constant("starts", {1}, true);
  m.int_constant("ends", {3}, false);
  m.int_constant("axes", {2}, true);
  m.node("Slice", "slice", {"ln", "starts", "ends", "axes"}, {"sl"});
  m.int_constant("split_sizes", {1, 3}, false);
  auto* sp = m.node("Split", "split", {"ln", "split_sizes"}, {"sp0", "sp1"});
  ModelMaker::i(sp, "axis", 1);
  m.int_constant("newshape", {-1, 7}, true);
  m.node("Reshape", "reshape", {"ln", "newshape"}, {"rs"});
  auto* tr = m.node("Transpose", "transpose", {"ln"}, {"tr"});
  ModelMaker::ints(tr, "perm", {0, 2, 1});
  m.node("Gather", "embedding", {"table", "idx"}, {"emb"});
  // recurrent layers on [seq 5, batch 2, input 10]
  m.input("rx", {5, 2, 10});
  m.input("lstm_w", {1, 80, 10});
  m.input("lstm_r", {1, 80, 20});
  m.input("lstm_bias", {1, 160});
  auto* lstm = m.node("LSTM", "lstm", {"rx", "lstm_w", "lstm_r", "lstm_bias"}, {"ly", "lyh", "lyc"});
  ModelMaker::i(lstm, "hidden_size", 20);
  m.input("gru_w", {2, 60, 10});
  m.input("gru_r", {2, 60, 20});
  auto* gru = m.node("GRU", "gru", {"rx", "gru_w", "gru_r"}, {"gy"});
  ModelMaker::i(gru, "hidden_size", 20);
  ModelMaker::s(gru, "direction", "bidirectional");

  const go::OpGraph g = m.load();
  CHECK_NOTHROW(g.validate());
  // data inputs: the first graph input and the ones used as data operands
  std::vector<std::string> inputs;
  for (const go::Op& o : g.ops())
    if (o.kind == go::OpKind::input) inputs.push_back(g.name(o.id));
  CHECK(inputs == std::vector<std::string>{"x", "idx", "seq", "rx"});
  CHECK(!g.find("weight_alias").has_value());  // Identity of a parameter produces no op

  const double conv_out = 2 * 16 * 8 * 8;
  CHECK(out_shape(g, "conv") == V{2, 16, 8, 8});  // eff. kernel 5: (17 + 2 - 5) / 2 + 1
  CHECK(flops_of(g, "conv") == 2 * conv_out * (4 * 3 * 3) + conv_out);
  CHECK(g.op(*g.find("conv")).param_bytes == (16 * 4 * 9 + 16) * 4);
  CHECK(g.op(*g.find("conv")).kind == go::OpKind::conv);
  CHECK(flops_of(g, "bn") == 2 * conv_out);
  CHECK(g.op(*g.find("bn")).param_bytes == 4 * 16 * 4);
  CHECK(flops_of(g, "relu") == conv_out);
  CHECK(out_shape(g, "add") == V{2, 16, 8, 8});
  CHECK(flops_of(g, "add") == conv_out);
  CHECK(g.op(*g.find("add")).param_bytes == 16 * 4);  // "chan" is a parameter (commutative operand)
  CHECK(flops_of(g, "sigmoid") == 4 * conv_out);
  CHECK(flops_of(g, "tanh") == 4 * conv_out);
  CHECK(flops_of(g, "erf") == 4 * conv_out);
  CHECK(flops_of(g, "gelu") == 8 * conv_out);
  CHECK(g.op(*g.find("gelu")).kind == go::OpKind::gelu);
  CHECK(flops_of(g, "mul") == conv_out);
  CHECK(flops_of(g, "div") == conv_out);
  CHECK(flops_of(g, "sub") == conv_out);
  CHECK(out_shape(g, "maxpool") == V{2, 16, 4, 4});
  CHECK(flops_of(g, "maxpool") == 2 * 16 * 4 * 4 * 9);
  CHECK(out_shape(g, "avgpool") == V{2, 16, 4, 4});
  CHECK(flops_of(g, "avgpool") == 2 * 16 * 4 * 4 * 4);
  CHECK(out_shape(g, "concat") == V{2, 32, 4, 4});
  CHECK(flops_of(g, "concat") == 0);
  CHECK(out_shape(g, "gap") == V{2, 32, 1, 1});
  CHECK(flops_of(g, "gap") == 2 * 32 * 16);
  CHECK(out_shape(g, "flatten") == V{2, 32});
  CHECK(out_shape(g, "gemm") == V{2, 6});
  CHECK(flops_of(g, "gemm") == 2 * 12 * 32 + 12);
  CHECK(flops_of(g, "softmax") == 5 * 12);
  CHECK(out_shape(g, "matmul") == V{3, 4, 5});
  CHECK(flops_of(g, "matmul") == 2 * 60 * 7);
  CHECK(out_shape(g, "bmm") == V{3, 4, 4});
  CHECK(flops_of(g, "bmm") == 2 * 48 * 5);
  CHECK(out_shape(g, "layernorm") == V{3, 4, 7});
  CHECK(flops_of(g, "layernorm") == 8 * 84);
  CHECK(out_shape(g, "reducemean") == V{3, 7});
  CHECK(flops_of(g, "reducemean") == 84);
  CHECK(out_shape(g, "slice") == V{3, 4, 2});
  CHECK(out_shape(g, "split", 0) == V{3, 1, 7});
  CHECK(out_shape(g, "split", 1) == V{3, 3, 7});
  CHECK(flops_of(g, "split") == 0);
  CHECK(out_shape(g, "reshape") == V{12, 7});
  CHECK(g.op(*g.find("reshape")).kind == go::OpKind::reshape);
  CHECK(go::op_time(g.op(*g.find("reshape")), go::DeviceSpec{}) == 0.0);  // zero-FLOP view
  CHECK(out_shape(g, "transpose") == V{3, 7, 4});
  CHECK(out_shape(g, "embedding") == V{4, 3, 16});
  CHECK(flops_of(g, "embedding") == 0);
  CHECK(g.op(*g.find("embedding")).param_bytes == 100 * 16 * 4);  // the table (an initializer)
  CHECK(out_shape(g, "lstm", 0) == V{5, 1, 2, 20});
  CHECK(out_shape(g, "lstm", 2) == V{1, 2, 20});
  CHECK(flops_of(g, "lstm") == 5 * 2 * (8.0 * 20 * 30 + 20 * 20));
  CHECK(g.op(*g.find("lstm")).kind == go::OpKind::rnn);
  CHECK(out_shape(g, "gru") == V{5, 2, 2, 20});
  CHECK(flops_of(g, "gru") == 5 * 2 * 2 * (6.0 * 20 * 30 + 16 * 20));
  CHECK(g.op(*g.find("starts_const")).kind == go::OpKind::constant);
  // bytes follow shapes and element types
  CHECK(g.op(*g.find("idx")).output_bytes == 4 * 3 * 8);
  CHECK(g.op(*g.find("conv")).output_bytes == static_cast<std::int64_t>(conv_out) * 4);
}

TEST_CASE("onnx: negative axes count from the end, and Flatten may split after the last axis", "[graph][onnx]") {
  ModelMaker m;
  m.input("x", {2, 3, 4});
  auto axis = [](pb::NodeProto* n, std::int64_t a) { ModelMaker::i(n, "axis", a); };
  axis(m.node("Flatten", "flat_last", {"x"}, {"f1"}), -1);  // [2*3, 4]
  axis(m.node("Flatten", "flat_end", {"x"}, {"f2"}), 3);    // [2*3*4, 1]
  axis(m.node("Flatten", "flat_first", {"x"}, {"f3"}), -3);  // [1, 2*3*4]
  axis(m.node("Concat", "cat", {"x", "x"}, {"c"}), -2);
  axis(m.node("Softmax", "soft", {"x"}, {"s"}), -1);
  auto* sq = m.node("Unsqueeze", "unsq", {"x"}, {"u"});
  ModelMaker::ints(sq, "axes", {-1, 0});  // output rank 5: axes 4 and 0
  auto* rs = m.node("ReduceSum", "rsum", {"x"}, {"r"});
  ModelMaker::ints(rs, "axes", {-1});
  ModelMaker::i(rs, "keepdims", 1);
  axis(m.node("ArgMax", "amax", {"x"}, {"am"}), -2);
  ModelMaker::i(m.g->mutable_node(m.g->node_size() - 1), "keepdims", 0);
  m.int_constant("sizes", {1, 3}, false);
  axis(m.node("Split", "split", {"x", "sizes"}, {"p0", "p1"}), -1);
  m.int_constant("starts", {1}, true);
  m.int_constant("ends", {-1}, false);
  m.int_constant("sl_axes", {-2}, false);
  m.node("Slice", "slice", {"x", "starts", "ends", "sl_axes"}, {"sl"});
  m.input("table", {10, 6});
  m.input("idx", {5}, 7);
  axis(m.node("Gather", "gather", {"table", "idx"}, {"gt"}), -2);
  auto* sqz = m.node("Squeeze", "squeeze", {"u"}, {"sz"});
  ModelMaker::ints(sqz, "axes", {-5});
  const go::OpGraph g = m.load();
  CHECK(out_shape(g, "flat_last") == V{6, 4});
  CHECK(out_shape(g, "flat_end") == V{24, 1});
  CHECK(out_shape(g, "flat_first") == V{1, 24});
  CHECK(out_shape(g, "cat") == V{2, 6, 4});
  CHECK(out_shape(g, "unsq") == V{1, 2, 3, 4, 1});
  CHECK(out_shape(g, "rsum") == V{2, 3, 1});
  CHECK(out_shape(g, "amax") == V{2, 4});
  CHECK(out_shape(g, "split", 0) == V{2, 3, 1});
  CHECK(out_shape(g, "split", 1) == V{2, 3, 3});
  CHECK(out_shape(g, "slice") == V{2, 1, 4});
  CHECK(out_shape(g, "gather") == V{5, 6});
  CHECK(out_shape(g, "squeeze") == V{2, 3, 4, 1});
}

TEST_CASE("onnx: broken graphs name the node and the file", "[graph][onnx][errors]") {
  SECTION("unknown tensor") {
    ModelMaker m;
    m.input("x", {2, 2});
    m.node("Relu", "lost", {"nowhere"}, {"y"});
    REQUIRE_THROWS_WITH(m.load("broken.onnx"),
                        Contains("broken.onnx") && Contains("'lost'") && Contains("unknown tensor 'nowhere'"));
  }
  SECTION("tensor produced twice") {
    ModelMaker m;
    m.input("x", {2, 2});
    m.node("Relu", "first", {"x"}, {"y"});
    m.node("Relu", "second", {"x"}, {"y"});
    REQUIRE_THROWS_WITH(m.load("twice.onnx"), Contains("twice.onnx") && Contains("'first'") && Contains("'second'"));
  }
  SECTION("cycle") {
    ModelMaker m;
    m.input("x", {2, 2});
    m.node("Add", "ping", {"x", "q"}, {"p"});
    m.node("Relu", "pong", {"p"}, {"q"});
    REQUIRE_THROWS_WITH(m.load("cycle.onnx"), Contains("cycle.onnx") && Contains("cycle") && Contains("'ping'"));
  }
  SECTION("negative dimension") {
    ModelMaker m;
    m.input("x", {2, -2});
    m.node("Relu", "r", {"x"}, {"y"});
    REQUIRE_THROWS_WITH(m.load("negdim.onnx"), Contains("negdim.onnx") && Contains("negative dimension"));
  }
  SECTION("no graph") {
    pb::ModelProto empty;
    empty.set_ir_version(8);
    REQUIRE_THROWS_WITH(go::parse_onnx(empty.SerializeAsString(), "nograph.onnx"), Contains("nograph.onnx"));
  }
  SECTION("shapes that stop at an op go cannot infer") {
    // a custom operator without a recorded output shape: every op after it would count 0 FLOPs
    ModelMaker m;
    m.input("x", {8, 16});
    m.node("MyNorm", "custom", {"x"}, {"y"})->set_domain("com.example");
    m.node("Relu", "after", {"y"}, {"z"});
    REQUIRE_THROWS_WITH(m.load("custom.onnx"),
                        StartsWith("custom.onnx: node 'after' (Relu) reads 'y' of unknown shape: the shapes stop at "
                                   "node 'custom' (MyNorm) of domain 'com.example'") &&
                            Contains("Record the shapes in the file"));
    // recorded in value_info, it loads, and the op after it has its size
    m.value_info("y", {8, 16});
    const go::OpGraph g = m.load("custom.onnx");
    CHECK(out_shape(g, "after") == V{8, 16});
    CHECK(flops_of(g, "after") == 128);
  }
  SECTION("attributes shape inference cannot apply") {
    ModelMaker m;
    m.input("x", {1, 3, 8, 8});
    m.initializer("w", {4, 3, 3, 3});
    auto* c = m.node("Conv", "conv", {"x", "w"}, {"y"});
    ModelMaker::ints(c, "strides", {0, 0});
    m.node("Relu", "relu", {"y"}, {"z"});
    REQUIRE_THROWS_WITH(m.load("stride0.onnx"), Contains("the shapes stop at node 'conv' (Conv)"));
  }
  SECTION("an unknown shape nothing reads is no error") {
    // as Range in exports of Swin: its length is a value; no op after it needs its shape
    ModelMaker m;
    m.input("x", {4});
    m.node("MyOp", "custom", {"x"}, {"y"});
    const go::OpGraph g = m.load("leaf.onnx");
    CHECK(g.num_ops() == 2);
  }
  SECTION("symbolic dimensions take the option's value") {
    ModelMaker m;
    m.input("x", {2, 3});
    m.g->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("N");
    m.node("Relu", "r", {"x"}, {"y"});
    go::OnnxOptions opts;
    opts.symbolic_dim = 64;
    const go::OpGraph g = go::parse_onnx(m.model.SerializeAsString(), "sym.onnx", opts);
    CHECK(out_shape(g, "r") == V{64, 3});
  }
}

TEST_CASE("onnx: shapes that contradict each other are an error naming the node", "[graph][onnx][errors]") {
  const auto hint = Contains("the file's shapes contradict each other");
  SECTION("an input whose batch its recorded outputs do not have") {
    // 1e9 images would be 602 TB of activations, yet the file records the conv's output at batch 32
    ModelMaker m;
    m.input("x", {1000000000, 3, 8, 8});
    m.initializer("w", {4, 3, 3, 3});
    m.node("Conv", "conv", {"x", "w"}, {"y"});
    m.value_info("y", {32, 4, 6, 6});
    REQUIRE_THROWS_WITH(m.load("batch.onnx"), StartsWith("batch.onnx: node 'conv' (Conv): the file records output 'y' "
                                                         "as [32, 4, 6, 6] but its inputs give [1000000000, 4, 6, 6]") &&
                                                  hint);
    // consistent, it loads with the recorded shape
    m.g->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_value(32);
    CHECK(out_shape(m.load(), "conv") == V{32, 4, 6, 6});
  }
  SECTION("a convolution's channels, ranks and groups") {
    // loads a one-conv model (ModelMaker holds a pointer into itself, so it is built in place)
    auto conv = [](std::initializer_list<std::int64_t> x, std::initializer_list<std::int64_t> w, std::int64_t group) {
      ModelMaker m;
      m.input("x", x);
      m.initializer("w", w);
      auto* c = m.node("Conv", "conv", {"x", "w"}, {"y"});
      if (group != 1) ModelMaker::i(c, "group", group);
      m.value_info("y", {1, 4, 6, 6});
      return m.load("c.onnx");
    };
    REQUIRE_THROWS_WITH(conv({1, 3, 8, 8}, {4, 7, 3, 3}, 1),
                        StartsWith("c.onnx: node 'conv' (Conv): its input 'x' [1, 3, 8, 8] has 3 channels but its "
                                   "weight 'w' [4, 7, 3, 3] takes 7 (group 1)") &&
                            hint);
    REQUIRE_THROWS_WITH(conv({1, 3, 8, 8}, {4}, 1), Contains("its weight 'w' [4] has rank 1"));
    REQUIRE_THROWS_WITH(conv({3, 8}, {4, 3}, 1), Contains("its input 'x' [3, 8] has rank 2"));
    REQUIRE_THROWS_WITH(conv({1, 4, 8, 8}, {3, 2, 3, 3}, 2), Contains("not a multiple of group 2"));
    REQUIRE_THROWS_WITH(conv({1, 4, 8, 8}, {4, 2, 3, 3}, 0), Contains("group 0 is not a positive count"));
    REQUIRE_THROWS_WITH(conv({1, 4, 8, 8}, {4, 2, 3, 3}, std::int64_t{1} << 62), Contains("takes more than 2^63"));
    // grouped: 2 groups of 2 input channels each
    CHECK(out_shape(conv({1, 4, 8, 8}, {4, 2, 3, 3}, 2), "conv") == V{1, 4, 6, 6});
  }
  SECTION("products' inner sizes and broadcasting") {
    ModelMaker m;
    m.input("x", {8, 16});
    m.initializer("w", {15, 4});
    m.node("MatMul", "mm", {"x", "w"}, {"y"});
    REQUIRE_THROWS_WITH(m.load("mm.onnx"), StartsWith("mm.onnx: node 'mm' (MatMul): its operands 'x' [8, 16] and 'w' "
                                                      "[15, 4] have inner sizes 16 and 15") &&
                                               hint);
    ModelMaker g;
    g.input("x", {8, 16});
    g.initializer("w", {4, 16});
    ModelMaker::i(g.node("Gemm", "fc", {"x", "w"}, {"y"}), "transB", 0);
    REQUIRE_THROWS_WITH(g.load("fc.onnx"), Contains("inner sizes 16 and 4 (transA 0, transB 0)"));
    g.g->mutable_node(0)->mutable_attribute(0)->set_i(1);
    CHECK(out_shape(g.load(), "fc") == V{8, 4});
    ModelMaker a;
    a.input("x", {8, 16});
    a.initializer("b", {15});
    a.node("Add", "add", {"x", "b"}, {"y"});
    a.value_info("y", {8, 16});
    REQUIRE_THROWS_WITH(a.load("add.onnx"), Contains("node 'add' (Add): its operands 'x' [8, 16] and 'b' [15] do not "
                                                     "broadcast"));
    // every operator that broadcasts, as shape inference takes them (Max, comparisons, Where, ...)
    ModelMaker mx;
    mx.input("x", {8, 16});
    mx.initializer("b", {15});
    mx.node("Max", "max", {"x", "b"}, {"y"});
    REQUIRE_THROWS_WITH(mx.load("max.onnx"), Contains("node 'max' (Max): its operands 'x' [8, 16] and 'b' [15] do not "
                                                      "broadcast"));
  }
  SECTION("a shipped export with its input's batch changed") {
    // the exports record every intermediate shape (value_info): a batch of 1e9 in the input alone
    // contradicts them at the first op, rather than loading as 1e9 images with batch-32 costs
    pb::ModelProto model;
    const std::string bytes = go::detail::read_file(kModels + "resnet18.onnx");
    REQUIRE(model.ParseFromString(bytes));
    REQUIRE(model.graph().value_info_size() > 0);
    auto* dim = model.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0);
    REQUIRE(dim->has_dim_value());
    dim->set_dim_value(1000000000);
    REQUIRE_THROWS_WITH(go::parse_onnx(model.SerializeAsString(), "resnet18_1e9.onnx"),
                        StartsWith("resnet18_1e9.onnx: node '") && Contains("the file records output") &&
                            Contains("but its inputs give [1000000000, ") && hint);
  }
  SECTION("a symbolic size is not checked: it stands in for an unknown one") {
    ModelMaker m;
    m.input("x", {2, 3, 8, 8});
    m.g->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("N");
    m.initializer("w", {4, 3, 3, 3});
    m.node("Conv", "conv", {"x", "w"}, {"y"});
    m.value_info("y", {5, 4, 6, 6});  // 5 is no product of the option's 1 for N, but the file cannot know N
    m.node("Relu", "relu", {"y"}, {"z"});
    CHECK(out_shape(m.load(), "relu") == V{5, 4, 6, 6});
  }
  SECTION("a dynamic batch leaves the other sizes checked") {
    // as torch.onnx.export with dynamic_axes records them: the batch a dim_param, channels concrete
    ModelMaker m;
    m.input("x", {-1, 3, 8, 8});
    m.g->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("N");
    m.initializer("w", {4, 3, 3, 3});
    m.initializer("w2", {4, 5, 3, 3});
    m.node("Conv", "conv", {"x", "w"}, {"y"});
    m.value_info("y", {-1, 4, 6, 6});
    m.node("Conv", "conv2", {"y", "w2"}, {"z"});
    REQUIRE_THROWS_WITH(m.load("dyn.onnx"), Contains("node 'conv2' (Conv): its input 'y' [1, 4, 6, 6] has 4 channels but "
                                                     "its weight 'w2' [4, 5, 3, 3] takes 5"));
    m.g->mutable_initializer(1)->set_dims(1, 4);
    CHECK(out_shape(m.load("dyn.onnx"), "conv2") == V{1, 4, 4, 4});
    // sizes inferred from the symbolic batch stand in for it in every dim: not compared
    ModelMaker r;
    r.input("x", {-1, 12});
    r.g->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("N");
    r.int_constant("to", {-1, 3}, false);
    r.node("Reshape", "view", {"x", "to"}, {"v"});  // [4N, 3]: with N = 1, [4, 3]
    r.initializer("w", {3, 2});
    r.node("MatMul", "mm", {"v", "w"}, {"y"});
    CHECK(out_shape(r.load(), "mm") == V{4, 2});
  }
}

}  // namespace test_graph_onnx
