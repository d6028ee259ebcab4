// The workload zoo: every named workload builds a valid forward graph whose training graph has the
// documented size, the image models match their published multiply-accumulates, options are checked,
// generation is reproducible, and the human-expert placements follow the literature's rules on the
// forward graph and on the training graph made from it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "go/graph/cost.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/load.hpp"
#include "go/graph/training.hpp"
#include "go/graph/zoo.hpp"
#include "go/sim/cluster.hpp"
#include "go/sim/plan.hpp"
#include "go/sim/simulator.hpp"

namespace test_graph_zoo {
using Catch::Matchers::Contains;

namespace {

struct Built {
  go::OpGraph fwd, train;
};

// Every default zoo graph and its training graph, built once per test run.
const Built& built(const std::string& name) {
  static std::map<std::string, Built> cache;
  auto it = cache.find(name);
  if (it == cache.end()) {
    go::OpGraph f = go::load_graph("zoo:" + name);
    go::OpGraph t = go::make_training_graph(f);
    it = cache.emplace(name, Built{std::move(f), std::move(t)}).first;
  }
  return it->second;
}

go::OpId id_of(const go::OpGraph& g, const std::string& name) {
  auto id = g.find(name);
  INFO(name);
  REQUIRE(id.has_value());
  return *id;
}

bool reads(const go::OpGraph& g, const std::string& consumer, const std::string& producer) {
  const go::OpId c = id_of(g, consumer), p = id_of(g, producer);
  for (go::OpId u : g.pred(c))
    if (u == p) return true;
  return false;
}

double macs(const go::OpGraph& g, bool with_aux) {
  double m = 0;
  for (const go::Op& o : g.ops())
    if ((o.kind == go::OpKind::conv || o.kind == go::OpKind::matmul) && (with_aux || g.name(o.id).rfind("aux/", 0) != 0))
      m += o.flops / 2;
  return m / static_cast<double>(g.info().batch);
}

// Training-graph op counts: [min, max]. The paper-sized three must be in [40,000, 100,000].
struct Range {
  const char* name;
  int fwd_min, fwd_max, train_min, train_max;
};
constexpr Range kRanges[] = {
    {"rnnlm2", 1000, 1400, 2200, 2800},
    {"rnnlm4", 2000, 2600, 4400, 5500},
    {"rnnlm8", 4000, 5200, 8800, 11000},
    {"gnmt2", 5000, 6500, 11000, 14500},
    {"gnmt4", 9000, 12000, 20000, 26000},
    {"gnmt8", 17000, 23000, 40000, 100000},
    {"transformer_xl2", 5000, 6500, 10500, 13500},
    {"transformer_xl4", 9500, 12500, 20000, 26000},
    {"transformer_xl8", 19000, 25000, 40000, 100000},
    {"inception_v3", 300, 360, 780, 950},
    {"amoebanet", 1200, 1500, 3000, 3800},
    {"wavenet2", 6000, 7500, 13500, 17000},
    {"wavenet4", 23000, 30000, 40000, 100000},
};

// Devices the literature rule uses for k devices.
int expected_devices(const std::string& name, int k) {
  auto layers = [&](std::size_t prefix) { return std::stoi(name.substr(prefix)); };
  if (name.rfind("rnnlm", 0) == 0) return std::min(k, layers(5) + 1);  // layers + softmax
  if (name.rfind("gnmt", 0) == 0) return std::min(k, layers(4) + 1);
  if (name.rfind("transformer_xl", 0) == 0) return std::min(k, layers(14));
  return k;
}

}  // namespace

TEST_CASE("zoo: every workload builds, validates and trains at its documented size", "[graph][zoo]") {
  const auto names = go::zoo_names();
  REQUIRE(names.size() == std::size(kRanges));
  for (const Range& r : kRanges) {
    INFO(r.name);
    REQUIRE(std::find(names.begin(), names.end(), r.name) != names.end());
    const Built& b = built(r.name);
    const go::OpGraph& g = b.fwd;
    CHECK_NOTHROW(g.validate());
    CHECK(g.info().format == "zoo");
    CHECK(g.info().name == r.name);
    CHECK(g.info().source == std::string("zoo:") + r.name);
    CHECK_FALSE(g.info().training);  // zoo: graphs are forward graphs; --training expands them
    CHECK(g.info().batch == *go::zoo_default_options(r.name).batch);
    CHECK(std::all_of(g.ops().begin(), g.ops().end(), [](const go::Op& o) { return o.role == go::OpRole::forward; }));
    CHECK(std::all_of(g.tensors().begin(), g.tensors().end(), [](const go::TensorInfo& t) { return t.rank >= 0; }));
    // names are unique: placements and training-op names key on them
    std::unordered_set<std::string> seen;
    bool unique = true;
    for (go::OpId i = 0; i < g.num_ops(); ++i) unique = seen.insert(g.name(i)).second && unique;
    CHECK(unique);
    const auto st = go::graph_stats(g);
    CHECK(st.flops > 0);
    CHECK(st.param_bytes > 0);
    CHECK(g.num_ops() >= r.fwd_min);
    CHECK(g.num_ops() <= r.fwd_max);

    const go::OpGraph& t = b.train;
    CHECK_NOTHROW(t.validate());
    CHECK(t.info().training);
    CHECK(t.num_ops() >= r.train_min);
    CHECK(t.num_ops() <= r.train_max);
    int updates = 0;
    for (const go::Op& o : t.ops()) updates += o.role == go::OpRole::update;
    CHECK(updates == g.num_params());  // every weight gets exactly one update op
    CHECK(go::graph_stats(t).flops > 2.0 * st.flops);
    // the model's loss is the only forward output nobody reads: make_training_graph's `loss` takes
    // every such sink, so a dangling op would add gradient paths the model does not have
    const auto loss = t.pred(*t.find("loss"));
    CHECK(loss.size() == 1);
    CHECK(t.name(loss[0]).find("loss") != std::string::npos);
  }
}

TEST_CASE("zoo: Inception-v3 and AmoebaNet-A match their published sizes", "[graph][zoo]") {
  SECTION("inception_v3: 5.71 G multiply-accumulates per 299x299 image, torchvision's layers") {
    const go::OpGraph& g = built("inception_v3").fwd;
    CHECK(macs(g, false) == Approx(5.71e9).epsilon(0.10));
    CHECK(macs(g, false) == Approx(5.71e9).epsilon(0.01));  // it is in fact within 1%
    // torchvision inception_v3 (with the auxiliary head): 27,161,264 parameters
    CHECK(static_cast<double>(go::graph_stats(g).param_bytes) / 4 == Approx(27161264).epsilon(0.01));
    int convs = 0, bns = 0, relus = 0;
    for (const go::Op& o : g.ops()) {
      convs += o.kind == go::OpKind::conv;
      bns += o.kind == go::OpKind::batch_norm;
      relus += o.kind == go::OpKind::relu;
    }
    CHECK(convs == 96);  // 94 in the network + 2 in the auxiliary head
    CHECK(bns == convs);
    CHECK(relus == convs);
    // stem, 3x A, reduction-A, 4x B (factorized 7x1/1x7), reduction-B, 2x C, pool, fc
    for (const char* m : {"mixed_5b", "mixed_5c", "mixed_5d", "mixed_6a", "mixed_6b", "mixed_6c", "mixed_6d",
                          "mixed_6e", "mixed_7a", "mixed_7b", "mixed_7c"})
      CHECK(g.find(std::string(m) + "/concat").has_value());
    CHECK(g.tensor(g.op(id_of(g, "mixed_6b/b1/1x7/conv")).first_output).rank == 4);
    const auto out = g.shape(g.op(id_of(g, "mixed_7c/concat")).first_output);
    CHECK(std::vector<std::int64_t>(out.begin(), out.end()) == std::vector<std::int64_t>{64, 2048, 8, 8});
    const auto aux = g.shape(g.op(id_of(g, "mixed_6e/concat")).first_output);
    CHECK(std::vector<std::int64_t>(aux.begin(), aux.end()) == std::vector<std::int64_t>{64, 768, 17, 17});
  }
  SECTION("amoebanet: AmoebaNet-A (N=6, F=190), 23.1 G multiply-adds at 331x331, 86.7M parameters") {
    const go::OpGraph& g = built("amoebanet").fwd;
    CHECK(macs(g, false) == Approx(23.1e9).epsilon(0.10));
    CHECK(static_cast<double>(go::graph_stats(g).param_bytes) / 4 == Approx(86.7e6).epsilon(0.10));
    // 2 stem reduction cells, 3 stages of N = 6 normal cells, 2 reduction cells between them
    for (int c = 0; c < 18; ++c) CHECK(g.find("cell" + std::to_string(c) + "/output/concat").has_value());
    CHECK_FALSE(g.find("cell18/output/concat").has_value());
    for (const char* c : {"stem_cell0", "stem_cell1", "reduction_cell0", "reduction_cell1"})
      CHECK(g.find(std::string(c) + "/output/concat").has_value());
    // a normal cell concatenates its 4 unused states (4F channels); a reduction cell its 5
    auto channels = [&](const std::string& op) { return g.shape(g.op(id_of(g, op)).first_output)[1]; };
    CHECK(channels("cell0/output/concat") == 4 * 190);
    CHECK(channels("reduction_cell0/output/concat") == 5 * 380);
    CHECK(channels("cell17/output/concat") == 4 * 760);
    // block 1 of the normal cell: sep3 on state 1 + identity on state 1
    CHECK(g.find("cell3/comb1/left/sep2/pointwise").has_value());
    CHECK(reads(g, "cell3/comb1/add", "cell3/comb1/left/drop_path"));
    // the auxiliary head sits before the second reduction
    CHECK(reads(g, "aux/relu", "cell11/output/concat"));
  }
}

TEST_CASE("zoo: the recurrent, attention and WaveNet generators follow their architectures", "[graph][zoo]") {
  SECTION("rnnlm: weights shared across time, one lookup and one softmax over the sequence") {
    const go::OpGraph& g = built("rnnlm2").fwd;
    const auto S = *go::zoo_default_options("rnnlm2").seq;
    CHECK(g.out_degree(id_of(g, "lstm0/kernel")) == S);
    CHECK(g.op(id_of(g, "lstm1/kernel")).param_bytes == 4 * (2 * 2048) * (4 * 2048));
    CHECK(g.op(id_of(g, "embedding/unstack")).num_outputs == S);
    CHECK_FALSE(g.find("lstm1/t4/mask_hidden").has_value());  // rnnlm has no length masks
    CHECK(reads(g, "lstm1/t5/concat", "lstm1/t4/hidden"));
    CHECK(reads(g, "lstm1/t5/dropout", "lstm0/t5/hidden"));
    CHECK_FALSE(g.find("lstm2/kernel").has_value());
  }
  SECTION("rnnlm8: eight layers of rnnlm2/rnnlm4's size; every layer adds the same ops") {
    const go::OpGraph& g = built("rnnlm8").fwd;
    const go::OpGraph& g4 = built("rnnlm4").fwd;
    CHECK(g.op(id_of(g, "lstm7/kernel")).param_bytes == g4.op(id_of(g4, "lstm3/kernel")).param_bytes);
    CHECK(g.op(id_of(g, "lstm7/bias")).param_bytes == g4.op(id_of(g4, "lstm3/bias")).param_bytes);
    CHECK(reads(g, "lstm7/t5/dropout", "lstm6/t5/hidden"));
    CHECK(reads(g, "softmax/stack", "lstm7/t0/hidden"));
    CHECK_FALSE(g.find("lstm8/kernel").has_value());
    // rnnlm2 -> rnnlm4 adds two layers, rnnlm4 -> rnnlm8 four: twice the ops, forward and training
    for (bool training : {false, true}) {
      INFO((training ? "training" : "forward"));
      auto ops = [&](const char* n) { return training ? built(n).train.num_ops() : built(n).fwd.num_ops(); };
      CHECK(ops("rnnlm8") - ops("rnnlm4") == 2 * (ops("rnnlm4") - ops("rnnlm2")));
    }
  }
  SECTION("gnmt: bidirectional bottom layer, residuals from layer 2, attention context into every layer") {
    const go::OpGraph& g = built("gnmt8").fwd;
    const auto S = *go::zoo_default_options("gnmt8").seq;
    const std::string last = std::to_string(S - 1);
    CHECK(reads(g, "encoder/l0_bw/t" + last + "/concat", "encoder/l0_bw/h0"));  // backward runs last step first
    CHECK(reads(g, "encoder/l0_bw/t0/concat", "encoder/l0_bw/t1/mask_hidden"));
    CHECK(reads(g, "encoder/l0/t3/bidir", "encoder/l0_fw/t3/mask_hidden"));
    CHECK(reads(g, "encoder/l0/t3/bidir", "encoder/l0_bw/t3/mask_hidden"));
    CHECK(g.find("encoder/l2/t0/residual").has_value());
    CHECK_FALSE(g.find("encoder/l1/t0/residual").has_value());
    CHECK(g.find("encoder/l7/t0/gates").has_value());
    CHECK_FALSE(g.find("encoder/l8/t0/gates").has_value());
    CHECK(reads(g, "decoder/attention/t5/query", "decoder/l0/t5/mask_hidden"));
    for (int l = 1; l < 8; ++l)
      CHECK(reads(g, "decoder/l" + std::to_string(l) + "/t5/with_context", "decoder/attention/t5/context"));
    CHECK(reads(g, "decoder/l0/t6/with_context", "decoder/attention/t5/context"));
    CHECK(g.op(id_of(g, "decoder/l3/kernel")).param_bytes == 4 * (3 * 1024) * (4 * 1024));
  }
  SECTION("transformer_xl: every segment attends over its memory (the previous segment's layer input)") {
    go::ZooOptions o;
    o.batch = 2;
    o.seq = 16;
    o.hidden = 64;
    o.segments = 3;
    const go::OpGraph g = go::make_zoo_graph("transformer_xl2", o);
    CHECK(reads(g, "layer0/seg0/with_memory", "layer0/memory0"));
    CHECK(reads(g, "layer1/seg0/with_memory", "layer1/memory0"));
    CHECK(reads(g, "layer1/seg1/with_memory", "layer0/seg0/ln2"));  // layer 1's input in segment 0
    CHECK(reads(g, "layer0/seg2/with_memory", "embedding/seg1/dropout"));
    // queries of the segment (16) against memory + segment keys (32)
    const double expect = 2.0 * 2 * 16 * 32 * 64;
    CHECK(g.op(id_of(g, "layer1/seg2/content_score")).flops == expect);
    CHECK(g.op(id_of(g, "layer1/seg2/position_score")).flops == expect);
    CHECK(g.out_degree(id_of(g, "layer1/qkv")) == 3);
    CHECK_FALSE(g.find("layer2/qkv").has_value());
    CHECK_FALSE(g.find("layer0/seg3/qkv").has_value());
  }
  SECTION("wavenet: stacks x layers of dilated causal convolutions, chunks linked by halos") {
    const go::OpGraph& g = built("wavenet2").fwd;
    CHECK(g.find("stack1/layer17/chunk0/filter").has_value());
    CHECK_FALSE(g.find("stack1/layer18/chunk0/filter").has_value());
    CHECK_FALSE(g.find("stack2/layer0/chunk0/filter").has_value());
    CHECK(built("wavenet4").fwd.find("stack3/layer35/chunk15/filter").has_value());
    // dilation 2^(i mod 10): layer 13 reads the last 8 samples of the previous chunk
    const auto halo = g.shape(g.op(id_of(g, "stack0/layer13/chunk1/halo")).first_output);
    CHECK(halo.back() == 8);
    CHECK(reads(g, "stack0/layer13/chunk1/halo", "stack0/layer12/chunk0/residual_add"));
    CHECK(g.find("stack0/layer13/chunk0/pad").has_value());  // the first chunk is zero-padded
    CHECK(reads(g, "stack1/layer0/chunk2/skip_add", "stack0/layer17/chunk2/skip_add"));
    const auto o = go::zoo_default_options("wavenet4");
    CHECK(*o.depth == 36);
    CHECK(*o.seq * *o.segments >= 12500);  // a training example covers the receptive field
  }
}

TEST_CASE("zoo: options, defaults and errors", "[graph][zoo][errors]") {
  SECTION("options override the defaults") {
    go::ZooOptions o;
    o.seq = 5;
    o.batch = 3;
    o.hidden = 16;
    const go::OpGraph g = go::make_zoo_graph("gnmt2", o);
    CHECK(g.info().batch == 3);
    CHECK(g.num_ops() < built("gnmt2").fwd.num_ops() / 8);
    CHECK(g.op(id_of(g, "decoder/l1/kernel")).param_bytes == 4 * (3 * 16) * (4 * 16));
    CHECK_FALSE(g.find("encoder/l0_fw/t5/gates").has_value());
    go::ZooOptions w;
    w.depth = 4;
    w.segments = 2;
    w.seq = 64;
    const go::OpGraph wn = go::make_zoo_graph("wavenet2", w);
    CHECK(wn.find("stack1/layer3/chunk1/filter").has_value());
    CHECK_FALSE(wn.find("stack1/layer4/chunk0/filter").has_value());
    go::ZooOptions a;
    a.depth = 1;
    a.hidden = 8;  // F/4 = 2 channels in the stem cells: the 1x7_7x1 op drops its bottleneck
    a.image = 128;
    a.batch = 2;
    const go::OpGraph am = go::make_zoo_graph("amoebanet", a);
    CHECK(am.find("cell2/output/concat").has_value());
    CHECK_FALSE(am.find("cell3/output/concat").has_value());
    CHECK_NOTHROW(go::make_training_graph(am).validate());
  }
  SECTION("graph paths carry options: zoo:<name>:<option>=<value>...") {
    go::ZooOptions o;
    o.seq = 5;
    o.batch = 3;
    const go::OpGraph a = go::make_zoo_graph("gnmt2", o);
    const go::OpGraph b = go::load_graph("zoo:gnmt2:seq=5:batch=3");
    CHECK(b.num_ops() == a.num_ops());
    CHECK(b.info().batch == 3);
    CHECK(b.info().name == "gnmt2");  // still the zoo workload (human-expert placement applies)
    CHECK(go::load_graph("zoo:gnmt2").num_ops() == built("gnmt2").fwd.num_ops());
    CHECK_THROWS_WITH(go::load_graph("zoo:gnmt2:seq"), Contains("must be <option>=<positive integer>"));
    CHECK_THROWS_WITH(go::load_graph("zoo:gnmt2:seq=-3"), Contains("needs a positive integer"));
    CHECK_THROWS_WITH(go::load_graph("zoo:gnmt2:seq=0"), Contains("must be positive"));
    CHECK_THROWS_WITH(go::load_graph("zoo:gnmt2:seq=12:seq=13"), Contains("option 'seq' is given twice"));
    CHECK_THROWS_WITH(go::load_graph("zoo:gnmt2:seq=99999999999999999999999"),
                      Contains("'seq' is 99999999999999999999999; options, and the ops of a zoo graph, go up to"));
    CHECK_THROWS_WITH(go::load_graph("zoo:gnmt2:seq=999999999999"), Contains("'seq' is 999999999999; options"));
    CHECK_THROWS_WITH(go::load_graph("zoo:gnmt2:size=3"), Contains("unknown option 'size'"));
    CHECK_THROWS_WITH(go::load_graph("zoo:gnmt2:depth=3"), Contains("does not apply"));
    CHECK_THROWS_WITH(go::load_graph("zoo:gnmt2:seq=5:"), Contains("must be <option>=<positive integer>"));
    CHECK_THROWS_WITH(go::load_graph("zoo:nope:seq=5"), Contains("unknown zoo workload"));
  }
  SECTION("defaults are listed per workload") {
    const auto o = go::zoo_default_options("gnmt8");
    CHECK(*o.batch == 128);
    CHECK(*o.hidden == 1024);
    CHECK_FALSE(o.image.has_value());
    CHECK(*go::zoo_default_options("inception_v3").image == 299);
    CHECK(*go::zoo_default_options("amoebanet").image == 331);
    for (const auto& n : go::zoo_names()) CHECK(go::zoo_default_options(n).batch.has_value());
  }
  SECTION("unknown names list the known ones") {
    REQUIRE_THROWS_WITH(go::load_graph("zoo:alexnet9000"),
                        Contains("zoo:alexnet9000: unknown zoo workload") && Contains("rnnlm2") &&
                            Contains("gnmt8") && Contains("transformer_xl8") && Contains("inception_v3") &&
                            Contains("amoebanet") && Contains("wavenet4"));
    CHECK_THROWS_AS(go::make_zoo_graph("gnmt"), go::Error);  // the depth is part of the name
    CHECK_THROWS_AS(go::make_zoo_graph("gnmt3"), go::Error);
    CHECK_THROWS_WITH(go::zoo_default_options("wavenet"), Contains("known: rnnlm2"));
  }
  SECTION("bad options name the workload and the option") {
    go::ZooOptions zero;
    zero.batch = 0;
    CHECK_THROWS_WITH(go::make_zoo_graph("gnmt4", zero),
                      Contains("zoo:gnmt4") && Contains("'batch' must be positive, got 0"));
    go::ZooOptions neg;
    neg.seq = -3;
    CHECK_THROWS_WITH(go::make_zoo_graph("rnnlm2", neg), Contains("'seq' must be positive, got -3"));
    go::ZooOptions img;
    img.image = 299;
    CHECK_THROWS_WITH(go::make_zoo_graph("gnmt8", img),
                      Contains("zoo:gnmt8: option 'image' does not apply") && Contains("batch, seq, hidden, vocab"));
    go::ZooOptions seg;
    seg.segments = 4;
    CHECK_THROWS_WITH(go::make_zoo_graph("inception_v3", seg), Contains("'segments' does not apply"));
    go::ZooOptions tiny;
    tiny.image = 40;
    CHECK_THROWS_WITH(go::make_zoo_graph("inception_v3", tiny), Contains("zoo:inception_v3") && Contains("too small"));
    go::ZooOptions chunk;
    chunk.seq = 100;
    CHECK_THROWS_WITH(go::make_zoo_graph("wavenet2", chunk),
                      Contains("zoo:wavenet2") && Contains("at least the largest dilation 512"));
    for (const auto& n : go::zoo_names()) {
      go::ZooOptions b;
      b.batch = -1;
      CHECK_THROWS_AS(go::make_zoo_graph(n, b), go::Error);
    }
  }
  SECTION("sizes too large for any graph are errors before anything is built") {
    // a step count of 10^8 once built vectors of steps for minutes (15 GB) before any message
    CHECK_THROWS_WITH(go::load_graph("zoo:gnmt2:seq=100000000"),
                      Contains("zoo:gnmt2") && Contains("'seq' is 100000000") && Contains("up to 2000000"));
    CHECK_THROWS_WITH(go::load_graph("zoo:rnnlm2:vocab=999999999999"), Contains("'vocab' is 999999999999"));
    // with the cap raised, a weight whose bytes would overflow (it read as negative param_bytes)
    go::ZooOptions wide;
    wide.hidden = 1'000'000'000;
    wide.max_ops = 10'000'000'000;
    CHECK_THROWS_WITH(go::make_zoo_graph("gnmt2", wide),
                      Contains("zoo:gnmt2") && Contains("weight 'encoder/l0_fw/kernel'") && Contains("too large"));
    // the op count, checked as ops are added: gnmt2 at 16 steps has 1,494 forward ops
    go::ZooOptions o;
    o.seq = 16;
    REQUIRE(go::make_zoo_graph("gnmt2", o).num_ops() == 1494);
    o.max_ops = 1494;
    CHECK(go::make_zoo_graph("gnmt2", o).num_ops() == 1494);
    o.max_ops = 1493;
    CHECK_THROWS_WITH(go::make_zoo_graph("gnmt2", o), Contains("zoo:gnmt2") && Contains("more than 1493 ops"));
    o.seq = 1494;
    CHECK_THROWS_WITH(go::make_zoo_graph("gnmt2", o), Contains("'seq' is 1494; options, and the ops of a zoo graph, go up to 1493"));
    o.max_ops = 0;
    CHECK_THROWS_WITH(go::make_zoo_graph("gnmt2", o), Contains("max_ops must be positive"));
    CHECK(go::ZooOptions{}.max_ops == go::kMaxGeneratedOps);
  }
}

TEST_CASE("zoo: generation is reproducible", "[graph][zoo]") {
  for (const std::string name : {"gnmt4", "transformer_xl2", "amoebanet", "wavenet2", "inception_v3", "rnnlm4"}) {
    INFO(name);
    const go::OpGraph& a = built(name).fwd;
    const go::OpGraph b = go::make_zoo_graph(name);
    REQUIRE(a.num_ops() == b.num_ops());
    REQUIRE(a.num_edges() == b.num_edges());
    bool same = a.num_tensors() == b.num_tensors() && a.num_params() == b.num_params();
    for (go::OpId i = 0; i < a.num_ops() && same; ++i) {
      const go::Op &x = a.op(i), &y = b.op(i);
      same = a.name(i) == b.name(i) && x.kind == y.kind && x.flops == y.flops && x.param_bytes == y.param_bytes &&
             x.output_bytes == y.output_bytes && std::equal(a.succ(i).begin(), a.succ(i).end(), b.succ(i).begin(),
                                                            b.succ(i).end()) &&
             std::equal(a.inputs(i).begin(), a.inputs(i).end(), b.inputs(i).begin(), b.inputs(i).end());
    }
    CHECK(same);
  }
}

TEST_CASE("zoo: human-expert placements cover the devices, on forward and training graphs", "[graph][zoo][placement]") {
  for (const auto& name : go::zoo_names()) {
    const Built& b = built(name);
    std::unordered_map<std::string, go::OpId> fwd_id;  // OpGraph::find is a linear scan
    for (go::OpId i = 0; i < b.fwd.num_ops(); ++i) fwd_id.emplace(b.fwd.name(i), i);
    for (int k : {2, 4, 8}) {
      INFO(name << " on " << k << " devices");
      const auto pf = go::zoo_human_placement(b.fwd, k);
      const auto pt = go::zoo_human_placement(b.train, k);
      REQUIRE(pf.size() == static_cast<std::size_t>(b.fwd.num_ops()));
      REQUIRE(pt.size() == static_cast<std::size_t>(b.train.num_ops()));
      CHECK(std::all_of(pf.begin(), pf.end(), [k](std::int32_t d) { return d >= 0 && d < k; }));
      CHECK(std::all_of(pt.begin(), pt.end(), [k](std::int32_t d) { return d >= 0 && d < k; }));
      const std::set<std::int32_t> used_f(pf.begin(), pf.end()), used_t(pt.begin(), pt.end());
      CHECK(static_cast<int>(used_f.size()) == expected_devices(name, k));
      CHECK(static_cast<int>(used_t.size()) == expected_devices(name, k));
      // forward ops keep their device in the training graph
      bool same_fwd = true;
      for (go::OpId i = 0; i < b.fwd.num_ops(); ++i)
        same_fwd = same_fwd && b.train.name(i) == b.fwd.name(i) && pt[static_cast<std::size_t>(i)] == pf[static_cast<std::size_t>(i)];
      CHECK(same_fwd);
      // gradients sit with their forward op, updates with their parameter's owner, groups together
      int grads = 0, updates = 0, bad = 0;
      std::map<std::int32_t, std::int32_t> group_dev;
      for (const go::Op& o : b.train.ops()) {
        const std::string& n = b.train.name(o.id);
        const auto d = pt[static_cast<std::size_t>(o.id)];
        if (o.colocation >= 0) {
          auto [it, fresh] = group_dev.emplace(o.colocation, d);
          bad += !fresh && it->second != d;
        }
        if (o.role == go::OpRole::backward && n.size() > 5 && n.compare(n.size() - 5, 5, "/grad") == 0 && n != "loss/grad") {
          ++grads;
          bad += pt[static_cast<std::size_t>(fwd_id.at(n.substr(0, n.size() - 5)))] != d;
        }
        if (o.role == go::OpRole::update) {
          ++updates;
          bad += pt[static_cast<std::size_t>(fwd_id.at(n.substr(0, n.size() - 7)))] != d;
        }
      }
      CHECK(grads > b.fwd.num_ops() / 2);
      CHECK(updates == b.fwd.num_params());
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("zoo: human-expert placements follow the literature's rules", "[graph][zoo][placement]") {
  SECTION("layers, blocks, stacks and branches") {
    auto dev = [](const go::OpGraph& g, const std::vector<std::int32_t>& p, const std::string& n) {
      return p[static_cast<std::size_t>(id_of(g, n))];
    };
    const go::OpGraph& gn = built("gnmt8").train;
    const auto g4 = go::zoo_human_placement(gn, 4), g8 = go::zoo_human_placement(gn, 8);
    CHECK(dev(gn, g4, "encoder/l5/t3/gates") == 1);  // layer i on device i mod k
    CHECK(dev(gn, g4, "decoder/l2/t9/cell") == 2);
    CHECK(dev(gn, g4, "decoder/l2/kernel") == 2);
    CHECK(dev(gn, g4, "decoder/l2/kernel/update") == 2);
    CHECK(dev(gn, g4, "decoder/l2/t9/gates/grad") == 2);
    CHECK(dev(gn, g8, "encoder/l0_fw/t0/gates") == 0);  // tensorflow/nmt: the bidirectional layer on 0
    CHECK(dev(gn, g8, "encoder/l0_bw/t0/gates") == 0);
    CHECK(dev(gn, g8, "encoder/l7/t0/gates") == 7);
    CHECK(dev(gn, g8, "decoder/attention/t4/context") == 0);  // with the bottom decoder layer
    CHECK(dev(gn, g8, "decoder/softmax/logits") == 7);        // L - 1 when L >= k
    CHECK(dev(gn, g8, "loss") == 7);
    const go::OpGraph& g2 = built("gnmt2").fwd;
    CHECK(dev(g2, go::zoo_human_placement(g2, 8), "decoder/softmax/logits") == 2);  // device L when L < k
    const go::OpGraph& rn = built("rnnlm4").fwd;
    const auto r2 = go::zoo_human_placement(rn, 2);
    CHECK(dev(rn, r2, "lstm3/t7/gates") == 1);
    CHECK(dev(rn, r2, "lstm2/t7/gates") == 0);
    CHECK(dev(rn, r2, "embedding/lookup") == 0);
    CHECK(dev(rn, go::zoo_human_placement(rn, 8), "softmax/logits") == 4);
    const go::OpGraph& r8 = built("rnnlm8").train;
    const auto r8x8 = go::zoo_human_placement(r8, 8), r8x4 = go::zoo_human_placement(r8, 4);
    for (int l = 0; l < 8; ++l) CHECK(dev(r8, r8x8, "lstm" + std::to_string(l) + "/t9/gates") == l);
    CHECK(dev(r8, r8x8, "softmax/logits") == 7);  // L - 1 when L >= k
    CHECK(dev(r8, r8x8, "lstm6/kernel/update") == 6);
    CHECK(dev(r8, r8x4, "lstm5/t9/gates") == 1);
    CHECK(dev(r8, r8x4, "lstm5/t9/gates/grad") == 1);
    CHECK(dev(r8, r8x4, "softmax/logits") == 3);
    CHECK(dev(r8, go::zoo_human_placement(r8, 2), "lstm7/t0/cell") == 1);
    const go::OpGraph& tx = built("transformer_xl8").fwd;
    const auto t4 = go::zoo_human_placement(tx, 4), t2 = go::zoo_human_placement(tx, 2);
    CHECK(dev(tx, t4, "layer1/seg7/qkv") == 0);  // contiguous blocks of 2 layers
    CHECK(dev(tx, t4, "layer2/seg7/qkv") == 1);
    CHECK(dev(tx, t4, "layer7/seg0/ln2") == 3);
    CHECK(dev(tx, t4, "softmax/seg3/logits") == 3);
    CHECK(dev(tx, t4, "embedding/lookup") == 0);
    CHECK(dev(tx, t2, "layer3/seg1/ff1") == 0);
    CHECK(dev(tx, t2, "layer4/seg1/ff1") == 1);
    const go::OpGraph& wn = built("wavenet4").fwd;
    const auto w4 = go::zoo_human_placement(wn, 4), w8 = go::zoo_human_placement(wn, 8);
    for (int s = 0; s < 4; ++s) CHECK(dev(wn, w4, "stack" + std::to_string(s) + "/layer20/chunk3/gated") == s);
    CHECK(dev(wn, w8, "stack1/layer17/chunk0/filter") == 2);  // half stacks on 8 devices
    CHECK(dev(wn, w8, "stack1/layer18/chunk0/filter") == 3);
    CHECK(dev(wn, w8, "head/chunk5/xent") == 7);
    // branches of a module are split across devices
    const go::OpGraph& inc = built("inception_v3").fwd;
    const auto i4 = go::zoo_human_placement(inc, 4);
    std::set<std::int32_t> branches;
    for (const char* br : {"b0/1x1", "b1/7x1", "b2/1x7b", "b3/1x1"})
      branches.insert(dev(inc, i4, std::string("mixed_6c/") + br + "/conv"));
    CHECK(branches.size() == 4);
    CHECK(dev(inc, i4, "mixed_6c/b2/7x1a/relu") == dev(inc, i4, "mixed_6c/b2/1x7b/conv"));
    const go::OpGraph& am = built("amoebanet").fwd;
    const auto a8 = go::zoo_human_placement(am, 8);
    std::set<std::int32_t> blocks;
    for (int c = 0; c < 5; ++c) blocks.insert(dev(am, a8, "cell4/comb" + std::to_string(c) + "/add"));
    CHECK(blocks.size() == 5);
    CHECK(dev(am, a8, "cell4/comb2/right/pool") == dev(am, a8, "cell4/comb2/add"));
  }
  SECTION("one device, bad k, and graphs that are not zoo workloads") {
    const go::OpGraph& g = built("wavenet2").train;
    const auto p1 = go::zoo_human_placement(g, 1);
    CHECK(std::all_of(p1.begin(), p1.end(), [](std::int32_t d) { return d == 0; }));
    CHECK_THROWS_WITH(go::zoo_human_placement(g, 0), Contains("k must be at least 1, got 0"));
    CHECK_THROWS_WITH(go::default_human_placement(g, -2), Contains("k must be at least 1, got -2"));
    go::GraphBuilder bld(go::GraphInfo{"resnet", "resnet.onnx", "onnx"});
    go::OpSpec s;
    s.name = "x";
    s.outputs.resize(1);
    bld.add_op(s);
    const go::OpGraph other = bld.build();
    CHECK_THROWS_WITH(go::zoo_human_placement(other, 2),
                      Contains("resnet.onnx") && Contains("not a zoo workload") && Contains("default_human_placement"));
  }
}

TEST_CASE("zoo: rnnlm8's training graph runs on v100x8 under its human placement", "[graph][zoo][placement][sim]") {
  // one layer per device: the plan fits the 16 GB V100s and every device computes
  const go::OpGraph& t = built("rnnlm8").train;
  const go::Cluster c = go::cluster_preset("v100x8");
  go::Plan plan;
  plan.device = go::zoo_human_placement(t, 8);
  CHECK(go::check_plan(t, plan, 8).empty());
  const go::Simulator sim(t, c);
  const go::SimResult r = sim.simulate(plan);
  INFO(go::sim_reason(r, t, c));
  CHECK(r.valid);
  CHECK(std::isfinite(r.step_time));
  CHECK(r.step_time > 0);
  REQUIRE(r.busy_time.size() == 8);
  CHECK(std::all_of(r.busy_time.begin(), r.busy_time.end(), [](double b) { return b > 0; }));
}

TEST_CASE("zoo: the generic placement cuts the graph by depth into balanced blocks", "[graph][zoo][placement]") {
  // a chain of 8 equal matmuls with weights, then its training graph
  go::GraphBuilder bld(go::GraphInfo{"chain", "chain", "builder"});
  go::OpSpec in;
  in.name = "in";
  in.kind = go::OpKind::input;
  in.outputs.push_back(go::TensorSpec{{64, 64}});
  bld.add_op(in);
  for (int i = 0; i < 8; ++i) {
    go::OpSpec m;
    m.name = "mm" + std::to_string(i);
    m.kind = go::OpKind::matmul;
    m.flops = 1e9;
    m.param_bytes = 64 * 64 * 4;
    m.inputs.push_back(go::TensorRef{i, 0});
    m.outputs.push_back(go::TensorSpec{{64, 64}});
    bld.add_op(m);
  }
  const go::OpGraph g = bld.build();
  const auto p = go::default_human_placement(g, 4);
  CHECK(p == std::vector<std::int32_t>{0, 0, 0, 1, 1, 2, 2, 3, 3});
  const go::OpGraph t = go::make_training_graph(g);
  const auto pt = go::default_human_placement(t, 4);
  for (go::OpId i = 0; i < t.num_ops(); ++i) {
    const std::string& n = t.name(i);
    INFO(n);
    if (n.rfind("mm", 0) == 0) CHECK(pt[static_cast<std::size_t>(i)] == p[static_cast<std::size_t>(std::stoi(n.substr(2, 1)) + 1)]);
  }
  CHECK(pt[static_cast<std::size_t>(*t.find("loss"))] == 3);
  // on a zoo graph: every device used, forward devices non-decreasing with depth
  const go::OpGraph& w = built("wavenet2").train;
  const auto pw = go::default_human_placement(w, 8);
  CHECK(std::set<std::int32_t>(pw.begin(), pw.end()).size() == 8);
  CHECK(pw[static_cast<std::size_t>(*w.find("input/chunk0/causal_conv"))] == 0);
  CHECK(pw[static_cast<std::size_t>(*w.find("head/loss"))] == 7);
}

}  // namespace test_graph_zoo
