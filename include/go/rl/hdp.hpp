#pragma once
// HDP, the hierarchical device placer (Mirhoseini et al., ICLR 2018), as the place() method "hdp",
// after TensorFlow's tensorflow/python/grappler/hierarchical_controller.py and graph_placer.py
// (the prior state of the art GO compares against). Trained per graph from scratch:
//   grouper  a linear feed-forward net (op features -> 64 -> G, no bias, no nonlinearity, as the
//            reference) whose softmax samples a group for every op; G = min(256, 20 x devices);
//   features per op: its type index, up to 5 outputs x 5 dims of output shape (-1 when unknown), and
//            up to 10 (neighbour topological index, +1 successor / -1 predecessor) pairs;
//   group embeddings, per group: edge counts to and from every group, op-type counts, sums of the
//            output dims; each row divided by (its max + 1);
//   placer   a bidirectional LSTM encoder (hidden/2 per direction) over the G group embeddings and an
//            LSTM decoder with additive attention over the encoder states, emitting a device per group
//            (logits tanh-squashed, noise of 0.5 x their RMS on grouper and placer logits for the
//            first 750 steps); the LSTM cells have no bias but a learned scalar forget bias (init 1);
//   training REINFORCE on the cost sqrt(step time), out of memory scored as a failing runtime of
//            100 s, a moving-average baseline (decay 0.9, starting at the failing cost), one sample
//            per step (num_children = 1), loss (cost - baseline) x (log p(groups) + log p(devices));
//            Adam, lr 0.1 decayed x0.95 every 50 steps from step 400, global gradient norm clipped
//            to 1; after step 500 the decoder replays its last sampled devices (stop_sampling) and
//            after step 1000 failing samples no longer update loss or baseline. Glorot-uniform init.
//   answer   the best plan it simulated (first-ready order, no fusion).
// Where it departs from the reference, and why:
//   - Op features are scaled per column by their largest magnitude in the graph. The reference
//     feeds raw values (topological indices up to 80,000, dimension sizes in the thousands) into a
//     linear grouper, whose softmax is then saturated at its Glorot init: the grouping gets no
//     gradient and only the logit noise moves it. Scaled, the same features leave it trainable.
//   - Group embeddings give the output-dim sums their own columns: the reference adds them onto the
//     first 25 columns (edge counts / op types) and leaves the 25 columns it reserved for them zero.
//   - The noise's scale (0.5 x RMS of the logits) is a constant of the step: the reference
//     back-propagates through it.
//   - Colocation: TensorFlow's placer moves colocated ops together; here each colocation group takes
//     the device of its first op in topological order, so every sampled plan is valid.
//   - Priorities: HDP does not choose them; the simulator runs first ready first (TensorFlow's
//     executor). No fusion (the reference places the graph as grappler left it).
//   - "important ops" (the reference filters a few bookkeeping ops) are all ops of the graph.
//   - The runtime is go's simulated step time, not a measured one; one device: the only plan,
//     simulated once.
//   - Stopping: PlaceOptions::budget samples or PlaceOptions::time_limit seconds, whichever comes
//     first (the reference's graph_placer stops at its allotted time only).
// What to expect: with the reference's settings (lr 0.1, the baseline starting at the failing cost,
// so that every early sample is reinforced) the grouper collapses to one group within some ten
// steps on go's simulator and the zoo graphs, and the answer is mostly the single-device plan
// (v100x2, 20 s: rnnlm2 and inception_v3 end at the default plan's step time); where one device
// cannot hold the graph (rnnlm4 on v100x4) almost every later sample is out of memory, the baseline
// settles at the failing cost and learning stops, the answer being the best of the first samples.
// "hdp" keeps the reference's settings: HDP is the baseline of the GO paper.
// "hdp-tuned" (hdp_tuned_config()) is the best of a small, stated tuning effort for this simulator,
// so that GO is also compared with an HDP that does not collapse: the baseline starts at the first
// sample's cost (the reference's start_with_failing_signal = false), lr 1e-3 and hidden size 64
// (about 8x more samples per second than 512). Tried: 12 settings besides the reference's, of lr
// (0.1, 0.01, 1e-3), baseline start, hidden size (512, 64), logit noise (0.5, 0), a grouper
// temperature (1, 0.1) and an extra feature of the op's own topological position (x1, x10; neither
// kept), 8-20 s each on rnnlm2, gnmt4, inception_v3 b64 and rnnlm4 (training graphs, V100 x2 / x4).
// With the baseline at the first sample, lr 0.1 and 0.01 still collapse onto one or two groups
// within 50-700 samples (plans that keep ops together are better than its scattered early samples,
// so REINFORCE rightly moves there); lr 1e-3 still has 30-40 groups on both devices after 900
// samples. None of them ends more than 4% below the reference's result on these graphs (all near
// the single-device plan, or out of memory where one device cannot hold the graph): with a few
// hundred to a few thousand samples the grouper does not learn which ops belong together, and
// random groups spread over devices cost more in transfers than they gain.
// Seeded by PlaceOptions::seed: the same seed gives the same plan at a fixed thread count (a time
// limit may stop two runs after different numbers of samples).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "go/autograd/autograd.hpp"
#include "go/baselines/best_trace.hpp"
#include "go/baselines/place.hpp"
#include "go/core/error.hpp"
#include "go/core/rng.hpp"
#include "go/graph/op_kind.hpp"
#include "go/nn/functional.hpp"
#include "go/nn/module.hpp"
#include "go/optim/adam.hpp"
#include "go/sim/simulator.hpp"

