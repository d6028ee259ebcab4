// NeuSight torch.fx profiles (data/real-data/neusight, copied from sitar-lab/NeuSight): the whole
// model built from one traced layer, measured forward and backward times, the layer-count option,
// and malformed files rejected with one line naming the file and the problem.
//
// Hand counts (read off the CSVs, see the comments per file): the traced layer is the rows whose
// nn_module_stack holds `bert.encoder.layer.0` / `transformer.h.0`; edges are the distinct names
// in each row's _input_nodes.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "go/graph/cost.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/load.hpp"
#include "go/graph/neusight.hpp"
#include "go/graph/training.hpp"

namespace test_graph_neusight {
namespace fs = std::filesystem;

namespace {

const std::string kL4 = std::string(GO_DATA_DIR) + "/real-data/neusight/label/NVIDIA_L4/";
const std::string kBertTrain = kL4 + "bert_large-train-512-2.csv";
const std::string kBertInf = kL4 + "bert_large-inf-512-8.csv";
const std::string kGpt2Inf = kL4 + "gpt2_large-inf-1024-4.csv";
const std::string kGpt2Train = kL4 + "gpt2_large-train-1024-1.csv";

go::OpId must_find(const go::OpGraph& g, const std::string& name) {
  auto id = g.find(name);
  INFO(name);
  REQUIRE(id.has_value());
  return *id;
}

std::vector<std::string> pred_names(const go::OpGraph& g, go::OpId v) {
  std::vector<std::string> out;
  for (go::OpId u : g.pred(v)) out.push_back(g.name(u));
  return out;
}

double forward_ms(const go::OpGraph& g) {
  double t = 0;
  for (const go::Op& o : g.ops())
    if (o.role == go::OpRole::forward) t += o.time;
  return t * 1e3;
}

std::string ns_replace(std::string s, const std::string& from, const std::string& to) {
  const auto p = s.find(from);
  REQUIRE(p != std::string::npos);
  return s.replace(p, from.size(), to);
}

// Writes `text` to a fresh file in a temp folder and returns its path.
std::string temp_file(const std::string& name, const std::string& text) {
  const fs::path dir = fs::temp_directory_path() / "go_test_neusight";
  fs::create_directories(dir);
  const fs::path p = dir / name;
  std::ofstream(p, std::ios::binary) << text;
  return p.string();
}

const std::string kHeader =
    "op,target,_input_nodes,users,meta,input_shapes,output_shape,dtype,latency,fw_latency,bw_latency,acc_latency,Name\n";
// A two-node table: input x (2x4 f32) and a relu of it, in a layer `enc.layer.0`.
std::string tiny_row_x() { return "placeholder,x,{},\"{relu: None}\",{},[],\"(2, 4)\",torch.float32,0,0,0,0,x\n"; }

}  // namespace

TEST_CASE("neusight: bert_large training profile becomes 24 chained layers", "[graph][neusight]") {
  // 82 rows, 41 of them in bert.encoder.layer.0; num_layer 24 in the sibling JSON.
  const go::OpGraph g = go::load_graph(kBertTrain);
  CHECK(g.info().format == "neusight");
  CHECK(g.info().name == "bert_large");
  CHECK(g.info().batch == 2);
  CHECK(g.num_ops() == 41 + 24 * 41);
  // 47 edges into the 41 rows outside the layer, 50 into the layer's rows (5 of them from before it).
  CHECK(g.num_edges() == 47 + 24 * 50);
  CHECK_NOTHROW(g.validate());

  // Measured forward times (ms in the file, seconds in the graph): rows outside the layer once,
  // the layer's rows 24 times: 110.4353 ms; one copy of the layer: 4.3398 ms.
  CHECK(forward_ms(g) == Approx(110.4353029245511).epsilon(1e-9));
  double layer7 = 0;
  for (go::OpId i = 0; i < g.num_ops(); ++i)
    if (g.name(i).find("bert_encoder_layer_7_") == 0 || g.name(i).find("bert.encoder.layer.7/") == 0) layer7 += g.op(i).time;
  CHECK(layer7 * 1e3 == Approx(4.339795217849315).epsilon(1e-9));
  const go::Op& q = g.op(must_find(g, "bert_encoder_layer_7_attention_self_query"));
  CHECK(q.kind == go::OpKind::matmul);
  CHECK(q.time == Approx(0.20087679624557495e-3));
  CHECK(q.backward_time == Approx((0.3569792002439499 + 0.02375040054321289) * 1e-3));  // bw + acc
  CHECK(q.flops == 2.0 * 2 * 512 * 1024 * 1024 + 2 * 512 * 1024);
  CHECK(q.param_bytes == (1024 + 1) * 1024 * 4);
  CHECK(g.op_params(must_find(g, "bert_encoder_layer_7_attention_self_query"))[0].name ==
        "bert.encoder.layer.7.attention.self.query");
  // Unnamed layer rows are prefixed with their copy.
  CHECK(g.op(must_find(g, "bert.encoder.layer.7/softmax")).kind == go::OpKind::softmax);
  CHECK(g.op(must_find(g, "bert.encoder.layer.7/matmul")).flops == 2.0 * 2 * 16 * 512 * 512 * 64);
  CHECK(g.op(must_find(g, "bert.encoder.layer.7/permute")).kind == go::OpKind::reshape);
  CHECK(g.op(must_find(g, "bert.encoder.layer.7/contiguous")).kind == go::OpKind::transpose);

  // Chaining: copy 0 reads the embeddings, copy i reads copy i-1's output, the heads read copy 23's.
  CHECK(pred_names(g, must_find(g, "bert_encoder_layer_0_attention_self_query")) ==
        std::vector<std::string>{"bert_embeddings_dropout"});
  CHECK(pred_names(g, must_find(g, "bert_encoder_layer_1_attention_self_query")) ==
        std::vector<std::string>{"bert_encoder_layer_0_output_layer_norm"});
  CHECK(pred_names(g, must_find(g, "cls_predictions_transform_dense")) ==
        std::vector<std::string>{"bert_encoder_layer_23_output_layer_norm"});
  // The attention mask (`mul`, computed once before the layer) is read by every copy's mask add.
  CHECK(g.out_degree(must_find(g, "mul")) == 24);
  // The word embedding table: vocab_size 30522 from model_configs/bert_large.json.
  CHECK(g.op(must_find(g, "bert_embeddings_word_embeddings")).param_bytes == std::int64_t{30522} * 1024 * 4);
  CHECK(g.op(must_find(g, "bert_embeddings_position_embeddings")).param_bytes == std::int64_t{512} * 1024 * 4);
}

TEST_CASE("neusight: the training graph's gradient ops carry the measured backward times", "[graph][neusight]") {
  const go::OpGraph fwd = go::load_graph(kBertTrain);
  const go::OpGraph g = go::make_training_graph(fwd);
  CHECK(g.info().training);
  const go::Op& qg = g.op(must_find(g, "bert_encoder_layer_7_attention_self_query/grad"));
  CHECK(qg.role == go::OpRole::backward);
  CHECK(qg.time == Approx((0.3569792002439499 + 0.02375040054321289) * 1e-3));
  const go::Op& sg = g.op(must_find(g, "bert.encoder.layer.3/softmax/grad"));
  CHECK(sg.time == Approx(fwd.op(must_find(fwd, "bert.encoder.layer.3/softmax")).backward_time));
  CHECK(g.op(must_find(g, "bert_embeddings_word_embeddings/grad")).time ==
        Approx((0.5517439723014832 + 1.603379201889038) * 1e-3));
  // Every row with a measured backward time gets a gradient op: their times add up to the file's
  // bw_latency + acc_latency, rows outside the layer once and the layer's 24 times (190.1377 ms).
  double grads = 0;
  for (go::OpId i = 0; i < g.num_ops(); ++i) {
    const std::string& n = g.name(i);
    if (n.size() > 5 && n.compare(n.size() - 5, 5, "/grad") == 0 && n != "loss/grad") grads += g.op(i).time;
  }
  CHECK(grads * 1e3 == Approx(190.13765118522568).epsilon(1e-9));
}

TEST_CASE("neusight: training graphs add no optimizer and no gradients of Python values", "[graph][neusight]") {
  // NeuSight's measured step is forward + backward; acc_latency (the weight-gradient accumulation)
  // is already in each row's backward time.
  const go::OpGraph fwd = go::load_graph(kGpt2Train);
  const go::OpGraph g = go::make_training_graph(fwd);
  for (const go::Op& o : g.ops()) CHECK(o.role != go::OpRole::update);
  CHECK(go::graph_stats(g).param_bytes == go::graph_stats(fwd).param_bytes);
  // sizes are integers: no gradient op, and ln_1's output (read by size_3, size_4 and view_1) gets
  // its one gradient from view_1 without an accumulate op
  CHECK_FALSE(g.find("transformer.h.3/size_3/grad").has_value());
  CHECK_FALSE(g.find("transformer_h_3_ln_1/grad_sum").has_value());
  CHECK(g.find("transformer.h.3/view_1/grad").has_value());
  // the residual stream does get one: add_10 feeds ln_2 and the second residual add
  CHECK(g.find("transformer.h.3/add_10/grad_sum").has_value());
  // q, k and v are views of split's tuple: their gradients reach the c_attn matmul
  CHECK(g.find("transformer.h.3/split/grad").has_value());
  CHECK(g.find("transformer.h.3/addmm/grad").has_value());
  // an explicit optimizer still adds its updates and state
  go::TrainingOptions adam;
  adam.optimizer = go::Optimizer::adam;
  const go::OpGraph a = go::make_training_graph(fwd, adam);
  CHECK(go::graph_stats(a).param_bytes == 3 * go::graph_stats(fwd).param_bytes);
}

TEST_CASE("neusight: inference dropout, split and getitem are views, training keeps them", "[graph][neusight]") {
  const go::OpGraph inf = go::load_graph(kGpt2Inf + ":layers=2");
  const go::OpGraph tr = go::load_graph(kGpt2Train + ":layers=2");
  for (const std::string& n : {std::string("transformer_h_1_attn_attn_dropout"), std::string("transformer.h.1/split"),
                               std::string("transformer.h.1/getitem_5")}) {
    INFO(n);
    CHECK(inf.op(must_find(inf, n)).kind == go::OpKind::reshape);
    CHECK(go::is_free_op(inf.op(must_find(inf, n)).kind));
  }
  CHECK(tr.op(must_find(tr, "transformer_h_1_attn_attn_dropout")).kind == go::OpKind::dropout);
  CHECK(tr.op(must_find(tr, "transformer.h.1/split")).kind == go::OpKind::split);
  CHECK(tr.op(must_find(tr, "transformer.h.1/getitem_5")).kind == go::OpKind::slice);
}

TEST_CASE("neusight: a cast to the dtype its input has is a view, a real cast is not", "[graph][neusight]") {
  // gpt2's attention: `to` of the f32 scores (truediv) to f32, `type_1` of the f32 softmax to f32
  for (const std::string& path : {kGpt2Inf + ":layers=2", kGpt2Train + ":layers=2"}) {
    const go::OpGraph g = go::load_graph(path);
    for (const std::string& n : {std::string("transformer.h.1/to"), std::string("transformer.h.1/type_1")}) {
      INFO(path << " " << n);
      CHECK(g.op(must_find(g, n)).kind == go::OpKind::reshape);
      CHECK(g.op(must_find(g, n)).has_time());  // its measured time stays
    }
    CHECK(g.op(must_find(g, "transformer.h.1/where")).kind == go::OpKind::elementwise);
  }
  // x (f32, 2x4) -> same.to(f32), long.to(i64): only the second converts (and moves 32 + 64 bytes)
  const std::string meta0 = "\"{'nn_module_stack': OrderedDict([('enc.layer.0', <class 'L'>)])}\"";
  const std::string same = "call_method,to,{x: None},{}," + meta0 + ",\"[[2, 4]]\",\"(2, 4)\",torch.float32,0.5,0.5,0,0,same\n";
  const std::string conv = "call_method,to,{same: None},{}," + meta0 + ",\"[[2, 4]]\",\"(2, 4)\",torch.int64,0.5,0.5,0,0,long\n";
  const std::string out = "output,output,{long: None},{},{},\"[[2, 4]]\",\"(2, 4)\",torch.int64,0,0,0,0,output\n";
  const go::OpGraph g = go::load_graph(temp_file("casts.csv", kHeader + tiny_row_x() + same + conv + out) + ":layers=1");
  CHECK(g.op(must_find(g, "same")).kind == go::OpKind::reshape);
  const go::Op& c = g.op(must_find(g, "long"));
  CHECK(c.kind == go::OpKind::elementwise);
  CHECK(c.input_bytes + c.output_bytes == 32 + 64);
}

TEST_CASE("neusight: gpt2_large inference keeps per-layer weights and key/value outputs", "[graph][neusight]") {
  // 125 rows, 102 in transformer.h.0 (its Conv1D weights are get_attr rows); num_layer 36.
  const go::OpGraph g = go::load_graph(kGpt2Inf);
  CHECK(g.num_ops() == 23 + 36 * 102);
  // 29 edges into rows outside the layer (2 of them `output` reading the key/value permutes, which
  // every copy feeds), 131 into the layer: 29 + 35 * 2 + 36 * 131.
  CHECK(g.num_edges() == 29 + 35 * 2 + 36 * 131);
  CHECK(g.in_degree(must_find(g, "output")) == 1 + 36 * 2);
  CHECK(forward_ms(g) == Approx(1180.3111668562515).epsilon(1e-9));
  for (const go::Op& o : g.ops()) CHECK_FALSE(o.has_backward_time());  // an inference profile
  const go::Op& w = g.op(must_find(g, "transformer_h_35_attn_c_attn_weight"));
  CHECK(w.kind == go::OpKind::constant);
  CHECK(w.param_bytes == std::int64_t{1280} * 3840 * 4);
  CHECK(g.op(must_find(g, "transformer_h_35_attn_bias")).param_bytes == 0);  // a bool mask buffer
  CHECK(g.op(must_find(g, "transformer.h.35/addmm")).flops == 2.0 * 1024 * 4 * 1280 * 3840 + 1024 * 4 * 3840);
  CHECK(g.op(must_find(g, "transformer_wte")).param_bytes == std::int64_t{50257} * 1280 * 4);
  CHECK(g.op(must_find(g, "lm_head")).param_bytes == std::int64_t{1281} * 50257 * 4);
  // per kind: 36 x (4 addmm + 2 matmul) + lm_head; 36 x 2 + 1 layer norms; 36 softmaxes
  const go::GraphStats s = go::graph_stats(g);
  CHECK(s.kind_counts[go::op_kind_index(go::OpKind::matmul)] == 36 * 6 + 1);
  CHECK(s.kind_counts[go::op_kind_index(go::OpKind::layer_norm)] == 36 * 2 + 1);
  CHECK(s.kind_counts[go::op_kind_index(go::OpKind::softmax)] == 36);
  CHECK(s.measured_ops == g.num_ops());

  // bert inference: 79 rows, 41 in the layer; 6 Linear + 2 matmul per layer, pooler and classifier.
  const go::OpGraph b = go::load_graph(kBertInf);
  CHECK(b.num_ops() == 38 + 24 * 41);
  CHECK(go::graph_stats(b).kind_counts[go::op_kind_index(go::OpKind::matmul)] == 24 * 8 + 2);
}

TEST_CASE("neusight: the layer count option", "[graph][neusight]") {
  const go::OpGraph two = go::load_graph(kBertTrain + ":layers=2");
  CHECK(two.num_ops() == 41 + 2 * 41);
  CHECK(two.num_edges() == 47 + 2 * 50);
  CHECK(pred_names(two, must_find(two, "cls_predictions_transform_dense")) ==
        std::vector<std::string>{"bert_encoder_layer_1_output_layer_norm"});
  const go::OpGraph one = go::load_neusight(kGpt2Train, go::NeuSightOptions{1});
  CHECK(one.num_ops() == 125);  // the table as traced
  CHECK(one.num_edges() == 29 + 131);
  CHECK(forward_ms(one) == Approx(325.15880480818447 - 35 * 8.66801284328103).epsilon(1e-9));
  CHECK_THROWS_WITH(go::load_graph(kBertTrain + ":layers=0"), Catch::Contains("':layers=' needs a positive integer"));
  CHECK_THROWS_WITH(go::load_graph(kBertTrain + ":layers=x"), Catch::Contains("':layers=' needs a positive integer"));
  // a suffix go does not take names itself, not a missing file
  for (const std::string suffix : {":layers=2:layers=3", ":foo=1", ":LAYERS=2"})
    CHECK_THROWS_WITH(go::load_graph(kBertTrain + suffix),
                      Catch::Contains("'" + suffix + "' after the file name is no option of a graph file"));
  // a million copies once built for minutes and filled 20 GB before anything was said
  CHECK_THROWS_WITH(go::load_graph(kBertTrain + ":layers=1000000"),
                    Catch::Contains(kBertTrain) && Catch::Contains("1000000 copies of its 41-node layer make 41000041 ops") &&
                        Catch::Contains("ask for fewer layers"));
  const std::string pd = std::string(GO_DATA_DIR) + "/real-data/msr-fiddle-pipedream/alexnet/graph.txt";
  CHECK_THROWS_WITH(go::load_graph(pd + ":layers=2"), Catch::Contains("applies to NeuSight profiles only"));
}

TEST_CASE("neusight: malformed profiles are rejected with the file and the problem", "[graph][neusight]") {
  const std::string meta0 = "\"{'nn_module_stack': OrderedDict([('enc.layer.0', <class 'L'>)])}\"";
  const std::string relu = "call_function,<built-in function relu>,{x: None},{}," + meta0 +
                           ",\"[[2, 4]]\",\"(2, 4)\",torch.float32,0.5,0.5,0,0,relu\n";
  const std::string out = "output,output,{relu: None},{},{},\"[[2, 4]]\",\"(2, 4)\",torch.float32,0,0,0,0,output\n";
  // A good table first: x, one layer node, output; three layers from the option.
  const std::string good = temp_file("good.csv", kHeader + tiny_row_x() + relu + out);
  const go::OpGraph g = go::load_graph(good + ":layers=3");
  CHECK(g.num_ops() == 5);
  CHECK(g.num_edges() == 4);
  CHECK(g.op(must_find(g, "enc.layer.2/relu")).kind == go::OpKind::relu);
  CHECK(pred_names(g, must_find(g, "enc.layer.2/relu")) == std::vector<std::string>{"enc.layer.1/relu"});

  struct Bad {
    std::string name, text, message;
  };
  const std::vector<Bad> bad = {
      {"empty.csv", "", "empty file"},
      {"header_only.csv", kHeader, "no nodes"},
      {"no_column.csv", "op,target,Name\nplaceholder,x,x\n", "lacks the column '_input_nodes'"},
      {"bad_number.csv", kHeader + tiny_row_x() + ns_replace(relu, ",0.5,0.5,", ",0.5,fast,"),
       "fw_latency is not a non-negative number: 'fast'"},
      {"unknown_input.csv", kHeader + tiny_row_x() + ns_replace(relu, "{x: None}", "{y: None}"),
       "node 'relu' reads unknown node 'y'"},
      {"cycle.csv", kHeader + ns_replace(tiny_row_x(), "{},\"{relu", "{relu: None},\"{relu") + relu,
       "cycle through node"},
      {"duplicate.csv", kHeader + tiny_row_x() + tiny_row_x(), "duplicate node name 'x'"},
      {"bad_shape.csv", kHeader + tiny_row_x() + ns_replace(relu, "\"(2, 4)\"", "\"(2, four)\""),
       "malformed output_shape"},
      {"short_row.csv", kHeader + "placeholder,x,{}\n", "3 fields, the header has 13"},
      {"no_layers.csv", kHeader + tiny_row_x() + relu + out, "no layer count"},
  };
  for (const Bad& b : bad) {
    INFO(b.name);
    const std::string path = temp_file(b.name, b.text);
    try {
      (void)go::load_graph(path);
      FAIL("no error for " << b.name);
    } catch (const go::Error& e) {
      const std::string what = e.what();
      CHECK(what.rfind(path, 0) == 0);  // starts with the file
      CHECK(what.find('\n') == std::string::npos);
      CHECK_THAT(what, Catch::Contains(b.message));
    }
  }
}

}  // namespace test_graph_neusight
