#pragma once
// The workload zoo: the paper's workloads (GO, Zhou et al. 2020, and the device-placement work
// before it) as op-level dataflow graphs, named `zoo:<name>`:
//
//   rnnlm2  rnnlm4                       L-layer LSTM language model, unrolled over time
//   gnmt2   gnmt4   gnmt8                GNMT: bidirectional + residual LSTM encoder, attention decoder
//   transformer_xl2/4/8                  Transformer-XL: relative attention over segments + memory
//   inception_v3                         Inception-v3 (torchvision layout), conv + batchnorm + relu
//   amoebanet                            AmoebaNet-A (N=6, F=190), normal and reduction cells
//   wavenet2  wavenet4                   WaveNet: 2 stacks x 18 layers, 4 stacks x 36 layers
//
// The number in a name is the model's depth: layers (rnnlm, gnmt, transformer_xl) or stacks (wavenet).
//
// FORWARD OR TRAINING. make_zoo_graph / load_graph("zoo:<name>") return the FORWARD graph, like every
// other graph source (ONNX, JSON, PipeDream); commands expand it with `--training`
// (make_training_graph, which also picks the optimizer and so the update ops' state). The sizes this
// file promises are those of the TRAINING graph, which is what the simulator and the optimizer see:
// the training graphs of gnmt8, transformer_xl8 and wavenet4 have between 40,000 and 100,000 ops,
// like the graphs of the paper (table in bench/README.zoo.md; tests/test_graph_zoo.cpp checks them).
//
// OP GRANULARITY. One op per kernel a framework launches (TensorFlow without XLA): every LSTM gate
// activation, dropout, sequence mask, residual add, batchnorm and relu is its own op; biases are
// operands of their matmul/conv; reshapes that move no data are left out. Weights shared across time
// steps / segments / chunks are held by `constant` variable ops (param_bytes = the weight) that every
// step reads, so a placement pays to move weights away from their variable; convolution weights of
// the image models are owned by the conv op itself (param_bytes on the op). All tensors are f32.
//
// WORKLOADS AND DEFAULTS (ZooOptions overrides; every default is justified where it is set):
//   rnnlm<L>         batch 64, 40 steps, 2048 LSTM units, 32k vocabulary, dropout on layer inputs.
//   gnmt<L>          tensorflow/nmt GNMT: batch 128, 64 steps per side, 1024 units, 32k BPE vocab;
//                    layer 0 of the encoder is bidirectional, residual connections from layer 2,
//                    normalized Bahdanau attention on the bottom decoder layer whose context feeds
//                    every decoder layer; dropout and sequence-length masks on every cell.
//   transformer_xl<L> enwik8 sizes: d_model 512, 8 heads, d_inner 2048, 204 classes; 128-token
//                    segments with a 128-token memory per layer (the previous segment's layer input),
//                    96 segments per step (2 streams); relative positional attention
//                    (AC + rel_shift(BD)), dropout, post-layernorm, a softmax per segment.
//                    Gradients flow through the memory (make_training_graph has no stop-gradient).
//   inception_v3     torchvision Inception3 at 299x299, batch 64: stem, 3x Inception-A (mixed_5b-d),
//                    reduction-A (mixed_6a), 4x Inception-B with 1x7/7x1 factorized convs
//                    (mixed_6b-e), reduction-B (mixed_7a), 2x Inception-C (mixed_7b-c), pool, fc,
//                    and the auxiliary head (training); 5.71 G multiply-accumulates per image.
//   amoebanet        AmoebaNet-A (Real et al. 2019; tensorflow/tpu amoeba_net), N=6 normal cells per
//                    stage, F=190, 331x331, batch 32, ImageNet stem (conv + 2 reduction cells),
//                    drop-path, auxiliary head. Cells below.
//   wavenet<S>       S stacks of 18 (wavenet2) or 36 (wavenet4) dilated causal gated layers, dilation
//                    2^(i mod 10), 64 residual channels, 256 skip channels, 256 mu-law classes;
//                    batch 2 x 16,384 samples (about 1 s at 16 kHz, longer than the 12.5k-sample
//                    receptive field of wavenet4) cut into 16 chunks of 1,024: each layer's chunk
//                    reads the last `dilation` samples of the previous chunk (a halo), so time is a
//                    pipeline dimension as in the recurrent models.
//
// AMOEBANET-A CELLS (hidden states 0 = this cell's input after relu/1x1/bn, 1 = the previous cell's
// output matched to it; each of the 5 blocks adds op(left) + op(right) as a new state; the cell
// output concatenates the states no block used, reduced to the output size where they differ):
//   normal:    (avg3 s0, max3 s0) (sep3 s1, id s1) (id s0, avg3 s1) (sep3 s0, sep5 s2) (avg3 s5, sep3 s0)
//   reduction: (sep3 s1, avg3 s0) (max3 s0, sep7 s2) (max3 s1, max3 s0) (sep3 s4, 1x7_7x1 s0)
//              (avg3 s1, sep7 s0)          (ops on states 0 and 1 stride 2 in a reduction cell)
//   sepK = 2 x (relu, KxK depthwise, 1x1 pointwise, batchnorm); 1x7_7x1 = bottleneck to F/4,
//   1x7 and 7x1 convs, back to F; pools are 3x3 SAME (+1x1 conv when the width differs).
//
// HUMAN-EXPERT PLACEMENT. zoo_human_placement(g, k) gives each op a device in [0, k) by the rules of
// the literature, for the forward graph and for the training graph made from it:
//   rnnlm, gnmt      layer i on device i mod k (tensorflow/nmt: GNMT's bidirectional layer and the
//                    embeddings on device 0, attention with decoder layer 0), softmax on device L
//                    (L-1 when L >= k);
//   transformer_xl   contiguous blocks of layers (embedding with the first, softmax with the last);
//   wavenet          contiguous blocks of layers in stack order (stack s on device s when k = stacks);
//   inception_v3, amoebanet  the branches of every module (inception branches, cell blocks) split
//                    across distinct devices, heaviest first to the least-loaded one by estimated
//                    compute (the other literature choice, one device, is the all-zeros baseline).
// Forward ops are placed from their names (the generators' naming scheme), so a graph saved and
// reloaded keeps its human placement. Backward and update ops follow their forward op by name, as
// make_training_graph names them: `<op>/grad` and `<op>/grad_sum<k>` go to <op>'s device,
// `<param>/update` to the device of the op owning the parameter; ops in one colocation group share
// the device of its forward member; anything left (the loss) goes with its producer.
// default_human_placement(g, k) is the generic rule for any graph: forward ops ordered by topological
// depth, cut into k contiguous blocks of equal estimated compute, training ops following as above.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "go/core/error.hpp"
#include "go/graph/cost.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/op_kind.hpp"