namespace go::rl {

// hierarchical_controller_hparams() of the reference (bi_lstm, keep_prob 1, reward "sqrt").
struct HdpConfig {
  std::int32_t num_groups = 0;          // 0: min(256, 20 x devices)
  std::int32_t hidden_size = 512;       // decoder; the encoder has hidden_size / 2 per direction
  std::int32_t grouping_hidden_size = 64;
  std::int32_t adj_embed_dim = 20;
  std::int32_t max_num_outputs = 5;
  std::int32_t max_output_size = 5;
  float forget_bias_init = 1.f;
  float temperature = 1.f;
  float tanh_constant = 1.f;
  float logits_std_noise = 0.5f;
  std::int64_t stop_noise_step = 750;
  std::int64_t stop_sampling = 500;
  std::int64_t stop_updating_after_steps = 1000;
  double failing_signal = 100;          // seconds, the runtime of a plan that does not fit
  float bl_dec = 0.9f;
  // The baseline's first value: the failing cost sqrt(failing_signal) (the reference's
  // start_with_failing_signal), or, false, the first sample's own cost.
  bool start_with_failing_signal = true;
  float grad_bound = 1.f;
  float lr = 0.1f;
  float lr_dec = 0.95f;
  std::int64_t start_decay_step = 400;
  std::int64_t decay_steps = 50;
};

// The best step time so far, each time it improves (seconds since the start of hdp_place).
using HdpTracePoint = TracePoint;

struct HdpOptions {
  HdpConfig config;
  std::uint64_t seed = 0;
  std::int64_t budget = 1000;  // samples (simulations)
  double time_limit = 0;       // > 0: no sample starts after this many seconds
  SimOptions sim;
  std::function<void(const HdpTracePoint&)> on_improve;  // optional
};

struct HdpReport {
  std::int32_t num_groups = 0;
  std::int64_t samples = 0;
  std::int64_t updates = 0;
  std::int64_t failing = 0;  // samples out of memory
  double best_step_time = std::numeric_limits<double>::infinity();
  std::int64_t best_sample = 0;  // 1-based
  // The last sample's grouping: groups that hold an op, devices that hold an op (1 and 1: the
  // controller has collapsed onto one group).
  std::int32_t last_groups_used = 0, last_devices_used = 0;
  double seconds = 0;
  std::vector<HdpTracePoint> trace;
};

// The reference's LSTM cell: [x, h] W split into input, forget, output gates and candidate (in that
// order), forget gate biased by the learned scalar `forget_bias` [1, 1]. Returns {c', h'}.
inline std::pair<Variable, Variable> hdp_lstm_cell(const Variable& x, const Variable& c, const Variable& h,
                                                   const Variable& w, const Variable& forget_bias) {
  const std::int64_t H = c.dim(1);
  GO_CHECK(w.dim(1) == 4 * H && w.dim(0) == x.dim(1) + H, "hdp_lstm_cell: weight ", w.shape().to_string(),
           " does not fit input ", x.shape().to_string(), " and state ", c.shape().to_string());
  const Variable ifog = nn::linear({x, h}, w, Variable());
  const Variable i = sigmoid(slice(ifog, 1, 0, H));
  const Variable f = sigmoid(slice(ifog, 1, H, 2 * H) + forget_bias);
  const Variable o = sigmoid(slice(ifog, 1, 2 * H, 3 * H));
  const Variable g = tanh(slice(ifog, 1, 3 * H, 4 * H));
  Variable next_c = i * g + f * c;
  Variable next_h = o * tanh(next_c);
  return {next_c, next_h};
}

// The decoder's attention: query h [1, H] against memory [G, H] (the encoder states times attn_w_1),
// scores v^T tanh(mem + h W2), softmax over the groups; returns the context [1, H].
inline Variable hdp_attention(const Variable& h, const Variable& mem, const Variable& w2, const Variable& v) {
  const Variable q = matmul(h, w2);
  const Variable s = matmul(tanh(mem + q), v);  // [G, 1]
  const Variable a = softmax(reshape(s, Shape{1, s.dim(0)}));
  return matmul(a, mem);
}

namespace detail::hdp {

inline Tensor glorot(std::int64_t rows, std::int64_t cols, Rng& rng) {
  const float a = std::sqrt(6.f / static_cast<float>(rows + cols));
  return Tensor::uniform(Shape{rows, cols}, rng, -a, a);
}

// What the controller reads about the graph, computed once.
struct GraphData {
  std::int64_t n = 0;
  std::vector<OpId> order;             // row -> op (topological)
  std::vector<std::int32_t> row_of;    // op -> row
  std::vector<std::int32_t> type;      // per row: index among the op kinds the graph uses
  std::int32_t num_types = 0;
  std::vector<float> shape_sum;        // per row: max_num_outputs x max_output_size dims (0 unknown)
  std::vector<std::pair<std::int32_t, std::int32_t>> edges;  // (row, successor row), duplicates kept
  Tensor features;                     // f32 [n, 1 + outputs x dims + adj_embed_dim]
  std::vector<std::int32_t> coloc_leader;  // per row: the row whose device it takes (itself if none)
};

inline GraphData graph_data(const OpGraph& g, const HdpConfig& cfg) {
  GraphData d;
  d.n = g.num_ops();
  d.order.assign(g.topo_order().begin(), g.topo_order().end());
  d.row_of.assign(static_cast<std::size_t>(d.n), 0);
  for (std::int64_t r = 0; r < d.n; ++r) d.row_of[static_cast<std::size_t>(d.order[static_cast<std::size_t>(r)])] = static_cast<std::int32_t>(r);
  std::vector<std::int32_t> kind_index(kNumOpKinds, -1);
  for (const Op& o : g.ops()) kind_index[op_kind_index(o.kind)] = 0;
  for (auto& k : kind_index)
    if (k == 0) k = d.num_types++;
  const std::int32_t out_dim = cfg.max_num_outputs * cfg.max_output_size;
  const std::int64_t F = 1 + out_dim + cfg.adj_embed_dim;
  std::vector<float> f(static_cast<std::size_t>(d.n * F), 0.f);
  d.type.resize(static_cast<std::size_t>(d.n));
  d.shape_sum.assign(static_cast<std::size_t>(d.n * out_dim), 0.f);
  std::vector<std::int32_t> leader_of_group;
  d.coloc_leader.resize(static_cast<std::size_t>(d.n));
  for (std::int64_t r = 0; r < d.n; ++r) {
    const OpId id = d.order[static_cast<std::size_t>(r)];
    const Op& o = g.op(id);
    float* fr = f.data() + r * F;
    d.type[static_cast<std::size_t>(r)] = kind_index[op_kind_index(o.kind)];
    fr[0] = static_cast<float>(d.type[static_cast<std::size_t>(r)]);
    std::fill(fr + 1, fr + 1 + out_dim, -1.f);
    for (std::int32_t i = 0; i < std::min(o.num_outputs, cfg.max_num_outputs); ++i) {
      const TensorId t = o.first_output + i;
      if (g.tensor(t).rank < 0) continue;
      const auto dims = g.shape(t);
      for (std::size_t j = 0; j < dims.size() && static_cast<std::int32_t>(j) < cfg.max_output_size; ++j) {
        const std::size_t k = static_cast<std::size_t>(i * cfg.max_output_size) + j;
        fr[1 + k] = static_cast<float>(dims[j]);
        if (dims[j] > 0) d.shape_sum[static_cast<std::size_t>(r * out_dim) + k] = static_cast<float>(dims[j]);
      }
    }
    // neighbours as the reference lists them: successors (+1) then predecessors (-1), truncated
    std::int32_t k = 0;
    auto put = [&](OpId v, float sign) {
      if (k + 2 > cfg.adj_embed_dim) return;
      fr[1 + out_dim + k] = static_cast<float>(d.row_of[static_cast<std::size_t>(v)]);
      fr[1 + out_dim + k + 1] = sign;
      k += 2;
    };
    for (OpId v : g.succ(id)) {
      d.edges.emplace_back(static_cast<std::int32_t>(r), d.row_of[static_cast<std::size_t>(v)]);
      put(v, 1.f);
    }
    for (OpId v : g.pred(id)) put(v, -1.f);
    // colocation: the first member in topological order leads its group
    std::int32_t& lead = d.coloc_leader[static_cast<std::size_t>(r)];
    lead = static_cast<std::int32_t>(r);
    if (o.colocation >= 0) {
      if (static_cast<std::size_t>(o.colocation) >= leader_of_group.size()) leader_of_group.resize(static_cast<std::size_t>(o.colocation) + 1, -1);
      std::int32_t& l = leader_of_group[static_cast<std::size_t>(o.colocation)];
      if (l < 0) l = static_cast<std::int32_t>(r);
      lead = l;
    }
  }
  // per-column scaling to [-1, 1] (see the header: a departure from the reference)
  for (std::int64_t c = 0; c < F; ++c) {
    float m = 0.f;
    for (std::int64_t r = 0; r < d.n; ++r) m = std::max(m, std::abs(f[static_cast<std::size_t>(r * F + c)]));
    if (m > 0.f)
      for (std::int64_t r = 0; r < d.n; ++r) f[static_cast<std::size_t>(r * F + c)] /= m;
  }
  d.features = Tensor::from_vector(f, Shape{d.n, F});
  return d;
}

// [G, 2G + types + outputs x dims] group embeddings of a grouping (rows: groups).
inline Tensor group_embeddings(const GraphData& d, const std::vector<std::int32_t>& group, std::int32_t G,
                               std::int32_t out_dim) {
  const std::int64_t E = 2 * G + d.num_types + out_dim;
  Tensor emb = Tensor::zeros(Shape{G, E});
  float* e = emb.f32();
  for (const auto& [u, v] : d.edges) {
    const std::int32_t a = group[static_cast<std::size_t>(u)], b = group[static_cast<std::size_t>(v)];
    e[a * E + b] += 1.f;      // a -> b
    e[b * E + G + a] += 1.f;  // the transpose
  }
  for (std::int64_t r = 0; r < d.n; ++r) {
    float* row = e + group[static_cast<std::size_t>(r)] * E;
    row[2 * G + d.type[static_cast<std::size_t>(r)]] += 1.f;
    const float* s = d.shape_sum.data() + r * out_dim;
    for (std::int32_t k = 0; k < out_dim; ++k) row[2 * G + d.num_types + k] += s[k];
  }
  for (std::int32_t a = 0; a < G; ++a) {
    float* row = e + a * E;
    const float m = *std::max_element(row, row + E);
    for (std::int64_t k = 0; k < E; ++k) row[k] /= m + 1.f;
  }
  return emb;
}

// logits + N(0, (std x RMS(logits))^2), the noise a constant of the step.
inline Variable add_logit_noise(const Variable& logits, float std, Rng& rng) {
  const Tensor& v = logits.value();
  double ss = 0;
  for (std::int64_t i = 0; i < v.numel(); ++i) ss += static_cast<double>(v.f32()[i]) * v.f32()[i];
  const float rms = static_cast<float>(std::sqrt(ss / static_cast<double>(std::max<std::int64_t>(1, v.numel()))));
  if (rms == 0.f) return logits;
  return logits + Variable(Tensor::randn(v.shape(), rng, std * rms));
}

class Controller : public nn::Module {
 public:
  Controller(const HdpConfig& cfg, std::int64_t features, std::int32_t groups, std::int64_t group_emb,
             std::int32_t devices, Rng& rng)
      : cfg_(cfg) {
    const std::int64_t H = cfg.hidden_size, h2 = H / 2;
    w_group_ff_ = register_parameter("w_grouping_ff", glorot(features, cfg.grouping_hidden_size, rng));
    w_group_sm_ = register_parameter("w_grouping_softmax", glorot(cfg.grouping_hidden_size, groups, rng));
    w_enc_fw_ = register_parameter("encoder_lstm_forward", glorot(group_emb + h2, 4 * h2, rng));
    w_enc_bw_ = register_parameter("encoder_lstm_backward", glorot(group_emb + h2, 4 * h2, rng));
    dev_emb_ = register_parameter("device_embeddings", glorot(devices, H, rng));
    w_dec_ = register_parameter("decoder_lstm", glorot(2 * H, 4 * H, rng));
    w_dev_sm_ = register_parameter("device_softmax", glorot(2 * H, devices, rng));
    go_emb_ = register_parameter("device_go_embedding", glorot(1, H, rng));
    enc_fb_ = register_parameter("encoder_forget_bias", Tensor::full(Shape{1, 1}, cfg.forget_bias_init));
    dec_fb_ = register_parameter("decoder_forget_bias", Tensor::full(Shape{1, 1}, cfg.forget_bias_init));
    attn_w1_ = register_parameter("attn_w_1", glorot(H, H, rng));
    attn_w2_ = register_parameter("attn_w_2", glorot(H, H, rng));
    attn_v_ = register_parameter("attn_v", glorot(H, 1, rng));
  }

