#pragma once
// The workload zoo, shared parts (see go/graph/zoo.hpp, the entry point, for the workloads and
// their sizes): ZooOptions, the workload names and their parsing, the default sizes, and the
// graph-construction helpers every generator uses (T: a tensor handle, Net: a GraphBuilder with
// the ops of the zoo's granularity and their FLOPs, Sizes: the resolved options).
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "go/core/error.hpp"
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
  // More ops, or an option above it, is an error (not a spec option; the largest workload at the
  // default sizes, wavenet4, has 25,890 ops).
  std::int64_t max_ops = kMaxGeneratedOps;
};

inline std::vector<std::string> zoo_names() {
  return {"rnnlm2",          "rnnlm4",          "rnnlm8",          "gnmt2",     "gnmt4",    "gnmt8",
          "transformer_xl2", "transformer_xl4", "transformer_xl8", "inception_v3", "amoebanet", "wavenet2",
          "wavenet4"};
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
      {"rnnlm8", Family::rnnlm, 8},
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
      // See zoo.hpp's header comment: 2 x 16,384 samples in 16 chunks, 64 residual channels, 256 classes.
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
  Net(const std::string& name, std::int64_t batch, std::int64_t max_ops) : max_ops_(max_ops) {
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
    GO_CHECK(static_cast<std::int64_t>(b_.size()) < max_ops_, where(), "these sizes make a graph of more than ",
             max_ops_, " ops (the largest default workload, wavenet4, has 25,890); choose smaller options");
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
    const double bytes = numel(s) * 4;
    GO_CHECK(bytes < 0x1p62, where(), "weight '", name, "' of ", numel(s),
             " elements is too large to count its bytes; choose smaller options");
    return op1(name, OpKind::constant, {}, std::move(s), 0, static_cast<std::int64_t>(bytes));
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
  std::int64_t max_ops_;
};

// Resolved sizes.
struct Sizes {
  std::string name;
  std::int64_t number = 0;
  std::int64_t batch = 0, seq = 0, hidden = 0, segments = 0, depth = 0, vocab = 0, image = 0;
  std::int64_t max_ops = kMaxGeneratedOps;
};

}  // namespace detail::zoo

// The defaults of zoo workload `name`: every option that applies to it, set (the others unset).
inline ZooOptions zoo_default_options(std::string_view name) {
  const auto ni = detail::zoo::parse_name(name);
  GO_CHECK(ni.has_value(), "zoo:", name, ": unknown zoo workload (known: ", detail::zoo::known_names(), ")");
  return detail::zoo::defaults(*ni);
}

}  // namespace go