namespace go {

// Sizes of a zoo workload. Unset fields take the workload's default (zoo_default_options); a set
// field must be positive and must apply to the workload, or make_zoo_graph throws.
struct ZooOptions {
  std::optional<std::int64_t> batch;     // examples per step (all workloads)
  std::optional<std::int64_t> seq;       // rnnlm/gnmt: unrolled steps (per side); transformer_xl:
                                         // tokens per segment = memory length; wavenet: samples per chunk
  std::optional<std::int64_t> hidden;    // LSTM units / d_model / WaveNet residual channels / AmoebaNet F
  std::optional<std::int64_t> segments;  // transformer_xl: segments per step; wavenet: time chunks
  std::optional<std::int64_t> depth;     // wavenet: layers per stack; amoebanet: normal cells per stage (N)
  std::optional<std::int64_t> vocab;     // vocabulary, or classes (image models, WaveNet's mu-law levels)
  std::optional<std::int64_t> image;     // inception_v3/amoebanet: image side in pixels
};

inline std::vector<std::string> zoo_names() {
  return {"rnnlm2",          "rnnlm4",          "gnmt2",        "gnmt4",     "gnmt8",    "transformer_xl2",
          "transformer_xl4", "transformer_xl8", "inception_v3", "amoebanet", "wavenet2", "wavenet4"};
}

namespace detail::zoo {

enum class Family { rnnlm, gnmt, transformer_xl, inception_v3, amoebanet, wavenet };

struct NameInfo {
  Family family;
  std::int64_t number;  // layers (rnnlm, gnmt, transformer_xl) or stacks (wavenet); 0 otherwise
};

inline std::optional<NameInfo> parse_name(std::string_view name) {
  struct Entry {
    std::string_view name;
    Family family;
    std::int64_t number;
  };
  static constexpr Entry kTable[] = {
      {"rnnlm2", Family::rnnlm, 2},
      {"rnnlm4", Family::rnnlm, 4},
      {"gnmt2", Family::gnmt, 2},
      {"gnmt4", Family::gnmt, 4},
      {"gnmt8", Family::gnmt, 8},
      {"transformer_xl2", Family::transformer_xl, 2},
      {"transformer_xl4", Family::transformer_xl, 4},
      {"transformer_xl8", Family::transformer_xl, 8},
      {"inception_v3", Family::inception_v3, 0},
      {"amoebanet", Family::amoebanet, 0},
      {"wavenet2", Family::wavenet, 2},
      {"wavenet4", Family::wavenet, 4},
  };
  for (const auto& e : kTable)
    if (e.name == name) return NameInfo{e.family, e.number};
  return std::nullopt;
}

inline std::string known_names() {
  std::string s;
  for (const auto& n : zoo_names()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// ---- defaults ---------------------------------------------------------------------------------
// Option fields, in the order error messages list them.
enum Field { kBatch, kSeq, kHidden, kSegments, kDepth, kVocab, kImage, kNumFields };
inline constexpr std::array<std::string_view, kNumFields> kFieldNames = {"batch", "seq",   "hidden", "segments",
                                                                         "depth", "vocab", "image"};

inline std::array<std::optional<std::int64_t>*, kNumFields> fields(ZooOptions& o) {
  return {&o.batch, &o.seq, &o.hidden, &o.segments, &o.depth, &o.vocab, &o.image};
}
inline std::array<const std::optional<std::int64_t>*, kNumFields> fields(const ZooOptions& o) {
  return {&o.batch, &o.seq, &o.hidden, &o.segments, &o.depth, &o.vocab, &o.image};
}

inline ZooOptions defaults(const NameInfo& ni) {
  ZooOptions o;
  switch (ni.family) {
    case Family::rnnlm:
      // The placement papers' RNNLM (Mirhoseini et al. 2017): batch 64, 2048-unit LSTM layers;
      // 40 unrolled steps (truncated BPTT of 20-50 is the usual range); a 32k vocabulary with a
      // full softmax (the 1B-word runs sample the softmax over 793k words; its cost is of this order).
      o.batch = 64;
      o.seq = 40;
      o.hidden = 2048;
      o.vocab = 32000;
      break;
    case Family::gnmt:
      // tensorflow/nmt's GNMT recipe (wmt16_gnmt_*_layer): batch 128, 1024 units, 32k BPE
      // vocabulary. 64 steps per side: above nmt's training cap of 50 subwords so that long WMT
      // pairs fit, and what it takes for the 8-layer training graph to reach the >40k ops (GDP
      // reports >50k for its held-out 8-layer GNMT) of the paper's graphs at this op granularity.
      o.batch = 128;
      o.seq = 64;
      o.hidden = 1024;
      o.vocab = 32000;
      break;
    case Family::transformer_xl:
      // Transformer-XL's enwik8 model sizes (d_model 512, 8 heads of 64, d_inner 2048, 204 byte
      // classes) with 128-token segments and an equal memory. 96 segments of 2 streams (24.6k
      // tokens per step; the enwik8 recipe trains 22 x 512 = 11k per step) make the 8-layer
      // training graph paper-sized (>40k ops); its forward activations (29 GB) need model
      // parallelism on 16 GB devices, as in the paper. (A word-level 32k softmax would be 40% of
      // the FLOPs, in ops no placement can split.)
      o.batch = 2;
      o.seq = 128;
      o.hidden = 512;
      o.segments = 96;
      o.vocab = 204;
      break;
    case Family::inception_v3:
      // 299x299 as published; batch 64 as in the Inception-v3 measurements of the placement
      // literature (Baechi: 1 GPU 457 ms, 4 GPUs m-SCT 463 ms).
      o.batch = 64;
      o.image = 299;
      o.vocab = 1000;
      break;
    case Family::amoebanet:
      // AmoebaNet-A (N=6, F=190) at 331x331: 86.7M parameters, 23.1 G multiply-adds per image
      // (Real et al. 2019, table 2). Batch 32: the forward activations (41 GB) do not fit one
      // 16 GB device, which is why GPipe pipelines AmoebaNet across devices.
      o.batch = 32;
      o.image = 331;
      o.hidden = 190;
      o.depth = 6;
      o.vocab = 1000;
      break;
    case Family::wavenet:
      // See the header comment: 2 x 16,384 samples in 16 chunks, 64 residual channels, 256 classes.
      o.batch = 2;
      o.seq = 1024;
      o.segments = 16;
      o.hidden = 64;
      o.depth = ni.number == 2 ? 18 : 36;
      o.vocab = 256;
      break;
  }
  return o;
}

// ---- graph construction helpers ---------------------------------------------------------------
using Shape = std::vector<std::int64_t>;
struct T {  // a tensor handle: (op index, output), its shape
  OpId op = -1;
  std::int32_t out = 0;
  Shape shape;
};

inline double numel(const Shape& s) {
  double n = 1;
  for (auto d : s) n *= static_cast<double>(d);
  return n;
}
inline std::string str(std::int64_t i) { return std::to_string(i); }
inline std::size_t at(std::int64_t i) { return static_cast<std::size_t>(i); }

class Net {
 public:
  Net(const std::string& name, std::int64_t batch) {
    GraphInfo info;
    info.name = name;
    info.source = "zoo:" + name;
    info.format = "zoo";
    info.batch = batch;
    b_ = GraphBuilder(std::move(info));
  }
  std::string where() { return b_.info().source + ": "; }

  std::vector<T> op(const std::string& name, OpKind kind, const std::vector<T>& ins, const std::vector<Shape>& outs,
                    double flops, std::int64_t param_bytes = 0) {
    OpSpec s;
    s.name = name;
    s.kind = kind;
    s.flops = flops;
    s.param_bytes = param_bytes;
    s.inputs.reserve(ins.size());
    for (const T& t : ins) s.inputs.push_back(TensorRef{t.op, t.out});
    s.outputs.reserve(outs.size());
    for (const Shape& sh : outs) {
      TensorSpec ts;
      ts.shape = sh;
      s.outputs.push_back(std::move(ts));
    }
    const OpId id = b_.add_op(std::move(s));
    std::vector<T> r;
    r.reserve(outs.size());
    for (std::size_t k = 0; k < outs.size(); ++k) r.push_back(T{id, static_cast<std::int32_t>(k), outs[k]});
    return r;
  }
  T op1(const std::string& name, OpKind kind, const std::vector<T>& ins, Shape out, double flops, std::int64_t pb = 0) {
    return op(name, kind, ins, {std::move(out)}, flops, pb)[0];
  }
  T input(const std::string& name, Shape s) { return op1(name, OpKind::input, {}, std::move(s), 0); }
  // A weight variable: owns the parameter, its output is the weight tensor.
  T variable(const std::string& name, Shape s) {
    const auto bytes = static_cast<std::int64_t>(numel(s)) * 4;
    return op1(name, OpKind::constant, {}, std::move(s), 0, bytes);
  }
  // y = x W (+ b) for x [..., K], W [K, N]
  T matmul(const std::string& name, const T& x, const T& w, const T* bias = nullptr) {
    Shape out = x.shape;
    out.back() = w.shape.back();
    std::vector<T> ins{x, w};
    if (bias) ins.push_back(*bias);
    const double flops = 2 * numel(out) * static_cast<double>(x.shape.back()) + (bias ? numel(out) : 0);
    return op1(name, OpKind::matmul, ins, out, flops);
  }
  T ew(const std::string& name, OpKind kind, const std::vector<T>& ins, double per_elem = 1) {
    return op1(name, kind, ins, ins[0].shape, per_elem * numel(ins[0].shape));
  }
  T add(const std::string& name, const T& a, const T& b) {
    GO_CHECK(a.shape == b.shape, where(), "internal: '", name, "' adds tensors of different shapes");
    return ew(name, OpKind::add, {a, b});
  }
  T dropout(const std::string& name, const T& x) { return ew(name, OpKind::dropout, {x}, 2); }
  T relu(const std::string& name, const T& x) { return ew(name, OpKind::relu, {x}); }
  T concat(const std::string& name, const std::vector<T>& ins, int axis) {
    Shape out = ins[0].shape;
    const auto a = static_cast<std::size_t>(axis < 0 ? axis + static_cast<int>(out.size()) : axis);
    out[a] = 0;
    for (const T& t : ins) out[a] += t.shape[a];
    return op1(name, OpKind::concat, ins, out, 0);
  }
  std::vector<T> split(const std::string& name, const T& x, int parts) {
    Shape s = x.shape;
    s.back() /= parts;
    return op(name, OpKind::split, {x}, std::vector<Shape>(static_cast<std::size_t>(parts), s), 0);
  }
  T slice(const std::string& name, const T& x, Shape out) { return op1(name, OpKind::slice, {x}, std::move(out), 0); }
  // [N, ...] -> N tensors [...] (tf.unstack: one op, so its gradient is one pack).
  std::vector<T> unstack(const std::string& name, const T& x) {
    const Shape part(x.shape.begin() + 1, x.shape.end());
    return op(name, OpKind::split, {x}, std::vector<Shape>(at(x.shape[0]), part), 0);
  }
  // N tensors [...] -> [N, ...] (tf.stack).
  T stack(const std::string& name, const std::vector<T>& xs) {
    Shape out = xs[0].shape;
    out.insert(out.begin(), static_cast<std::int64_t>(xs.size()));
    return op1(name, OpKind::concat, xs, out, 0);
  }
  T layer_norm(const std::string& name, const T& x, const T& gamma) {
    return op1(name, OpKind::layer_norm, {x, gamma}, x.shape, 8 * numel(x.shape));
  }
  // Softmax cross-entropy of logits [..., V] against integer labels: one loss per position.
  T xent(const std::string& name, const T& logits, const T& labels) {
    Shape out(logits.shape.begin(), logits.shape.end() - 1);
    return op1(name, OpKind::softmax, {logits, labels}, out, 5 * numel(logits.shape));
  }
  T sum(const std::string& name, const std::vector<T>& ins) {
    double f = 0;
    for (const T& t : ins) f += numel(t.shape);
    return op1(name, OpKind::reduce, ins, {}, f);
  }
  // 2-D convolution, NCHW, owning its weights [cout, cin/groups, kh, kw] (+ cout bias when `bias`).
  // ph/pw < 0: TensorFlow SAME padding (out = ceil(in / stride)); otherwise explicit zero padding.
  T conv(const std::string& name, const T& x, std::int64_t cout, std::int64_t kh, std::int64_t kw, std::int64_t sh,
         std::int64_t sw, std::int64_t ph, std::int64_t pw, std::int64_t groups = 1, bool bias = false) {
    const std::int64_t cin = x.shape[1], h = x.shape[2], w = x.shape[3];
    const std::int64_t ho = out_size(h, kh, sh, ph), wo = out_size(w, kw, sw, pw);
    GO_CHECK(ho > 0 && wo > 0, where(), "the image is too small: '", name, "' gets a ", h, "x", w, " input for a ",
             kh, "x", kw, " window");
    Shape out{x.shape[0], cout, ho, wo};
    const std::int64_t per_out = (cin / groups) * kh * kw;
    const std::int64_t pb = (cout * per_out + (bias ? cout : 0)) * 4;
    return op1(name, OpKind::conv, {x}, out, 2 * numel(out) * static_cast<double>(per_out), pb);
  }
  T batch_norm(const std::string& name, const T& x) {  // owns gamma and beta
    return op1(name, OpKind::batch_norm, {x}, x.shape, 5 * numel(x.shape), 2 * x.shape[1] * 4);
  }
  // Square-window pooling; p < 0: SAME padding.
  T pool(const std::string& name, OpKind kind, const T& x, std::int64_t k, std::int64_t s, std::int64_t p) {
    const std::int64_t ho = out_size(x.shape[2], k, s, p), wo = out_size(x.shape[3], k, s, p);
    GO_CHECK(ho > 0 && wo > 0, where(), "the image is too small: '", name, "' gets a ", x.shape[2], "x", x.shape[3],
             " input for a ", k, "x", k, " window");
    Shape out{x.shape[0], x.shape[1], ho, wo};
    return op1(name, kind, {x}, out, static_cast<double>(k * k) * numel(out));
  }
  T global_pool(const std::string& name, const T& x) {
    return op1(name, OpKind::global_pool, {x}, {x.shape[0], x.shape[1]}, numel(x.shape));
  }
  // Fully connected layer owning its weights and bias: x [B, K] -> [B, n].
  T fc(const std::string& name, const T& x, std::int64_t n) {
    const std::int64_t k = x.shape[1];
    return op1(name, OpKind::matmul, {x}, {x.shape[0], n}, 2.0 * static_cast<double>(x.shape[0] * k * n) +
                                                               static_cast<double>(x.shape[0] * n),
               (k * n + n) * 4);
  }
  OpGraph build() { return b_.build(); }

 private:
  static std::int64_t out_size(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t p) {
    if (p < 0) return (in + s - 1) / s;
    const std::int64_t span = in + 2 * p - k;
    return span < 0 ? 0 : span / s + 1;
  }
  GraphBuilder b_;
};

// Resolved sizes.
struct Sizes {
  std::string name;
  std::int64_t number = 0;
  std::int64_t batch = 0, seq = 0, hidden = 0, segments = 0, depth = 0, vocab = 0, image = 0;
};

// ---- recurrent models -------------------------------------------------------------------------
// One LSTM step (TF BasicLSTMCell in a DropoutWrapper, forget bias 1, gates fused into one matmul):
// returns {h, c}. With `mask`, finished sequences keep their state (dynamic_rnn with lengths); the
// last step masks no cell state nobody reads (every forward output feeds the loss, see below).
inline std::pair<T, T> lstm_cell(Net& n, const std::string& p, const T& x, const T& h, const T& c, const T& w,
                                 const T& bias, const T* mask, bool last = false) {
  T xd = n.dropout(p + "/dropout", x);
  T xh = n.concat(p + "/concat", {xd, h}, -1);
  T gates = n.matmul(p + "/gates", xh, w, &bias);
  auto g = n.split(p + "/split", gates, 4);
  T i = n.ew(p + "/input_gate", OpKind::sigmoid, {g[0]}, 4);
  T j = n.ew(p + "/candidate", OpKind::tanh, {g[1]}, 4);
  T fb = n.ew(p + "/forget_bias", OpKind::add, {g[2]});
  T f = n.ew(p + "/forget_gate", OpKind::sigmoid, {fb}, 4);
  T o = n.ew(p + "/output_gate", OpKind::sigmoid, {g[3]}, 4);
  T fc = n.ew(p + "/forget", OpKind::mul, {c, f});
  T ij = n.ew(p + "/write", OpKind::mul, {i, j});
  T c2 = n.add(p + "/cell", fc, ij);
  T tc = n.ew(p + "/cell_tanh", OpKind::tanh, {c2}, 4);
  T h2 = n.ew(p + "/hidden", OpKind::mul, {tc, o});
  if (mask) {
    h2 = n.ew(p + "/mask_hidden", OpKind::elementwise, {h2, h, *mask});
    if (!last) c2 = n.ew(p + "/mask_cell", OpKind::elementwise, {c2, c, *mask});
  }
  return {h2, c2};
}

// Names: embedding/..., lstm<l>/..., softmax/...
inline OpGraph rnnlm(const Sizes& z) {
  const std::int64_t B = z.batch, L = z.number, S = z.seq, H = z.hidden, V = z.vocab;
  Net n(z.name, B);
  T tokens = n.input("embedding/tokens", {S, B});
  T emb = n.variable("embedding/table", {V, H});
  std::vector<T> w, bias, h, c;
  for (std::int64_t l = 0; l < L; ++l) {
    const std::string p = "lstm" + str(l);
    w.push_back(n.variable(p + "/kernel", {2 * H, 4 * H}));
    bias.push_back(n.variable(p + "/bias", {4 * H}));
    h.push_back(n.input(p + "/h0", {B, H}));
    c.push_back(n.input(p + "/c0", {B, H}));
  }
  T proj = n.variable("softmax/kernel", {H, V});
  T proj_b = n.variable("softmax/bias", {V});
  T labels = n.input("softmax/labels", {S, B});
  // one lookup for the whole sequence, unstacked into steps; one softmax over the stacked outputs
  auto xs = n.unstack("embedding/unstack", n.op1("embedding/lookup", OpKind::gather, {emb, tokens}, {S, B, H}, 0));
  for (std::int64_t t = 0; t < S; ++t) {
    T x = xs[at(t)];
    for (std::int64_t l = 0; l < L; ++l) {
      auto [h2, c2] = lstm_cell(n, "lstm" + str(l) + "/t" + str(t), x, h[at(l)], c[at(l)], w[at(l)], bias[at(l)], nullptr);
      h[at(l)] = h2;
      c[at(l)] = c2;
      x = h2;
    }
    xs[at(t)] = x;
  }
  T out = n.dropout("softmax/dropout", n.stack("softmax/stack", xs));
  T logits = n.matmul("softmax/logits", out, proj, &proj_b);
  n.sum("softmax/loss", {n.xent("softmax/xent", logits, labels)});
  return n.build();
}

// Names: encoder/{embedding,l0_fw,l0_bw,l<i>,memory}/..., decoder/{embedding,attention,l<i>,softmax}/...
inline OpGraph gnmt(const Sizes& z) {
  const std::int64_t B = z.batch, L = z.number, S = z.seq, H = z.hidden, V = z.vocab;
  Net n(z.name, B);
  T src = n.input("encoder/embedding/source", {S, B});
  T src_mask = n.input("encoder/embedding/source_mask", {B, S});
  T emb_src = n.variable("encoder/embedding/table", {V, H});
  auto xs = n.unstack("encoder/embedding/unstack",
                      n.op1("encoder/embedding/lookup", OpKind::gather, {emb_src, src}, {S, B, H}, 0));
  auto run_layer = [&](const std::string& p, const std::vector<T>& in, bool reverse, std::int64_t in_width) {
    T w = n.variable(p + "/kernel", {in_width + H, 4 * H});
    T bb = n.variable(p + "/bias", {4 * H});
    T h = n.input(p + "/h0", {B, H}), c = n.input(p + "/c0", {B, H});
    std::vector<T> out(in.size());
    for (std::size_t k = 0; k < in.size(); ++k) {
      const std::size_t t = reverse ? in.size() - 1 - k : k;
      auto [h2, c2] = lstm_cell(n, p + "/t" + std::to_string(t), in[t], h, c, w, bb, &src_mask, k + 1 == in.size());
      h = h2;
      c = c2;
      out[t] = h2;
    }
    return out;
  };
  // encoder: bidirectional layer 0, layer 1 reads both directions, residual connections from layer 2
  auto fw = run_layer("encoder/l0_fw", xs, false, H);
  auto bw = run_layer("encoder/l0_bw", xs, true, H);
  std::vector<T> enc(at(S));
  for (std::int64_t t = 0; t < S; ++t)
    enc[at(t)] = n.concat("encoder/l0/t" + str(t) + "/bidir", {fw[at(t)], bw[at(t)]}, -1);
  if (L >= 2) enc = run_layer("encoder/l1", enc, false, 2 * H);
  for (std::int64_t l = 2; l < L; ++l) {
    auto next = run_layer("encoder/l" + str(l), enc, false, H);
    for (std::int64_t t = 0; t < S; ++t)
      next[at(t)] = n.add("encoder/l" + str(l) + "/t" + str(t) + "/residual", next[at(t)], enc[at(t)]);
    enc = std::move(next);
  }
  T memory = n.concat("encoder/memory", enc, 0);  // [S*B, W] stacked over time
  const std::int64_t mw = memory.shape.back();   // 2H when L == 1, else H
  memory.shape = {S, B, mw};
  // normalized Bahdanau attention, queried by the bottom decoder layer (GNMT)
  T wm = n.variable("decoder/attention/memory_kernel", {mw, H});
  T wq = n.variable("decoder/attention/query_kernel", {H, H});
  T v = n.variable("decoder/attention/v", {H + 1});  // v and its norm scale g
  T keys = n.matmul("decoder/attention/keys", memory, wm);  // [S, B, H]
  T tgt = n.input("decoder/embedding/target", {S, B});
  T tgt_mask = n.input("decoder/embedding/target_mask", {B, S});
  T emb_tgt = n.variable("decoder/embedding/table", {V, H});
  std::vector<T> dw, db, h, c;
  for (std::int64_t l = 0; l < L; ++l) {
    const std::string p = "decoder/l" + str(l);
    dw.push_back(n.variable(p + "/kernel", {H + mw + H, 4 * H}));  // [input, context, h]
    db.push_back(n.variable(p + "/bias", {4 * H}));
    h.push_back(n.input(p + "/h0", {B, H}));
    c.push_back(n.input(p + "/c0", {B, H}));
  }
  T proj = n.variable("decoder/softmax/kernel", {H, V});
  T labels = n.input("decoder/softmax/labels", {S, B});
  T context = n.input("decoder/attention/context0", {B, mw});
  auto ys = n.unstack("decoder/embedding/unstack",
                      n.op1("decoder/embedding/lookup", OpKind::gather, {emb_tgt, tgt}, {S, B, H}, 0));
  for (std::int64_t t = 0; t < S; ++t) {
    const std::string ts = "/t" + str(t);
    T x = ys[at(t)];
    T in0 = n.concat("decoder/l0" + ts + "/with_context", {x, context}, -1);
    auto [h0, c0] = lstm_cell(n, "decoder/l0" + ts, in0, h[0], c[0], dw[0], db[0], &tgt_mask, t + 1 == S);
    h[0] = h0;
    c[0] = c0;
    const std::string ap = "decoder/attention" + ts;
    const double sbh = static_cast<double>(S * B * H);
    T q = n.matmul(ap + "/query", h0, wq);
    T e = n.op1(ap + "/add_keys", OpKind::add, {keys, q}, {S, B, H}, sbh);
    T th = n.ew(ap + "/tanh", OpKind::tanh, {e}, 4);
    T sv = n.op1(ap + "/scale_v", OpKind::mul, {th, v}, {S, B, H}, sbh);
    T score = n.op1(ap + "/score", OpKind::reduce, {sv}, {B, S}, sbh);
    T masked = n.ew(ap + "/mask", OpKind::elementwise, {score, src_mask});
    T probs = n.ew(ap + "/softmax", OpKind::softmax, {masked}, 5);
    context = n.op1(ap + "/context", OpKind::matmul, {probs, memory}, {B, mw}, 2.0 * static_cast<double>(S * B * mw));
    x = h0;
    for (std::int64_t l = 1; l < L; ++l) {
      const std::string p = "decoder/l" + str(l) + ts;
      T in = n.concat(p + "/with_context", {x, context}, -1);
      auto [h2, c2] = lstm_cell(n, p, in, h[at(l)], c[at(l)], dw[at(l)], db[at(l)], &tgt_mask, t + 1 == S);
      h[at(l)] = h2;
      c[at(l)] = c2;
      x = l >= 2 ? n.add(p + "/residual", h2, x) : h2;
    }
    ys[at(t)] = x;
  }
  // tensorflow/nmt: the output projection and the loss run once over the stacked decoder outputs
  T logits = n.matmul("decoder/softmax/logits", n.stack("decoder/softmax/stack", ys), proj);
  T xe = n.xent("decoder/softmax/xent", logits, labels);
  n.sum("decoder/softmax/loss", {n.ew("decoder/softmax/weights", OpKind::mul, {xe, tgt_mask})});
  return n.build();
}

// ---- Transformer-XL ---------------------------------------------------------------------------
// Names: embedding/..., layer<l>/..., softmax/...
inline OpGraph transformer_xl(const Sizes& z) {
  const std::int64_t B = z.batch, L = z.number, S = z.seq, D = z.hidden, G = z.segments, V = z.vocab;
  const std::int64_t heads = std::max<std::int64_t>(1, D / 64), F = 4 * D, K = 2 * S;  // keys: memory + segment
  Net n(z.name, B);
  T emb = n.variable("embedding/table", {V, D});
  T pos_seq = n.input("embedding/positions", {K});
  T pos_emb = n.op1("embedding/sinusoid", OpKind::elementwise, {pos_seq}, {K, D}, 4.0 * static_cast<double>(K * D));
  struct Layer {
    T qkv, r_net, r_w_bias, r_r_bias, out, ln1, ff1, ff1_b, ff2, ff2_b, ln2, mem0;
  };
  std::vector<Layer> ws;
  for (std::int64_t l = 0; l < L; ++l) {
    const std::string p = "layer" + str(l);
    ws.push_back(Layer{n.variable(p + "/qkv", {D, 3 * D}), n.variable(p + "/r_net", {D, D}),
                       n.variable(p + "/r_w_bias", {D}), n.variable(p + "/r_r_bias", {D}),
                       n.variable(p + "/out", {D, D}), n.variable(p + "/ln1", {2 * D}), n.variable(p + "/ff1", {D, F}),
                       n.variable(p + "/ff1_bias", {F}), n.variable(p + "/ff2", {F, D}),
                       n.variable(p + "/ff2_bias", {D}), n.variable(p + "/ln2", {2 * D}),
                       n.input(p + "/memory0", {B, S, D})});
  }
  T proj = n.variable("softmax/kernel", {D, V});
  T proj_b = n.variable("softmax/bias", {V});
  std::vector<T> mem;
  for (const Layer& w : ws) mem.push_back(w.mem0);
  const double att = 2.0 * static_cast<double>(B * S * K * D);
  T tokens = n.input("embedding/tokens", {G, B, S});
  auto embedded = n.unstack("embedding/unstack", n.op1("embedding/lookup", OpKind::gather, {emb, tokens}, {G, B, S, D}, 0));
  auto labels = n.unstack("softmax/labels", n.input("softmax/targets", {G, B, S}));
  std::vector<T> losses;
  for (std::int64_t g = 0; g < G; ++g) {
    const std::string sg = "/seg" + str(g);
    T h = n.dropout("embedding" + sg + "/dropout", embedded[at(g)]);
    T r = n.dropout("embedding" + sg + "/pos_dropout", pos_emb);
    for (std::int64_t l = 0; l < L; ++l) {
      const std::string p = "layer" + str(l) + sg;
      const Layer& w = ws[at(l)];
      T ctx = n.concat(p + "/with_memory", {mem[at(l)], h}, 1);  // [B, 2S, D]
      T qkv = n.matmul(p + "/qkv", ctx, w.qkv);
      auto parts = n.split(p + "/split_qkv", qkv, 3);
      T q = n.slice(p + "/query", parts[0], {B, S, D});  // queries: the segment's own positions
      T rk = n.matmul(p + "/r_head_k", r, w.r_net);
      T rwq = n.op1(p + "/rw_query", OpKind::add, {q, w.r_w_bias}, q.shape, numel(q.shape));
      T ac = n.op1(p + "/content_score", OpKind::matmul, {rwq, parts[1]}, {B, heads, S, K}, att);
      T rrq = n.op1(p + "/rr_query", OpKind::add, {q, w.r_r_bias}, q.shape, numel(q.shape));
      T bd = n.op1(p + "/position_score", OpKind::matmul, {rrq, rk}, {B, heads, S, K}, att);
      T bds = n.slice(p + "/rel_shift", bd, bd.shape);
      T sc = n.add(p + "/score", ac, bds);
      T scaled = n.ew(p + "/scale", OpKind::mul, {sc});
      T masked = n.ew(p + "/mask", OpKind::elementwise, {scaled});
      T prob = n.ew(p + "/softmax", OpKind::softmax, {masked}, 5);
      T pd = n.dropout(p + "/attention_dropout", prob);
      T av = n.op1(p + "/attend", OpKind::matmul, {pd, parts[2]}, {B, S, D}, att);
      T o = n.matmul(p + "/out", av, w.out);
      T od = n.dropout(p + "/out_dropout", o);
      T n1 = n.layer_norm(p + "/ln1", n.add(p + "/residual1", od, h), w.ln1);
      T f1 = n.matmul(p + "/ff1", n1, w.ff1, &w.ff1_b);
      T a1 = n.dropout(p + "/ff_dropout1", n.relu(p + "/relu", f1));
      T f2 = n.dropout(p + "/ff_dropout2", n.matmul(p + "/ff2", a1, w.ff2, &w.ff2_b));
      T n2 = n.layer_norm(p + "/ln2", n.add(p + "/residual2", f2, n1), w.ln2);
      mem[at(l)] = h;  // the next segment's memory: this segment's input to the layer
      h = n2;
    }
    T hd = n.dropout("softmax" + sg + "/dropout", h);
    T logits = n.matmul("softmax" + sg + "/logits", hd, proj, &proj_b);
    losses.push_back(n.xent("softmax" + sg + "/xent", logits, labels[at(g)]));
  }
  n.sum("softmax/loss", losses);
  return n.build();
}

// ---- WaveNet ----------------------------------------------------------------------------------
// Names: input/..., stack<s>/layer<i>/..., head/...
inline OpGraph wavenet(const Sizes& z) {
  const std::int64_t B = z.batch, stacks = z.number, per_stack = z.depth, Lc = z.seq, C = z.segments, R = z.hidden,
                     Q = z.vocab, skip_c = 256;
  const std::int64_t max_dilation = std::int64_t{1} << std::min<std::int64_t>(per_stack - 1, 9);
  Net n(z.name, B);
  GO_CHECK(Lc >= max_dilation, n.where(), "seq (samples per chunk) ", Lc, " must be at least the largest dilation ",
           max_dilation);
  // A causal width-2 convolution of a chunk with `d` samples of history: [B, cin, Lc + d] -> [B, cout, Lc].
  auto conv = [&](const std::string& name, const T& in, const T& w, std::int64_t cin, std::int64_t cout,
                  std::int64_t width) {
    Shape out{B, cout, Lc};
    return n.op1(name, OpKind::conv, {in, w}, out, 2 * numel(out) * static_cast<double>(cin * width));
  };
  // The chunk with its history: zero padding for the first chunk, else the previous chunk's tail.
  auto with_history = [&](const std::string& p, const std::vector<T>& xs, std::int64_t c, std::int64_t d) {
    const T& x = xs[at(c)];
    if (c == 0) return n.op1(p + "/pad", OpKind::pad, {x}, {B, x.shape[1], Lc + d}, 0);
    T halo = n.slice(p + "/halo", xs[at(c - 1)], {B, x.shape[1], d});
    return n.concat(p + "/concat", {halo, x}, 2);
  };
  T w_in = n.variable("input/causal_conv", {R, 2 * Q + 1});
  std::vector<T> audio, h;
  for (std::int64_t c = 0; c < C; ++c) audio.push_back(n.input("input/chunk" + str(c) + "/audio", {B, Q, Lc}));
  for (std::int64_t c = 0; c < C; ++c) {
    const std::string p = "input/chunk" + str(c);
    h.push_back(conv(p + "/causal_conv", with_history(p, audio, c, 1), w_in, Q, R, 2));
  }
  std::vector<T> skip(at(C));
  bool have_skip = false;
  for (std::int64_t s = 0; s < stacks; ++s)
    for (std::int64_t i = 0; i < per_stack; ++i) {
      const std::string lp = "stack" + str(s) + "/layer" + str(i);
      const std::int64_t d = std::int64_t{1} << (i % 10);
      T wf = n.variable(lp + "/filter", {R, 2 * R + 1});
      T wg = n.variable(lp + "/gate", {R, 2 * R + 1});
      const bool last = s + 1 == stacks && i + 1 == per_stack;  // its residual output would feed nothing
      const T wr = last ? T{} : n.variable(lp + "/residual", {R, R + 1});
      T ws = n.variable(lp + "/skip", {skip_c, R + 1});
      std::vector<T> next(at(C));
      for (std::int64_t c = 0; c < C; ++c) {
        const std::string p = lp + "/chunk" + str(c);
        T x = with_history(p, h, c, d);
        T f = n.ew(p + "/tanh", OpKind::tanh, {conv(p + "/filter", x, wf, R, R, 2)}, 4);
        T g = n.ew(p + "/sigmoid", OpKind::sigmoid, {conv(p + "/gate", x, wg, R, R, 2)}, 4);
        T zt = n.ew(p + "/gated", OpKind::mul, {f, g});
        if (!last) next[at(c)] = n.add(p + "/residual_add", conv(p + "/residual", zt, wr, R, R, 1), h[at(c)]);
        T sk = conv(p + "/skip", zt, ws, R, skip_c, 1);
        skip[at(c)] = have_skip ? n.add(p + "/skip_add", skip[at(c)], sk) : sk;
      }
      have_skip = true;
      h = std::move(next);
    }
  T w1 = n.variable("head/conv1", {skip_c, skip_c + 1});
  T w2 = n.variable("head/conv2", {Q, skip_c + 1});
  std::vector<T> losses;
  for (std::int64_t c = 0; c < C; ++c) {
    const std::string p = "head/chunk" + str(c);
    T r1 = n.relu(p + "/relu1", skip[at(c)]);
    T r2 = n.relu(p + "/relu2", conv(p + "/conv1", r1, w1, skip_c, skip_c, 1));
    T logits = conv(p + "/conv2", r2, w2, skip_c, Q, 1);
    logits.shape = {B, Lc, Q};  // classes last for the loss
    T labels = n.input(p + "/labels", {B, Lc});
    losses.push_back(n.xent(p + "/xent", logits, labels));
  }
  n.sum("head/loss", losses);
  return n.build();
}

// ---- Inception-v3 -----------------------------------------------------------------------------
// torchvision's Inception3. Names: <module>/b<branch>/<conv>/{conv,bn,relu}, <module>/concat,
// modules stem, mixed_5b..mixed_7c, aux, head.
inline OpGraph inception_v3(const Sizes& z) {
  const std::int64_t B = z.batch, S = z.image, V = z.vocab;
  Net n(z.name, B);
  auto basic = [&](const std::string& p, const T& in, std::int64_t c, std::int64_t kh, std::int64_t kw,
                   std::int64_t s = 1, std::int64_t ph = 0, std::int64_t pw = 0) {
    T y = n.conv(p + "/conv", in, c, kh, kw, s, s, ph, pw);
    return n.relu(p + "/relu", n.batch_norm(p + "/bn", y));
  };
  T x = n.input("stem/images", {B, 3, S, S});
  T labels = n.input("head/labels", {B});
  x = basic("stem/conv1a_3x3", x, 32, 3, 3, 2);
  x = basic("stem/conv2a_3x3", x, 32, 3, 3);
  x = basic("stem/conv2b_3x3", x, 64, 3, 3, 1, 1, 1);
  x = n.pool("stem/pool1", OpKind::max_pool, x, 3, 2, 0);
  x = basic("stem/conv3b_1x1", x, 80, 1, 1);
  x = basic("stem/conv4a_3x3", x, 192, 3, 3);
  x = n.pool("stem/pool2", OpKind::max_pool, x, 3, 2, 0);
  auto module_a = [&](const std::string& m, const T& in, std::int64_t pool_features) {
    T b0 = basic(m + "/b0/1x1", in, 64, 1, 1);
    T b1 = basic(m + "/b1/5x5_reduce", in, 48, 1, 1);
    b1 = basic(m + "/b1/5x5", b1, 64, 5, 5, 1, 2, 2);
    T b2 = basic(m + "/b2/3x3_reduce", in, 64, 1, 1);
    b2 = basic(m + "/b2/3x3a", b2, 96, 3, 3, 1, 1, 1);
    b2 = basic(m + "/b2/3x3b", b2, 96, 3, 3, 1, 1, 1);
    T b3 = n.pool(m + "/b3/pool", OpKind::avg_pool, in, 3, 1, 1);
    b3 = basic(m + "/b3/1x1", b3, pool_features, 1, 1);
    return n.concat(m + "/concat", {b0, b1, b2, b3}, 1);
  };
  auto module_b = [&](const std::string& m, const T& in) {  // reduction-A
    T b0 = basic(m + "/b0/3x3", in, 384, 3, 3, 2);
    T b1 = basic(m + "/b1/3x3_reduce", in, 64, 1, 1);
    b1 = basic(m + "/b1/3x3a", b1, 96, 3, 3, 1, 1, 1);
    b1 = basic(m + "/b1/3x3b", b1, 96, 3, 3, 2);
    T b2 = n.pool(m + "/b2/pool", OpKind::max_pool, in, 3, 2, 0);
    return n.concat(m + "/concat", {b0, b1, b2}, 1);
  };
  auto module_c = [&](const std::string& m, const T& in, std::int64_t c7) {  // factorized 7x7
    T b0 = basic(m + "/b0/1x1", in, 192, 1, 1);
    T b1 = basic(m + "/b1/7x7_reduce", in, c7, 1, 1);
    b1 = basic(m + "/b1/1x7", b1, c7, 1, 7, 1, 0, 3);
    b1 = basic(m + "/b1/7x1", b1, 192, 7, 1, 1, 3, 0);
    T b2 = basic(m + "/b2/7x7dbl_reduce", in, c7, 1, 1);
    b2 = basic(m + "/b2/7x1a", b2, c7, 7, 1, 1, 3, 0);
    b2 = basic(m + "/b2/1x7a", b2, c7, 1, 7, 1, 0, 3);
    b2 = basic(m + "/b2/7x1b", b2, c7, 7, 1, 1, 3, 0);
    b2 = basic(m + "/b2/1x7b", b2, 192, 1, 7, 1, 0, 3);
    T b3 = n.pool(m + "/b3/pool", OpKind::avg_pool, in, 3, 1, 1);
    b3 = basic(m + "/b3/1x1", b3, 192, 1, 1);
    return n.concat(m + "/concat", {b0, b1, b2, b3}, 1);
  };
  auto module_d = [&](const std::string& m, const T& in) {  // reduction-B
    T b0 = basic(m + "/b0/3x3_reduce", in, 192, 1, 1);
    b0 = basic(m + "/b0/3x3", b0, 320, 3, 3, 2);
    T b1 = basic(m + "/b1/7x7x3_reduce", in, 192, 1, 1);
    b1 = basic(m + "/b1/1x7", b1, 192, 1, 7, 1, 0, 3);
    b1 = basic(m + "/b1/7x1", b1, 192, 7, 1, 1, 3, 0);
    b1 = basic(m + "/b1/3x3", b1, 192, 3, 3, 2);
    T b2 = n.pool(m + "/b2/pool", OpKind::max_pool, in, 3, 2, 0);
    return n.concat(m + "/concat", {b0, b1, b2}, 1);
  };
  auto module_e = [&](const std::string& m, const T& in) {  // expanded filter bank
    T b0 = basic(m + "/b0/1x1", in, 320, 1, 1);
    T b1 = basic(m + "/b1/3x3_reduce", in, 384, 1, 1);
    T b1a = basic(m + "/b1/1x3", b1, 384, 1, 3, 1, 0, 1);
    T b1b = basic(m + "/b1/3x1", b1, 384, 3, 1, 1, 1, 0);
    b1 = n.concat(m + "/b1/concat", {b1a, b1b}, 1);
    T b2 = basic(m + "/b2/3x3dbl_reduce", in, 448, 1, 1);
    b2 = basic(m + "/b2/3x3", b2, 384, 3, 3, 1, 1, 1);
    T b2a = basic(m + "/b2/1x3", b2, 384, 1, 3, 1, 0, 1);
    T b2b = basic(m + "/b2/3x1", b2, 384, 3, 1, 1, 1, 0);
    b2 = n.concat(m + "/b2/concat", {b2a, b2b}, 1);
    T b3 = n.pool(m + "/b3/pool", OpKind::avg_pool, in, 3, 1, 1);
    b3 = basic(m + "/b3/1x1", b3, 192, 1, 1);
    return n.concat(m + "/concat", {b0, b1, b2, b3}, 1);
  };
  x = module_a("mixed_5b", x, 32);
  x = module_a("mixed_5c", x, 64);
  x = module_a("mixed_5d", x, 64);
  x = module_b("mixed_6a", x);
  x = module_c("mixed_6b", x, 128);
  x = module_c("mixed_6c", x, 160);
  x = module_c("mixed_6d", x, 160);
  x = module_c("mixed_6e", x, 192);
  // auxiliary classifier (training only)
  T a = n.pool("aux/pool", OpKind::avg_pool, x, 5, 3, 0);
  a = basic("aux/conv0", a, 128, 1, 1);
  a = basic("aux/conv1", a, 768, a.shape[2], a.shape[3]);
  a = n.fc("aux/fc", n.global_pool("aux/global_pool", a), V);
  T aux_loss = n.xent("aux/xent", a, labels);
  x = module_d("mixed_7a", x);
  x = module_e("mixed_7b", x);
  x = module_e("mixed_7c", x);
  T y = n.dropout("head/dropout", n.global_pool("head/global_pool", x));
  y = n.fc("head/fc", y, V);
  n.sum("head/loss", {n.xent("head/xent", y, labels), aux_loss});
  return n.build();
}

// ---- AmoebaNet-A ------------------------------------------------------------------------------
enum class CellOp { avg3, max3, sep3, sep5, sep7, none, conv1x7_7x1 };
struct CellSpec {
  std::array<CellOp, 10> ops;
  std::array<int, 10> inputs;  // hidden state each op reads
  std::array<int, 7> used;     // states some block reads (the others make the cell output)
};
// tensorflow/tpu models/official/amoeba_net/model_specs.py, 'amoeba_net_a'.
inline constexpr CellSpec kAmoebaNormal{
    {CellOp::avg3, CellOp::max3, CellOp::sep3, CellOp::none, CellOp::none, CellOp::avg3, CellOp::sep3, CellOp::sep5,
     CellOp::avg3, CellOp::sep3},
    {0, 0, 1, 1, 0, 1, 0, 2, 5, 0},
    {1, 0, 1, 0, 0, 1, 0}};
inline constexpr CellSpec kAmoebaReduction{
    {CellOp::sep3, CellOp::avg3, CellOp::max3, CellOp::sep7, CellOp::max3, CellOp::max3, CellOp::sep3,
     CellOp::conv1x7_7x1, CellOp::avg3, CellOp::sep7},
    {1, 0, 0, 2, 1, 0, 4, 0, 1, 0},
    {1, 1, 0, 0, 0, 0, 0}};

// Names: stem/..., stem_cell<i>/..., cell<i>/..., reduction_cell<i>/..., aux/..., head/...; inside a
// cell: base/..., comb<b>/{left,right,add}/..., output/...
inline OpGraph amoebanet(const Sizes& z) {
  const std::int64_t B = z.batch, S = z.image, F = z.hidden, N = z.depth, V = z.vocab;
  Net n(z.name, B);
  auto bn = [&](const std::string& p, const T& x) { return n.batch_norm(p, x); };
  auto conv1x1 = [&](const std::string& p, const T& x, std::int64_t c, std::int64_t s = 1) {
    return n.conv(p, x, c, 1, 1, s, s, -1, -1);
  };
  auto factorized_reduction = [&](const std::string& p, const T& x, std::int64_t c, std::int64_t stride) {
    if (stride == 1) return bn(p + "/bn", conv1x1(p + "/conv", x, c));
    T p1 = n.pool(p + "/path1/pool", OpKind::avg_pool, x, 1, 2, 0);
    p1 = conv1x1(p + "/path1/conv", p1, c / 2);
    T p2 = n.op1(p + "/path2/pad", OpKind::pad, {x}, {B, x.shape[1], x.shape[2] + 1, x.shape[3] + 1}, 0);
    p2 = n.slice(p + "/path2/shift", p2, x.shape);
    p2 = n.pool(p + "/path2/pool", OpKind::avg_pool, p2, 1, 2, 0);
    p2 = conv1x1(p + "/path2/conv", p2, c - c / 2);
    return bn(p + "/bn", n.concat(p + "/concat", {p1, p2}, 1));
  };
  auto apply = [&](const std::string& p, T x, CellOp op, std::int64_t stride, std::int64_t fs) {
    const std::int64_t cin = x.shape[1];
    switch (op) {
      case CellOp::sep3:
      case CellOp::sep5:
      case CellOp::sep7: {
        const std::int64_t k = op == CellOp::sep3 ? 3 : op == CellOp::sep5 ? 5 : 7;
        for (int l = 1; l <= 2; ++l) {
          const std::string q = p + "/sep" + std::to_string(l);
          x = n.relu(q + "/relu", x);
          x = n.conv(q + "/depthwise", x, x.shape[1], k, k, stride, stride, -1, -1, x.shape[1]);
          x = bn(q + "/bn", conv1x1(q + "/pointwise", x, fs));
          stride = 1;
        }
        break;
      }
      case CellOp::avg3:
      case CellOp::max3:
        x = n.pool(p + "/pool", op == CellOp::avg3 ? OpKind::avg_pool : OpKind::max_pool, x, 3, stride, -1);
        if (cin != fs) x = bn(p + "/bn", conv1x1(p + "/1x1", x, fs));
        break;
      case CellOp::none:
        if (stride > 1 || cin != fs) x = bn(p + "/bn", conv1x1(p + "/1x1", n.relu(p + "/relu", x), fs, stride));
        return x;  // no drop-path on identities
      case CellOp::conv1x7_7x1: {  // bottleneck to F/4 (none when F/4 < 1)
        const std::int64_t r = fs / 4 >= 1 ? fs / 4 : fs;
        if (r != fs) x = bn(p + "/pre_bn", conv1x1(p + "/pre_1x1", n.relu(p + "/relu", x), r));
        x = bn(p + "/bn_1x7", n.conv(p + "/1x7", n.relu(p + "/relu_1x7", x), r, 1, 7, 1, stride, -1, -1));
        x = bn(p + "/bn_7x1", n.conv(p + "/7x1", n.relu(p + "/relu_7x1", x), r, 7, 1, stride, 1, -1, -1));
        if (r != fs) x = bn(p + "/post_bn", conv1x1(p + "/post_1x1", n.relu(p + "/relu_post", x), fs));
        break;
      }
    }
    return n.dropout(p + "/drop_path", x);
  };
  auto cell = [&](const std::string& p, const CellSpec& spec, const T& in, const std::optional<T>& prev_layer,
                  std::int64_t fs, std::int64_t stride) {
    T prev = prev_layer ? *prev_layer : in;
    if (prev_layer && prev.shape[2] != in.shape[2])
      prev = factorized_reduction(p + "/base/prev_reduce", n.relu(p + "/base/prev_relu", prev), fs, 2);
    else if (prev_layer && prev.shape[1] != fs)
      prev = bn(p + "/base/prev_bn", conv1x1(p + "/base/prev_1x1", n.relu(p + "/base/prev_relu", prev), fs));
    T cur = bn(p + "/base/bn", conv1x1(p + "/base/1x1", n.relu(p + "/base/relu", in), fs));
    std::vector<T> states{cur, prev};
    for (int b = 0; b < 5; ++b) {
      const std::string q = p + "/comb" + std::to_string(b);
      const int li = spec.inputs[at(2 * b)], ri = spec.inputs[at(2 * b + 1)];
      T left = apply(q + "/left", states[at(li)], spec.ops[at(2 * b)], li < 2 ? stride : 1, fs);
      T right = apply(q + "/right", states[at(ri)], spec.ops[at(2 * b + 1)], ri < 2 ? stride : 1, fs);
      states.push_back(n.add(q + "/add", left, right));
    }
    const T last = states.back();
    std::vector<T> outs;
    for (std::size_t i = 0; i < states.size(); ++i) {
      if (spec.used[i]) continue;
      T s = states[i];
      if (s.shape[1] != last.shape[1] || s.shape[2] != last.shape[2])
        s = factorized_reduction(p + "/output/reduce" + std::to_string(i), s, last.shape[1],
                                 s.shape[2] != last.shape[2] ? 2 : 1);
      outs.push_back(s);
    }
    return n.concat(p + "/output/concat", outs, 1);
  };
  T x = n.input("stem/images", {B, 3, S, S});
  T labels = n.input("head/labels", {B});
  x = bn("stem/conv0/bn", n.conv("stem/conv0/conv", x, 32, 3, 3, 2, 2, 0, 0));
  std::vector<std::optional<T>> outs{std::nullopt, x};
  double scaling = 0.25;  // two stem reduction cells at F/4 and F/2
  for (int c = 0; c < 2; ++c) {
    x = cell("stem_cell" + std::to_string(c), kAmoebaReduction, x, outs[outs.size() - 2],
             static_cast<std::int64_t>(static_cast<double>(F) * scaling), 2);
    outs.push_back(x);
    scaling *= 2;
  }
  const std::int64_t cells = 3 * N, red1 = cells / 3, red2 = 2 * cells / 3;
  std::optional<T> aux_loss;
  scaling = 1.0;
  for (std::int64_t c = 0; c < cells; ++c) {
    if (c == red1 || c == red2) {
      scaling *= 2;
      x = cell("reduction_cell" + str(c == red1 ? 0 : 1), kAmoebaReduction, x, outs[outs.size() - 2],
               static_cast<std::int64_t>(static_cast<double>(F) * scaling), 2);
      outs.push_back(x);
    }
    x = cell("cell" + str(c), kAmoebaNormal, x, outs[outs.size() - 2],
             static_cast<std::int64_t>(static_cast<double>(F) * scaling), 1);
    outs.push_back(x);
    if (c == red2 - 1) {  // auxiliary head before the second reduction
      T a = n.pool("aux/pool", OpKind::avg_pool, n.relu("aux/relu", x), 5, 3, 0);
      a = n.relu("aux/relu0", bn("aux/bn0", conv1x1("aux/proj", a, 128)));
      a = n.relu("aux/relu1", bn("aux/bn1", n.conv("aux/conv", a, 768, a.shape[2], a.shape[3], 1, 1, 0, 0)));
      a = n.fc("aux/fc", n.global_pool("aux/flatten", a), V);
      aux_loss = n.xent("aux/xent", a, labels);
    }
  }
  T y = n.global_pool("head/global_pool", n.relu("head/relu", x));
  y = n.fc("head/fc", n.dropout("head/dropout", y), V);
  std::vector<T> losses{n.xent("head/xent", y, labels)};
  if (aux_loss) losses.push_back(*aux_loss);
  n.sum("head/loss", losses);
  return n.build();
}

// ---- placement helpers ------------------------------------------------------------------------
inline std::string_view component(std::string_view name, int k) {
  for (int i = 0; i < k; ++i) {
    const auto p = name.find('/');
    if (p == std::string_view::npos) return {};
    name.remove_prefix(p + 1);
  }
  return name.substr(0, name.find('/'));
}
// "l12_fw" with prefix "l" -> 12; -1 when `s` is not prefix + digits (+ "_suffix").
inline std::int64_t index_after(std::string_view s, std::string_view prefix) {
  if (s.substr(0, prefix.size()) != prefix || s.size() == prefix.size()) return -1;
  std::int64_t v = 0;
  std::size_t i = prefix.size();
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) v = v * 10 + (s[i] - '0');
  if (i == prefix.size() || (i < s.size() && s[i] != '_')) return -1;
  return v;
}

// Unit u of `units` ordered units on k devices: contiguous blocks when units >= k, else one each.
inline std::int32_t block(std::int64_t u, std::int64_t units, int k) {
  if (units >= k) return static_cast<std::int32_t>(u * k / units);
  return static_cast<std::int32_t>(u);
}

// The forward op of a backward/update op by make_training_graph's names, or -1.
inline OpId anchor_by_name(std::string_view s, const std::unordered_map<std::string_view, OpId>& fwd) {
  auto look = [&](std::string_view base) -> OpId {
    auto it = fwd.find(base);
    return it == fwd.end() ? -1 : it->second;
  };
  auto ends = [&](std::string_view suf) { return s.size() > suf.size() && s.substr(s.size() - suf.size()) == suf; };
  if (ends("/update")) return look(s.substr(0, s.size() - 7));
  if (ends("/grad")) return look(s.substr(0, s.size() - 5));
  const auto p = s.rfind("/grad_sum");
  if (p != std::string_view::npos && p > 0) {
    bool digits = true;
    for (std::size_t i = p + 9; i < s.size(); ++i) digits = digits && s[i] >= '0' && s[i] <= '9';
    if (digits) return look(s.substr(0, p));
  }
  return -1;
}

// Completes a placement whose forward ops (those the rule knows) are set: forward ops the rule left
// out follow their producer; backward/update ops follow their forward op; colocation groups share
// their forward member's device; the rest follow a placed neighbour (else device 0).
inline void finish_placement(const OpGraph& g, std::vector<std::int32_t>& dev) {
  const auto n = static_cast<std::size_t>(g.num_ops());
  auto follow_pred = [&](OpId v) -> std::int32_t {
    for (OpId u : g.pred(v))
      if (dev[static_cast<std::size_t>(u)] >= 0) return dev[static_cast<std::size_t>(u)];
    return -1;
  };
  for (OpId v : g.topo_order())
    if (dev[static_cast<std::size_t>(v)] < 0 && g.op(v).role == OpRole::forward) dev[static_cast<std::size_t>(v)] = follow_pred(v);
  std::unordered_map<std::string_view, OpId> fwd;
  fwd.reserve(n);
  bool training = false;
  for (const Op& o : g.ops()) {
    if (o.role == OpRole::forward) fwd.emplace(g.name(o.id), o.id);
    else training = true;
  }
  if (training)
    for (const Op& o : g.ops()) {
      if (o.role == OpRole::forward) continue;
      const OpId a = anchor_by_name(g.name(o.id), fwd);
      if (a >= 0) dev[static_cast<std::size_t>(o.id)] = dev[static_cast<std::size_t>(a)];
    }
  std::unordered_map<std::int32_t, std::int32_t> group_dev;
  for (const Op& o : g.ops())
    if (o.colocation >= 0 && o.role == OpRole::forward && dev[static_cast<std::size_t>(o.id)] >= 0)
      group_dev.emplace(o.colocation, dev[static_cast<std::size_t>(o.id)]);
  for (const Op& o : g.ops())
    if (o.colocation >= 0) {
      auto it = group_dev.find(o.colocation);
      if (it != group_dev.end()) dev[static_cast<std::size_t>(o.id)] = it->second;
    }
  for (OpId v : g.topo_order())
    if (dev[static_cast<std::size_t>(v)] < 0) dev[static_cast<std::size_t>(v)] = follow_pred(v);
  auto topo = g.topo_order();
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    auto& d = dev[static_cast<std::size_t>(*it)];
    if (d >= 0) continue;
    for (OpId w : g.succ(*it))
      if (dev[static_cast<std::size_t>(w)] >= 0) {
        d = dev[static_cast<std::size_t>(w)];
        break;
      }
  }
  for (auto& d : dev) d = std::max(d, 0);
}

// Branch splitting (Inception modules, AmoebaNet cells): modules in op order; the branches of a
// module go, heaviest first, to the least-loaded device the module has not used yet (any device
// once all are used); a module's other ops go with its heaviest branch; modules without branches
// go whole to the least-loaded device.
template <class BranchOf>
void split_branches(const OpGraph& g, int k, std::vector<std::int32_t>& dev, BranchOf branch_of) {
  const DeviceSpec spec;
  struct Module {
    std::map<std::int64_t, std::pair<double, std::vector<OpId>>> branches;
    double glue_load = 0;
    std::vector<OpId> glue;
  };
  std::vector<std::string_view> order;
  std::unordered_map<std::string_view, Module> modules;
  for (const Op& o : g.ops()) {
    if (o.role != OpRole::forward) continue;
    const std::string_view name = g.name(o.id);
    const std::string_view m = name.substr(0, name.find('/'));
    auto [it, fresh] = modules.try_emplace(m);
    if (fresh) order.push_back(m);
    const double t = op_time(o, spec);
    const std::int64_t b = branch_of(component(name, 1));
    if (b >= 0) {
      auto& br = it->second.branches[b];
      br.first += t;
      br.second.push_back(o.id);
    } else {
      it->second.glue_load += t;
      it->second.glue.push_back(o.id);
    }
  }
  std::vector<double> load(static_cast<std::size_t>(k), 0.0);
  auto least = [&] { return static_cast<std::int32_t>(std::min_element(load.begin(), load.end()) - load.begin()); };
  for (std::string_view m : order) {
    Module& mod = modules[m];
    if (mod.branches.empty()) {
      const std::int32_t d = least();
      for (OpId v : mod.glue) dev[static_cast<std::size_t>(v)] = d;
      load[static_cast<std::size_t>(d)] += mod.glue_load;
      continue;
    }
    std::vector<std::pair<double, std::vector<OpId>>*> bs;
    for (auto& [b, br] : mod.branches) bs.push_back(&br);
    std::stable_sort(bs.begin(), bs.end(), [](auto* a, auto* b) { return a->first > b->first; });
    std::int32_t heaviest = -1;
    std::vector<char> taken(static_cast<std::size_t>(k), 0);
    int free_devices = k;
    for (auto* br : bs) {
      std::int32_t d = -1;  // the least-loaded device this module has not used yet, if any is left
      for (std::int32_t c = 0; c < k; ++c)
        if ((free_devices == 0 || !taken[static_cast<std::size_t>(c)]) &&
            (d < 0 || load[static_cast<std::size_t>(c)] < load[static_cast<std::size_t>(d)]))
          d = c;
      if (!taken[static_cast<std::size_t>(d)]) {
        taken[static_cast<std::size_t>(d)] = 1;
        --free_devices;
      }
      if (heaviest < 0) heaviest = d;
      for (OpId v : br->second) dev[static_cast<std::size_t>(v)] = d;
      load[static_cast<std::size_t>(d)] += br->first;
    }
    for (OpId v : mod.glue) dev[static_cast<std::size_t>(v)] = heaviest;
    load[static_cast<std::size_t>(heaviest)] += mod.glue_load;
  }
}

}  // namespace detail::zoo

// The defaults of zoo workload `name`: every option that applies to it, set (the others unset).
inline ZooOptions zoo_default_options(std::string_view name) {
  const auto ni = detail::zoo::parse_name(name);
  GO_CHECK(ni.has_value(), "zoo:", name, ": unknown zoo workload (known: ", detail::zoo::known_names(), ")");
  return detail::zoo::defaults(*ni);
}

// Builds the forward graph of zoo workload `name` (see zoo_names()); make_training_graph expands it.
// Unknown names and bad options are go::Errors naming the workload.
inline OpGraph make_zoo_graph(std::string_view name, const ZooOptions& opts = {}) {
  using namespace detail::zoo;
  const auto ni = parse_name(name);
  GO_CHECK(ni.has_value(), "zoo:", name, ": unknown zoo workload (known: ", known_names(), ")");
  ZooOptions o = defaults(*ni);
  auto dst = fields(o);
  auto src = fields(opts);
  std::string applicable;
  for (std::size_t f = 0; f < kNumFields; ++f)
    if (dst[f]->has_value()) applicable += (applicable.empty() ? "" : ", ") + std::string(kFieldNames[f]);
  for (std::size_t f = 0; f < kNumFields; ++f) {
    if (!src[f]->has_value()) continue;
    GO_CHECK(dst[f]->has_value(), "zoo:", name, ": option '", kFieldNames[f], "' does not apply (", name, " takes ",
             applicable, ")");
    GO_CHECK(**src[f] > 0, "zoo:", name, ": option '", kFieldNames[f], "' must be positive, got ", **src[f]);
    *dst[f] = *src[f];
  }
  Sizes z;
  z.name = std::string(name);
  z.number = ni->number;
  z.batch = o.batch.value_or(0);
  z.seq = o.seq.value_or(0);
  z.hidden = o.hidden.value_or(0);
  z.segments = o.segments.value_or(0);
  z.depth = o.depth.value_or(0);
  z.vocab = o.vocab.value_or(0);
  z.image = o.image.value_or(0);
  switch (ni->family) {
    case Family::rnnlm: return rnnlm(z);
    case Family::gnmt: return gnmt(z);
    case Family::transformer_xl: return transformer_xl(z);
    case Family::inception_v3: return inception_v3(z);
    case Family::amoebanet: return amoebanet(z);
    case Family::wavenet: return wavenet(z);
  }
  GO_FAIL("zoo:", name, ": unknown zoo workload");
}

// A zoo workload from a spec "<name>[:<option>=<value>...]", e.g. "gnmt2:seq=16:batch=32" (what
// follows "zoo:" in a graph path; options as in ZooOptions). Malformed specs are go::Errors.
inline OpGraph make_zoo_graph_from_spec(std::string_view spec) {
  const std::size_t colon = spec.find(':');
  const std::string_view name = spec.substr(0, colon);
  ZooOptions o;
  auto dst = detail::zoo::fields(o);
  std::string_view rest = colon == std::string_view::npos ? std::string_view() : spec.substr(colon + 1);
  while (colon != std::string_view::npos) {
    const std::size_t next = rest.find(':');
    const std::string_view item = rest.substr(0, next);
    const std::size_t eq = item.find('=');
    GO_CHECK(eq != std::string_view::npos && eq > 0, "zoo:", spec, ": option '", item,
             "' must be <option>=<positive integer>, e.g. zoo:gnmt2:seq=16");
    const std::string_view key = item.substr(0, eq), val = item.substr(eq + 1);
    std::size_t f = 0;
    while (f < detail::zoo::kNumFields && detail::zoo::kFieldNames[f] != key) ++f;
    GO_CHECK(f < detail::zoo::kNumFields, "zoo:", spec, ": unknown option '", key,
             "' (options: batch, seq, hidden, segments, depth, vocab, image)");
    std::int64_t v = 0;
    bool ok = !val.empty() && val.size() <= 12;
    for (char ch : val) {
      ok = ok && ch >= '0' && ch <= '9';
      if (ok) v = v * 10 + (ch - '0');
    }
    GO_CHECK(ok, "zoo:", spec, ": option '", key, "' needs a positive integer, got '", val, "'");
    *dst[f] = v;
    if (next == std::string_view::npos) break;
    rest = rest.substr(next + 1);
  }
  return make_zoo_graph(name, o);
}

// Generic expert-style placement for any graph on k devices: forward ops ordered by topological depth
// (longest path from the inputs, ties by id), cut into k contiguous blocks of equal estimated compute
// (op_time on a V100); backward/update ops follow their forward op (see the header comment).
inline std::vector<std::int32_t> default_human_placement(const OpGraph& g, int k) {
  GO_CHECK(k >= 1, g.where(), "default_human_placement: k must be at least 1, got ", k);
  const auto n = static_cast<std::size_t>(g.num_ops());
  std::vector<std::int32_t> dev(n, -1);
  std::vector<std::int32_t> level(n, 0);
  std::vector<OpId> fwd;
  for (OpId v : g.topo_order()) {
    if (g.op(v).role != OpRole::forward) continue;
    for (OpId u : g.pred(v))
      if (g.op(u).role == OpRole::forward)
        level[static_cast<std::size_t>(v)] = std::max(level[static_cast<std::size_t>(v)], level[static_cast<std::size_t>(u)] + 1);
    fwd.push_back(v);
  }
  std::stable_sort(fwd.begin(), fwd.end(), [&](OpId a, OpId b) {
    const auto la = level[static_cast<std::size_t>(a)], lb = level[static_cast<std::size_t>(b)];
    return la != lb ? la < lb : a < b;
  });
  const DeviceSpec spec;
  double total = 0;
  for (OpId v : fwd) total += op_time(g.op(v), spec);
  double cum = 0;
  for (OpId v : fwd) {
    const double t = op_time(g.op(v), spec);
    const double mid = total > 0 ? (cum + 0.5 * t) / total : 0.0;
    dev[static_cast<std::size_t>(v)] = std::min(k - 1, static_cast<std::int32_t>(mid * k));
    cum += t;
  }
  detail::zoo::finish_placement(g, dev);
  return dev;
}

// The human-expert placement of a zoo graph (forward or training) on k devices: a device in [0, k)
// per op, by the rules in the header comment. A graph that is not a zoo workload is a go::Error.
inline std::vector<std::int32_t> zoo_human_placement(const OpGraph& g, int k) {
  using namespace detail::zoo;
  const std::string& gname = g.info().name;
  const auto ni = parse_name(gname);
  GO_CHECK(ni.has_value(), g.where(), "zoo_human_placement: '", gname, "' is not a zoo workload (known: ",
           known_names(), "); use default_human_placement");
  GO_CHECK(k >= 1, g.where(), "zoo_human_placement: k must be at least 1, got ", k);
  const auto n = static_cast<std::size_t>(g.num_ops());
  std::vector<std::int32_t> dev(n, -1);
  const std::int64_t L = ni->number;
  auto mod = [&](std::int64_t i) { return static_cast<std::int32_t>(i % k); };
  const std::int32_t softmax_dev = mod(L < k ? L : L - 1);  // tensorflow/nmt's output layer
  auto for_forward = [&](auto rule) {
    for (const Op& o : g.ops())
      if (o.role == OpRole::forward) dev[static_cast<std::size_t>(o.id)] = rule(std::string_view(g.name(o.id)));
  };
  switch (ni->family) {
    case Family::rnnlm:
      for_forward([&](std::string_view s) -> std::int32_t {
        const auto c0 = component(s, 0);
        if (c0 == "embedding") return 0;
        if (c0 == "softmax") return softmax_dev;
        const auto l = index_after(c0, "lstm");
        return l >= 0 ? mod(l) : -1;
      });
      break;
    case Family::gnmt:
      for_forward([&](std::string_view s) -> std::int32_t {
        const auto c0 = component(s, 0), c1 = component(s, 1);
        if (c0 != "encoder" && c0 != "decoder") return -1;
        if (c1 == "embedding" || c1 == "attention") return 0;
        if (c1 == "memory") return mod(L - 1);
        if (c1 == "softmax") return softmax_dev;
        const auto l = index_after(c1, "l");
        return l >= 0 ? mod(l) : -1;
      });
      break;
    case Family::transformer_xl:
      for_forward([&](std::string_view s) -> std::int32_t {
        const auto c0 = component(s, 0);
        if (c0 == "embedding") return block(0, L, k);
        if (c0 == "softmax") return block(L - 1, L, k);
        const auto l = index_after(c0, "layer");
        return l >= 0 ? block(l, L, k) : -1;
      });
      break;
    case Family::wavenet: {
      std::int64_t per_stack = 1;
      for (const Op& o : g.ops())
        if (o.role == OpRole::forward) {
          const auto name = std::string_view(g.name(o.id));
          if (index_after(component(name, 0), "stack") >= 0)
            per_stack = std::max(per_stack, index_after(component(name, 1), "layer") + 1);
        }
      const std::int64_t layers = L * per_stack;
      for_forward([&](std::string_view s) -> std::int32_t {
        const auto c0 = component(s, 0);
        if (c0 == "input") return block(0, layers, k);
        if (c0 == "head") return block(layers - 1, layers, k);
        const auto st = index_after(c0, "stack"), i = index_after(component(s, 1), "layer");
        return st >= 0 && i >= 0 ? block(st * per_stack + i, layers, k) : -1;
      });
      break;
    }
    case Family::inception_v3:
      split_branches(g, k, dev, [](std::string_view c1) { return index_after(c1, "b"); });
      break;
    case Family::amoebanet:
      split_branches(g, k, dev, [](std::string_view c1) { return index_after(c1, "comb"); });
      break;
  }
  finish_placement(g, dev);
  return dev;
}

}  // namespace go
