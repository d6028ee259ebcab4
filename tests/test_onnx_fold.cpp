// Import-time folding of ONNX shape computations (include/go/graph/onnx_fold.hpp): a hand-built
// Shape -> Gather -> Concat -> Reshape graph checked by hand, and the transformer exports of
// data/models (scripts/export_models.py) against their published multiply-accumulate counts.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "go/graph/cost.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/load.hpp"
#include "go/graph/onnx.hpp"
#include "onnx_model_maker.hpp"

namespace test_onnx_fold {
using namespace onnx_test;

namespace {

const std::string kModels = std::string(GO_DATA_DIR) + "/models/";

bool has_shape(const go::OpGraph& g, const go::Op& o) {
  return o.num_outputs > 0 && g.tensor(o.first_output).rank >= 0;
}

}  // namespace

TEST_CASE("onnx fold: a run-time shape chain folds into the Reshape, Pad and MatMul shapes", "[graph][onnx]") {
  ModelMaker m;
  m.input("x", {2, 6, 8});
  m.input("w", {4, 5});
  m.node("Shape", "shape", {"x"}, {"s"});  // [2, 6, 8]
  m.scalar_constant("i0", 0);
  m.scalar_constant("i1", 1);
  m.scalar_constant("i2", 2);
  m.scalar_constant("four", 4);
  m.node("Gather", "batch", {"s", "i0"}, {"b"});  // 2
  m.node("Gather", "rows", {"s", "i1"}, {"h"});   // 6
  m.node("Gather", "cols", {"s", "i2"}, {"c"});   // 8
  m.node("Div", "half", {"c", "i2"}, {"c2"});     // 4
  // x.view(b, -1, c / 2): Reshape to [2, 12, 4]
  ModelMaker::ints(m.node("Unsqueeze", "b_1d", {"b"}, {"b1"}), "axes", {0});
  m.int_constant("axes0", {0}, false);
  m.node("Unsqueeze", "c2_1d", {"c2", "axes0"}, {"c21"});  // opset 13: axes as an input
  m.int_constant("minus1", {-1}, true);
  ModelMaker::i(m.node("Concat", "target", {"b1", "minus1", "c21"}, {"target_shape"}), "axis", 0);
  m.node("Reshape", "view", {"x", "target_shape"}, {"xv"});
  m.node("MatMul", "proj", {"xv", "w"}, {"y"});
  // Swin's window padding: pad rows to a multiple of 4, (4 - 6 % 4) % 4 = 2
  m.node("Mod", "rem", {"h", "four"}, {"r"});
  m.node("Sub", "short", {"four", "r"}, {"sh"});
  m.node("Mod", "pad_r", {"sh", "four"}, {"p"});
  ModelMaker::ints(m.node("Unsqueeze", "p_1d", {"p"}, {"p1"}), "axes", {0});
  m.int_constant("zeros4", {0, 0, 0, 0}, true);
  m.int_constant("zero1", {0}, false);
  ModelMaker::i(m.node("Concat", "pads", {"zeros4", "p1", "zero1"}, {"pads_v"}), "axis", 0);
  m.node("Pad", "pad", {"x", "pads_v"}, {"xp"});
  // floor(c / 3) through floats: Cast -> Div -> Floor -> Cast, then x.view(-1, 2)
  ModelMaker::i(m.node("Cast", "to_float", {"c"}, {"cf"}), "to", 1);
  m.scalar_constant("three", 3.0, 1);
  m.node("Div", "third", {"cf", "three"}, {"cf3"});
  m.node("Floor", "floor", {"cf3"}, {"cfl"});
  ModelMaker::i(m.node("Cast", "to_int", {"cfl"}, {"ci"}), "to", 7);
  ModelMaker::ints(m.node("Unsqueeze", "ci_1d", {"ci"}, {"ci1"}), "axes", {0});
  ModelMaker::i(m.node("Concat", "flat_shape", {"minus1", "ci1"}, {"fs"}), "axis", 0);
  m.node("Reshape", "flat", {"x", "fs"}, {"xf"});
  // a Range over a folded length and a ConstantOfShape of a folded shape
  m.node("Range", "range", {"i0", "c2", "i1"}, {"rg"});
  m.int_constant("three_1d", {3}, false);
  ModelMaker::i(m.node("Concat", "mask_shape", {"b1", "three_1d"}, {"ms"}), "axis", 0);
  m.node("ConstantOfShape", "mask", {"ms"}, {"mask_v"});
  m.node("Expand", "expand", {"mask_v", "target_shape_e"}, {"me"});
  m.int_constant("target_shape_e", {4, 1, 1}, false);

  const go::OpGraph g = m.load("fold.onnx");
  CHECK_NOTHROW(g.validate());
  CHECK(out_shape(g, "shape") == V{3});
  CHECK(out_shape(g, "batch") == V{});
  CHECK(out_shape(g, "target") == V{3});
  CHECK(out_shape(g, "view") == V{2, 12, 4});
  CHECK(out_shape(g, "proj") == V{2, 12, 5});
  CHECK(flops_of(g, "proj") == 2.0 * 2 * 12 * 5 * 4);
  CHECK(out_shape(g, "pad") == V{2, 8, 8});
  CHECK(out_shape(g, "flat") == V{48, 2});  // floor(8 / 3) = 2
  CHECK(out_shape(g, "range") == V{4});
  CHECK(out_shape(g, "mask") == V{2, 3});
  CHECK(out_shape(g, "expand") == V{4, 2, 3});
  // folded ops stay in the graph, like Shape and Constant, but cost nothing
  for (const char* op : {"half", "rem", "short", "pad_r", "third", "floor", "range", "target"}) {
    INFO(op);
    CHECK(flops_of(g, op) == 0.0);
  }
  // folded shapes are checked as recorded ones are: [4,2,3] + [2,12,4] do not broadcast
  m.node("Add", "masked", {"me", "xv"}, {"sum"});
  REQUIRE_THROWS_WITH(m.load("fold.onnx"), Catch::Contains("node 'masked' (Add): its operands 'me' [4, 2, 3] and 'xv' "
                                                           "[2, 12, 4] do not broadcast"));
}

TEST_CASE("onnx fold: what cannot be folded leaves the shape unknown, never a crash", "[graph][onnx][errors]") {
  ModelMaker m;
  m.input("x", {2, 6});
  m.node("Shape", "shape", {"x"}, {"s"});
  m.int_constant("i7", {7}, false);
  m.scalar_constant("zero", 0);
  m.scalar_constant("seven", 7);
  m.scalar_constant("big", 1e18);
  m.int_constant("big_1d", {1000000000000000000}, false);
  m.node("Gather", "out_of_range", {"s", "i7"}, {"g"});  // index 7 of a length-2 shape
  m.node("Div", "by_zero", {"s", "zero"}, {"d"});
  m.node("Mul", "overflow", {"big_1d", "big_1d"}, {"o"});
  m.node("Reshape", "view_g", {"x", "g"}, {"xg"});
  m.node("Reshape", "view_d", {"x", "d"}, {"xd"});
  m.node("Reshape", "view_o", {"x", "o"}, {"xo"});
  m.node("Range", "huge", {"zero", "big", "seven"}, {"r"});  // 1.4e17 elements
  m.int_constant("bad_axes", {5}, false);
  m.node("Unsqueeze", "bad_unsqueeze", {"s", "bad_axes"}, {"u"});
  const go::OpGraph g = m.load("unfoldable.onnx");
  CHECK_NOTHROW(g.validate());
  for (const char* op : {"view_g", "view_d", "view_o", "huge", "bad_unsqueeze"}) {
    INFO(op);
    CHECK(g.tensor(g.op(*g.find(op)).first_output).rank < 0);
  }
  CHECK(out_shape(g, "by_zero") == V{2});  // its shape by broadcasting, its value not folded
}

TEST_CASE("onnx fold: every MatMul, Gemm and Conv of the Swin-T export has a shape", "[graph][onnx]") {
  const go::OpGraph g = go::load_graph(kModels + "swin_t.onnx");
  CHECK_NOTHROW(g.validate());
  int checked = 0;
  for (const go::Op& o : g.ops())
    if (o.kind == go::OpKind::matmul || o.kind == go::OpKind::conv) {
      INFO(g.name(o.id));
      CHECK(has_shape(g, o));
      CHECK(o.flops > 0);
      ++checked;
    }
  CHECK(checked == 77);  // 12 blocks x (qkv, q k^T, attn v, proj, 2 MLP), 3 patch merges, head, patch conv
}

TEST_CASE("onnx fold: transformer exports match their published multiply-accumulate counts", "[graph][onnx]") {
  // gopt's convention: FLOPs = 2 x multiply-accumulates, over every op (matmul, conv, norms,
  // softmax, elementwise). The published counts (torchvision's weight metadata "GFLOPS", which
  // are multiply-accumulates of the convolutions and matrix products) are compared with
  // FLOPs / 2 per image; the batch of the exports is dynamic, read as 1.
  struct Case {
    const char* file;
    double gmacs;
  };
  // BERT-base encoder stack, batch 1 x 128 tokens, 12 layers: per token 4 d^2 (Q, K, V, output)
  // + 2 d ff (feed-forward) multiply-accumulates, plus 2 x 128 x d per token for the attention.
  const double bert = 12 * (128 * (4.0 * 768 * 768 + 2.0 * 768 * 3072) + 2.0 * 128 * 128 * 768) / 1e9;
  for (const Case& c : {Case{"swin_t.onnx", 4.49}, Case{"vit_b_16.onnx", 17.56}, Case{"bert_base.onnx", bert}}) {
    INFO(c.file);
    const go::OpGraph g = go::load_graph(kModels + c.file);
    CHECK(g.info().batch == 1);
    const double gmacs = go::graph_stats(g).flops / 2.0 / 1e9;
    INFO("GMACs per item " << gmacs << " vs published " << c.gmacs);
    CHECK(gmacs == Approx(c.gmacs).epsilon(0.10));
    double matmul = 0;
    for (const go::Op& o : g.ops())
      if (o.kind == go::OpKind::matmul || o.kind == go::OpKind::conv) {
        CHECK(has_shape(g, o));
        matmul += o.flops;
      }
    // the products alone are the published count to within a few percent
    CHECK(matmul / 2.0 / 1e9 == Approx(c.gmacs).epsilon(0.05));
  }
}

}  // namespace test_onnx_fold