  // Grouper logits [n, G].
  Variable group_logits(const Tensor& features) const {
    return matmul(matmul(Variable(features), w_group_ff_), w_group_sm_);
  }

  // Encodes the group embeddings [G, E] and decodes a device per group: sampled (replay empty) or
  // replaying `replay`. Returns the summed log-probability [1] and fills `devices`.
  Variable place(const Tensor& emb, bool noise, Rng& rng, const std::vector<std::int32_t>& replay,
                 std::vector<std::int32_t>& devices) const {
    const std::int64_t G = emb.dim(0), h2 = cfg_.hidden_size / 2;
    const Variable x(emb);
    Variable cf(Tensor::zeros(Shape{1, h2})), hf = cf, cb = cf, hb = cf;
    std::vector<Variable> all_h;
    all_h.reserve(static_cast<std::size_t>(G));
    for (std::int64_t i = 0; i < G; ++i) {
      std::tie(cf, hf) = hdp_lstm_cell(slice(x, 0, i, i + 1), cf, hf, w_enc_fw_, enc_fb_);
      std::tie(cb, hb) = hdp_lstm_cell(slice(x, 0, G - 1 - i, G - i), cb, hb, w_enc_bw_, enc_fb_);
      all_h.push_back(concat({hf, hb}, 1));  // as the reference: step i pairs forward i with backward G-1-i
    }
    const Variable mem = matmul(concat(all_h, 0), attn_w1_);
    Variable c = concat({cf, cb}, 1), h = concat({hf, hb}, 1);
    devices.assign(static_cast<std::size_t>(G), 0);
    Variable logp;
    for (std::int64_t i = 0; i < G; ++i) {
      Tensor prev = Tensor::empty(Shape{1}, DType::i32);
      if (i > 0) prev.data<std::int32_t>()[0] = devices[static_cast<std::size_t>(i - 1)];
      const Variable signal = i == 0 ? go_emb_ : embedding(dev_emb_, prev);
      std::tie(c, h) = hdp_lstm_cell(signal, c, h, w_dec_, dec_fb_);
      const Variable ctx = hdp_attention(h, mem, attn_w2_, attn_v_);
      Variable logits = nn::linear({h, ctx}, w_dev_sm_, Variable());
      if (cfg_.temperature != 1.f) logits = scale(logits, 1.f / cfg_.temperature);
      if (cfg_.tanh_constant > 0) logits = scale(tanh(logits), cfg_.tanh_constant);
      if (noise) logits = add_logit_noise(logits, cfg_.logits_std_noise, rng);
      Tensor a;
      if (replay.empty()) a = sample_categorical(logits.value(), rng);
      else {
        a = Tensor::empty(Shape{1}, DType::i32);
        a.data<std::int32_t>()[0] = replay[static_cast<std::size_t>(i)];
      }
      devices[static_cast<std::size_t>(i)] = a.data<std::int32_t>()[0];
      const Variable lp = categorical_log_prob(logits, a);
      logp = i == 0 ? lp : logp + lp;
    }
    return logp;
  }

 private:
  HdpConfig cfg_;
  Variable w_group_ff_, w_group_sm_, w_enc_fw_, w_enc_bw_, dev_emb_, w_dec_, w_dev_sm_, go_emb_, enc_fb_, dec_fb_,
      attn_w1_, attn_w2_, attn_v_;
};

}  // namespace detail::hdp

// Trains HDP on graph g for the cluster c and returns the best plan it simulated (when none fits:
// the one with the shortest step time).
inline Plan hdp_place(const OpGraph& g, const Cluster& c, const HdpOptions& o, HdpReport* report = nullptr) {
  using namespace detail::hdp;
  BestTrace trace;
  auto elapsed = [&] { return trace.seconds(); };
  const HdpConfig& cfg = o.config;
  GO_CHECK(o.budget >= 1, "hdp: the budget must be >= 1 sample, got ", o.budget);
  GO_CHECK(o.time_limit >= 0, "hdp: the time limit must be >= 0 seconds, got ", o.time_limit);
  GO_CHECK(cfg.hidden_size >= 2 && cfg.hidden_size % 2 == 0, "hdp: hidden_size must be even and >= 2, got ",
           cfg.hidden_size);
  const std::int32_t D = c.num_devices();
  const std::int32_t G = cfg.num_groups > 0 ? cfg.num_groups : std::min(256, 20 * D);
  HdpReport rep;
  rep.num_groups = G;
  const Simulator sim(g, c, o.sim);
  SimWorkspace ws = sim.make_workspace();
  Plan best = Plan::single_device(g.num_ops(), 0);
  double best_t = std::numeric_limits<double>::infinity(), best_bad_t = best_t;
  bool best_valid = false;
  auto consider = [&](const Plan& p) {
    const SimResult& r = sim.simulate(p, ws);
    ++rep.samples;
    const bool ok = r.valid && std::isfinite(r.step_time);
    if (!ok) ++rep.failing;
    if (trace.add(ok, r.step_time)) {
      best_t = r.step_time;
      best = p;
      best_valid = true;
      rep.best_sample = rep.samples;
      if (o.on_improve) o.on_improve(trace.points().back());
    } else if (!ok && !best_valid && r.step_time < best_bad_t) {
      best_bad_t = r.step_time;
      best = p;
    }
    return ok ? r.step_time : cfg.failing_signal;
  };
  if (D == 1 || g.num_ops() == 0) {  // one plan only
    consider(best);
    rep.best_step_time = best_t;
    rep.seconds = elapsed();
    rep.trace = trace.points();
    if (report) *report = std::move(rep);
    return best;
  }
  const GraphData d = graph_data(g, cfg);
  const std::int32_t out_dim = cfg.max_num_outputs * cfg.max_output_size;
  const std::int64_t E = 2 * G + d.num_types + out_dim;
  Rng rng(o.seed);
  Rng init = rng.fork(1), sample_rng = rng.fork(2);
  const Controller net(cfg, d.features.dim(1), G, E, D, init);
  const std::vector<Variable> params = net.parameters();
  AdamOptions ao;
  ao.lr = cfg.lr;
  Adam adam(params, ao);
  const double failing_cost = std::sqrt(cfg.failing_signal);
  double baseline = failing_cost;
  bool baseline_set = cfg.start_with_failing_signal;
  std::vector<std::int32_t> replay, devices, group(static_cast<std::size_t>(d.n));
  Plan plan = Plan::single_device(g.num_ops(), 0);
  for (std::int64_t step = 0;; ++step) {
    const bool noise = cfg.logits_std_noise > 0 && step <= cfg.stop_noise_step;
    // grouper: one group per op
    Variable glogits = net.group_logits(d.features);
    if (noise) glogits = add_logit_noise(glogits, cfg.logits_std_noise, sample_rng);
    const Tensor groups = sample_categorical(glogits.value(), sample_rng);
    for (std::int64_t r = 0; r < d.n; ++r) group[static_cast<std::size_t>(r)] = groups.data<std::int32_t>()[r];
    const Variable logp_group = sum(categorical_log_prob(glogits, groups));
    // placer: one device per group
    const Tensor emb = group_embeddings(d, group, G, out_dim);
    const Variable logp_place = net.place(emb, noise, sample_rng, step >= cfg.stop_sampling ? replay : std::vector<std::int32_t>{}, devices);
    replay = devices;
    for (std::int64_t r = 0; r < d.n; ++r) {
      const std::int32_t lead = d.coloc_leader[static_cast<std::size_t>(r)];
      plan.device[static_cast<std::size_t>(d.order[static_cast<std::size_t>(r)])] = devices[static_cast<std::size_t>(group[static_cast<std::size_t>(lead)])];
    }
    {
      std::vector<char> g_used(static_cast<std::size_t>(G), 0), d_used(static_cast<std::size_t>(D), 0);
      for (std::int64_t r = 0; r < d.n; ++r) g_used[static_cast<std::size_t>(group[static_cast<std::size_t>(r)])] = 1;
      for (std::int32_t dev : plan.device) d_used[static_cast<std::size_t>(dev)] = 1;
      rep.last_groups_used = static_cast<std::int32_t>(std::count(g_used.begin(), g_used.end(), 1));
      rep.last_devices_used = static_cast<std::int32_t>(std::count(d_used.begin(), d_used.end(), 1));
    }
    const double runtime = consider(plan);
    const double cost = std::sqrt(runtime);
    if (!baseline_set) {  // the first sample's advantage is then 0: neither reinforced nor punished
      baseline = cost;
      baseline_set = true;
    }
    if (rep.samples >= o.budget || (o.time_limit > 0 && elapsed() >= o.time_limit)) break;
    // REINFORCE update; before stop_updating_after_steps every sample counts, after it only those that fit
    const bool fits = cost < failing_cost;
    const bool early = step < cfg.stop_updating_after_steps;
    adam.zero_grad();
    if (early || fits) {
      Variable loss = scale(logp_place + logp_group, static_cast<float>(cost - baseline));
      loss.backward();
      clip_grad_norm(params, cfg.grad_bound);
    } else {
      // the reference's loss is then the constant 0: Adam still steps, on zero gradients (momentum)
      for (const Variable& p : params) (void)p.grad();
    }
    const double lr = step < cfg.start_decay_step
                          ? cfg.lr
                          : cfg.lr * std::pow(cfg.lr_dec, static_cast<double>((step - cfg.start_decay_step) / cfg.decay_steps));
    adam.set_lr(static_cast<float>(lr));
    adam.step();
    ++rep.updates;
    if (early || fits) baseline = cfg.bl_dec * baseline + (1 - cfg.bl_dec) * cost;
  }
  rep.best_step_time = best_t;
  rep.seconds = elapsed();
  rep.trace = trace.points();
  if (report) *report = std::move(rep);
  return best;
}

// HDP tuned for go's simulator ("hdp-tuned"; the header says what was tried): the baseline starts
// at the first sample's cost, lr 1e-3, a controller of hidden size 64.
inline HdpConfig hdp_tuned_config() {
  HdpConfig c;
  c.start_with_failing_signal = false;
  c.lr = 1e-3f;
  c.hidden_size = 64;
  return c;
}

// Registers "hdp" (the reference's settings) and "hdp-tuned" in the place registry
// (go/baselines/place.hpp).
inline void register_hdp_method() {
  auto run = [](HdpConfig cfg) {
    return [cfg](const OpGraph& g, const Cluster& c, const PlaceOptions& po, PlaceResult& out) {
      HdpOptions o;
      o.config = cfg;
      o.seed = po.seed;
      o.budget = po.budget;
      o.time_limit = po.time_limit;
      o.sim = po.sim;
      HdpReport rep;
      Plan p = hdp_place(g, c, o, &rep);
      out.simulations = rep.samples;
      char best[64] = "none fits";
      if (std::isfinite(rep.best_step_time))
        std::snprintf(best, sizeof best, "%.3f ms at sample %lld", rep.best_step_time * 1e3,
                      static_cast<long long>(rep.best_sample));
      out.note = std::to_string(rep.num_groups) + " groups, " + std::to_string(rep.samples) + " samples (" +
                 std::to_string(rep.failing) + " out of memory), best " + best + ", last sample " +
                 std::to_string(rep.last_groups_used) + " groups on " + std::to_string(rep.last_devices_used) +
                 " devices; " +
                 BestTrace::trace_text(rep.trace);
      return p;
    };
  };
  PlaceMethod m{"hdp",
                "HDP (Mirhoseini et al. 2018): grouper + seq2seq LSTM placer trained from scratch with REINFORCE, "
                "the reference's settings (--budget samples, --time-limit seconds)",
                run(HdpConfig{})};
  m.decides_fusion = true;  // its answer is the plan it simulated: no fusion added
  m.reads = {PlaceOption::budget, PlaceOption::time_limit};
  register_place_method(m);
  PlaceMethod t{"hdp-tuned",
                "HDP tuned for go's simulator: the baseline starts at the first sample's cost, lr 1e-3, "
                "hidden size 64 (--budget samples, --time-limit seconds)",
                run(hdp_tuned_config())};
  t.decides_fusion = true;
  t.reads = m.reads;
  register_place_method(std::move(t));
}

}  // namespace go::rl
