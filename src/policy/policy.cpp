// GoPolicy (go/policy/policy.hpp): the bodies, compiled once into libgo.
#include "go/policy/policy.hpp"

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "go/nn/serialize.hpp"

namespace go::policy {

GoPolicy::GoPolicy(PolicyConfig cfg) : cfg_(std::move(cfg)) {
  cfg_.validate();
  Rng rng(cfg_.seed);
  const std::int64_t d = cfg_.hidden;
  input_ = register_module("input", std::make_shared<nn::Dense>(kNumNumericFeatures, d, rng));
  kind_ = register_module("kind", std::make_shared<nn::Embedding>(static_cast<std::int64_t>(kNumOpKinds), d, rng,
                                                                  1.f / std::sqrt(static_cast<float>(d))));
  sage_ = register_module("sage", std::make_shared<nn::GraphSage>(d, cfg_.sage_layers, rng, cfg_.reduce()));
  nn::SegmentAttentionOptions ao;
  ao.dim = d;
  ao.heads = cfg_.heads;
  ao.seg_len = cfg_.segment_length;
  ao.mem_len = cfg_.memory_length;
  ao.causal = cfg_.causal;
  ao.ffn_dim = cfg_.ffn_dim;
  const char* task_names[3] = {"placement", "priority", "fusion"};
  for (int t = 0; t < 3; ++t)
    for (int l = 0; l < cfg_.layers_per_task; ++l)
      blocks_[t].push_back(register_module(std::string(task_names[t]) + ".block" + std::to_string(l),
                                           std::make_shared<nn::SegmentAttentionBlock>(ao, rng)));
  for (int t = 0; t < 3; ++t)
    final_ln_[t] = register_module(std::string(task_names[t]) + ".ln", std::make_shared<nn::LayerNorm>(d));
  if (cfg_.superposition)
    superposition_ =
        register_module("superposition", std::make_shared<nn::Superposition>(d, d, 3 * cfg_.layers_per_task, rng));
  const float emb_std = 1.f / std::sqrt(static_cast<float>(d));
  device_query_ = register_module("placement.query",
                                  std::make_shared<nn::Dense>(d, d, rng, nn::Activation::none, true, cfg_.head_gain));
  devices_ = register_module("placement.devices", std::make_shared<nn::Embedding>(cfg_.max_devices, d, rng));
  priority_head_ = register_module(
      "priority.head",
      std::make_shared<nn::Dense>(d, cfg_.priority_levels, rng, nn::Activation::none, true, cfg_.head_gain));
  fusion_head_ = register_module("fusion.head",
                                 std::make_shared<nn::Dense>(d, 2, rng, nn::Activation::none, true, cfg_.head_gain));
  if (cfg_.chain == "action") {  // the sampled actions' embeddings feed the next task
    device_action_ =
        register_module("placement.action", std::make_shared<nn::Embedding>(cfg_.max_devices, d, rng, emb_std));
    priority_action_ =
        register_module("priority.action", std::make_shared<nn::Embedding>(cfg_.priority_levels, d, rng, emb_std));
  }
  value1_ =
      register_module("value.fc1", std::make_shared<nn::Dense>(2 * d, cfg_.value_hidden, rng, nn::Activation::relu));
  value2_ = register_module("value.fc2", std::make_shared<nn::Dense>(cfg_.value_hidden, 1, rng));
  if (cfg_.anchor) {  // registered last: the other parameters draw the same values with or without
    anchor_device_ =
        register_module("anchor.device", std::make_shared<nn::Embedding>(cfg_.max_devices, d, rng, emb_std));
    anchor_bias_ = register_parameter("anchor.bias", Tensor::full(Shape{1, 3}, cfg_.anchor_bias));
  }
}

Variable GoPolicy::encode(const PolicyGraph& g) const {
  check_graph(g);
  Variable x =
      nn::linear_embedding_relu(Variable(g.numeric), input_->weight(), input_->bias(), kind_->table(), g.kinds);
  if (uses_anchor(g)) x = anchor_device_->add_to(x, g.anchor_device);
  return sage_->forward(x, g.preds, g.succs);
}

PolicyOutput GoPolicy::forward(const PolicyGraph& g, int num_devices, Decode mode, const Actions* given,
                               Rng* rng) const {
  std::vector<Actions> gv;
  if (mode == Decode::given && given) gv.push_back(*given);
  std::vector<Rng> rv;
  if (rng) rv.push_back(*rng);
  auto outs = forward_many(g, num_devices, mode, 1, mode == Decode::given && given ? &gv : nullptr,
                           mode == Decode::sample && rng ? &rv : nullptr);
  if (mode == Decode::sample && rng) *rng = rv[0];
  return std::move(outs[0]);
}

std::vector<PolicyOutput> GoPolicy::forward_many(const PolicyGraph& g, int num_devices, Decode mode, std::size_t count,
                                                 const std::vector<Actions>* given, std::vector<Rng>* rngs) const {
  check_call(g, num_devices, mode, count, given, rngs);
  return tails(g, trunk(g, num_devices), num_devices, mode, count, given, rngs);
}

void GoPolicy::backward_many(const PolicyGraph& g, int num_devices, const std::vector<Actions>& given,
                             const std::function<Variable(std::size_t, const PolicyOutput&)>& loss_of) const {
  check_call(g, num_devices, Decode::given, given.size(), &given, nullptr);
  if (cfg_.chain == "hidden" || given.size() == 1) {
    backward_sum(tails(g, trunk(g, num_devices), num_devices, Decode::given, given.size(), &given, nullptr), loss_of);
    return;
  }
  const Trunk t = trunk(g, num_devices);
  Trunk leaf;  // the shared results tails() reads, as leaves: each output's backward stops there
  auto as_leaf = [](const Variable& v) { return Variable(v.value(), v.requires_grad()); };
  leaf.h = as_leaf(t.h);
  leaf.context = as_leaf(t.context);
  leaf.zp = as_leaf(t.zp);
  leaf.device_logits = as_leaf(t.device_logits);
  leaf.value = as_leaf(t.value);
  for (std::size_t k = 0; k < given.size(); ++k) {
    const std::vector<Actions> one{given[k]};
    auto out = tails(g, leaf, num_devices, Decode::given, 1, &one, nullptr);
    Variable l = loss_of(k, out[0]);
    if (l.defined()) l.backward();
  }
  std::vector<Variable> roots;
  std::vector<Tensor> seeds;
  for (auto [root, l] :
       {std::pair{t.context, leaf.context}, std::pair{t.zp, leaf.zp}, std::pair{t.device_logits, leaf.device_logits},
        std::pair{t.value, leaf.value}, std::pair{t.h, leaf.h}})
    if (l.has_grad()) {
      roots.push_back(root);
      seeds.push_back(l.grad());
    }
  backward_seeded(roots, seeds);
}

void GoPolicy::backward_from(const PolicyGraph& g, const PolicyOutput& drawn, const std::vector<Actions>& given,
                             const std::function<Variable(std::size_t, const PolicyOutput&)>& loss_of) const {
  backward_sum(outputs(recorded_pass(g, drawn, given), Decode::given, given.size(), &given, nullptr), loss_of);
}

void GoPolicy::backward_shared(const PolicyGraph& g, int num_devices, const PolicyOutput* drawn,
                               const std::vector<Actions>& given,
                               const std::function<Variable(const SharedOutput&)>& loss) const {
  GO_CHECK(cfg_.chain == "hidden", "GoPolicy: backward_shared needs chain \"hidden\" (with \"action\" the priority "
           "and fusion logits depend on the sampled actions: use backward_many)");
  Shared s;
  if (drawn) {
    s = recorded_pass(g, *drawn, given);
    GO_CHECK(s.device_logits.dim(1) == num_devices, "GoPolicy: backward_shared: the output has ",
             s.device_logits.dim(1), " devices, the call ", num_devices);
  } else {
    check_call(g, num_devices, Decode::given, given.size(), &given, nullptr);
    for (const Actions& a : given) check_actions(g, a, num_devices);
    s = hidden_pass(g, trunk(g, num_devices));
  }
  const SharedOutput o{{go::log_softmax(s.device_logits), go::log_softmax(s.priority_logits),
                        go::log_softmax(s.fusion_logits)},
                       mean(s.entropy),
                       s.value};
  Variable l = loss(o);
  if (l.defined()) l.backward();
}

GoPolicy::Shared GoPolicy::recorded_pass(const PolicyGraph& g, const PolicyOutput& drawn,
                                         const std::vector<Actions>& given) const {
  GO_CHECK(cfg_.chain == "hidden", "GoPolicy: a backward through a recorded pass needs chain \"hidden\" (with "
           "\"action\" the priority and fusion blocks read the sampled actions: use backward_many)");
  GO_CHECK(drawn.device_logits.defined() && drawn.device_logits.requires_grad(),
           "GoPolicy: a backward through a recorded pass needs an output of forward_many or sample_many called "
           "with gradients recorded (not under NoGradGuard)");
  GO_CHECK(!drawn.device_logits.is_leaf(), "GoPolicy: the pass of this output was already back-propagated (a pass "
           "serves one backward)");
  const int num_devices = static_cast<int>(drawn.device_logits.dim(1));
  check_call(g, num_devices, Decode::given, given.size(), &given, nullptr);
  GO_CHECK(drawn.device_logits.dim(0) == g.num_nodes, "GoPolicy: a backward through a recorded pass: the output has ",
           drawn.device_logits.dim(0), " rows but graph '", g.name, "' has ", g.num_nodes, " nodes");
  for (const Actions& a : given) check_actions(g, a, num_devices);
  return {drawn.device_logits, drawn.priority_logits, drawn.fusion_logits, drawn.entropy, drawn.value,
          drawn.node_embedding};
}

void GoPolicy::backward_sum(const std::vector<PolicyOutput>& outs,
                            const std::function<Variable(std::size_t, const PolicyOutput&)>& loss_of) {
  Variable total;
  for (std::size_t k = 0; k < outs.size(); ++k) {
    Variable l = loss_of(k, outs[k]);
    total = total.defined() ? total + l : l;
  }
  if (total.defined()) total.backward();
}

Actions GoPolicy::greedy_actions(const PolicyOutput& o) const {
  GO_CHECK(cfg_.chain == "hidden",
           "GoPolicy: greedy_actions needs chain \"hidden\" (with \"action\" the "
           "priority and fusion logits depend on the sampled devices: use forward(Decode::greedy))");
  return {argmax_rows(o.device_logits.value()), argmax_rows(o.priority_logits.value()),
          argmax_rows(o.fusion_logits.value())};
}

Actions GoPolicy::act(const PolicyGraph& g, int num_devices, Rng* rng, bool greedy) const {
  NoGradGuard no_grad;
  return forward(g, num_devices, greedy ? Decode::greedy : Decode::sample, nullptr, rng).actions;
}

void GoPolicy::save_policy(const std::string& path) const { save(path, {{"config", cfg_.to_json()}}); }

std::shared_ptr<GoPolicy> GoPolicy::load_policy(const std::string& path) {
  return load_policy(load_tensors(path), path);
}

std::shared_ptr<GoPolicy> GoPolicy::load_policy(const LoadedTensors& lt, const std::string& path) {
  GO_CHECK(lt.meta.contains("config"), path, ": no policy config in the parameter file's metadata");
  auto p = std::make_shared<GoPolicy>(
      PolicyConfig::from_json(PolicyConfig::legacy_policy_json(lt.meta.at("config")), path + ": config"));
  p->load(lt, path);
  return p;
}

GoPolicy::Trunk GoPolicy::trunk(const PolicyGraph& g, int num_devices) const {
  Trunk t;
  {
    std::optional<NoGradGuard> frozen;
    if (heads_only_) frozen.emplace();
    t.h = encode(g);
    t.context = mean(t.h, 0);  // [1, d]
  }
  t.zp = run_blocks(0, t.h, t.context);
  t.dev = slice(devices_->table(), 0, 0, num_devices);  // [D, d]
  Variable q = head(t.zp, 0, *device_query_);
  t.device_logits = scale(matmul(q, t.dev, false, true), 1.f / std::sqrt(static_cast<float>(cfg_.hidden)));
  if (uses_anchor(g)) t.device_logits = anchored(t.device_logits, g.anchor_device, num_devices, 0);
  Variable vin = concat({t.context, mean(t.dev, 0)}, 1);  // [1, 2d]
  t.value = value2_->forward(value1_->forward(vin));
  return t;
}

Variable GoPolicy::run_blocks(int task, Variable x, const Variable& context) const {
  std::optional<NoGradGuard> frozen;
  if (heads_only_) frozen.emplace();
  for (int l = 0; l < cfg_.layers_per_task; ++l) {
    Variable gate = superposition_ ? superposition_->gate(task * cfg_.layers_per_task + l, context) : Variable();
    x = blocks_[task][static_cast<std::size_t>(l)]->forward(x, gate);
  }
  return x;
}

Variable GoPolicy::priority_logits(const PolicyGraph& g, const Variable& zs) const {
  Variable l = head(zs, 1, *priority_head_);
  return uses_anchor(g) ? anchored(l, g.anchor_priority, cfg_.priority_levels, 1) : l;
}

Variable GoPolicy::fusion_logits(const PolicyGraph& g, const Variable& zf) const {
  Variable l = nn::add_same(head(zf, 2, *fusion_head_), Variable(g.fusion_mask));
  return uses_anchor(g) ? anchored(l, g.anchor_fuse, 2, 2) : l;
}

// Per logits tensor, computed once whatever the number of outputs that read it: the sampling
// probabilities and the log-softmax each output picks its log-probabilities from.
struct GoPolicy::Dist {
  Variable logits, log_softmax;
  Tensor probs;
  Dist() = default;
  Dist(const Variable& l, Decode mode) : logits(l), log_softmax(go::log_softmax(l)) {
    if (mode == Decode::sample) probs = categorical_probs(l.value());
  }
  Tensor choose(Decode mode, const std::vector<Actions>* given, std::vector<Rng>* rngs, std::size_t k, int task) const {
    if (mode == Decode::given) {
      const Actions& a = (*given)[k];
      return task == 0 ? a.device : task == 1 ? a.priority : a.fuse;
    }
    if (mode == Decode::greedy) return argmax_rows(logits.value());
    return sample_from_probs(probs, (*rngs)[k]);
  }
};

std::vector<PolicyOutput> GoPolicy::tails(const PolicyGraph& g, const Trunk& t, int num_devices, Decode mode,
                                          std::size_t count, const std::vector<Actions>* given,
                                          std::vector<Rng>* rngs) const {
  if (mode == Decode::given) {
    for (const Actions& a : *given) check_actions(g, a, num_devices);
  }
  if (cfg_.chain == "hidden") return outputs(hidden_pass(g, t), mode, count, given, rngs);
  std::vector<PolicyOutput> outs(count);
  std::vector<Dist> per_output(3 * count);  // [k * 3 + task]
  const Dist dd(t.device_logits, mode);
  for (std::size_t k = 0; k < count; ++k) {
    PolicyOutput& o = outs[k];
    per_output[3 * k] = dd;
    o.actions.device = dd.choose(mode, given, rngs, k, 0);
    Variable zs = run_blocks(1, device_action_->add_to(t.zp, o.actions.device), t.context);
    per_output[3 * k + 1] = Dist(priority_logits(g, zs), mode);
    o.actions.priority = per_output[3 * k + 1].choose(mode, given, rngs, k, 1);
    Variable zf = run_blocks(2, priority_action_->add_to(zs, o.actions.priority), t.context);
    per_output[3 * k + 2] = Dist(fusion_logits(g, zf), mode);
    o.actions.fuse = per_output[3 * k + 2].choose(mode, given, rngs, k, 2);
  }
  for (std::size_t k = 0; k < count; ++k) {
    PolicyOutput& o = outs[k];
    o.entropy = categorical_entropy(per_output[3 * k].logits) + categorical_entropy(per_output[3 * k + 1].logits) +
                categorical_entropy(per_output[3 * k + 2].logits);
    finish(o, per_output.data() + 3 * k, t.value, t.h);
  }
  return outs;
}

GoPolicy::Shared GoPolicy::hidden_pass(const PolicyGraph& g, const Trunk& t) const {
  Variable zs = run_blocks(1, t.zp, t.context);
  const Variable pl = priority_logits(g, zs);
  const Variable fl = fusion_logits(g, run_blocks(2, zs, t.context));
  const Variable entropy = categorical_entropy(t.device_logits) + categorical_entropy(pl) + categorical_entropy(fl);
  return {t.device_logits, pl, fl, entropy, t.value, t.h};
}

std::vector<PolicyOutput> GoPolicy::outputs(const Shared& s, Decode mode, std::size_t count,
                                            const std::vector<Actions>* given, std::vector<Rng>* rngs) const {
  const Dist d[3] = {Dist(s.device_logits, mode), Dist(s.priority_logits, mode), Dist(s.fusion_logits, mode)};
  Tensor greedy[3];
  if (mode == Decode::greedy)
    for (int task = 0; task < 3; ++task) greedy[task] = argmax_rows(d[task].logits.value());
  std::vector<PolicyOutput> outs(count);
  if (mode == Decode::sample) {
    const std::vector<Actions> drawn = draw(d, *rngs);
    for (std::size_t k = 0; k < count; ++k) outs[k].actions = drawn[k];
  } else {
    for (std::size_t k = 0; k < count; ++k)
      outs[k].actions = mode == Decode::greedy ? Actions{greedy[0], greedy[1], greedy[2]}
                                               : Actions{d[0].choose(mode, given, rngs, k, 0),
                                                         d[1].choose(mode, given, rngs, k, 1),
                                                         d[2].choose(mode, given, rngs, k, 2)};
  }
  for (PolicyOutput& o : outs) {
    o.entropy = s.entropy;
    finish(o, d, s.value, s.h);
  }
  return outs;
}

std::vector<Actions> GoPolicy::draw(const Dist* d, std::vector<Rng>& rngs) {
  std::vector<Tensor> drawn[3];
  for (int task = 0; task < 3; ++task) drawn[task] = sample_from_probs(d[task].probs, std::span<Rng>(rngs));
  std::vector<Actions> out(rngs.size());
  for (std::size_t k = 0; k < rngs.size(); ++k) out[k] = {drawn[0][k], drawn[1][k], drawn[2][k]};
  return out;
}

GoPolicy::Samples GoPolicy::sample_many(const PolicyGraph& g, int num_devices, std::vector<Rng>& rngs) const {
  check_call(g, num_devices, Decode::sample, rngs.size(), nullptr, &rngs);
  Samples out;
  if (cfg_.chain != "hidden") {  // each decision's blocks read its actions: forward_many's outputs
    auto outs = forward_many(g, num_devices, Decode::sample, rngs.size(), nullptr, &rngs);
    for (PolicyOutput& o : outs) {
      out.actions.push_back(o.actions);
      out.log_prob.push_back(o.log_prob.value().clone());
    }
    out.pass = std::move(outs[0]);
    return out;
  }
  const Shared s = hidden_pass(g, trunk(g, num_devices));
  Dist d[3];
  {
    NoGradGuard ng;  // only their values are read here
    d[0] = Dist(s.device_logits, Decode::sample);
    d[1] = Dist(s.priority_logits, Decode::sample);
    d[2] = Dist(s.fusion_logits, Decode::sample);
  }
  out.actions = draw(d, rngs);
  const std::int64_t n = g.num_nodes;
  const std::array<const float*, 3> ls{d[0].log_softmax.value().f32(), d[1].log_softmax.value().f32(),
                                       d[2].log_softmax.value().f32()};
  const std::array<std::int64_t, 3> width{d[0].log_softmax.dim(1), d[1].log_softmax.dim(1),
                                          d[2].log_softmax.dim(1)};
  for (const Actions& a : out.actions) {
    Tensor lp = Tensor::empty(Shape{n});
    float* o = lp.f32();
    for (std::int64_t i = 0; i < n; ++i) o[i] = joint_log_prob(ls, width, a, i);
    out.log_prob.push_back(std::move(lp));
  }
  PolicyOutput& p = out.pass;
  p.device_logits = s.device_logits;
  p.priority_logits = s.priority_logits;
  p.fusion_logits = s.fusion_logits;
  p.actions = out.actions[0];
  p.entropy = s.entropy;
  p.entropy_mean = mean(s.entropy);
  p.value = s.value;
  p.node_embedding = s.h;
  return out;
}

void GoPolicy::finish(PolicyOutput& o, const Dist* d, const Variable& value, const Variable& h) {
  o.device_logits = d[0].logits;
  o.priority_logits = d[1].logits;
  o.fusion_logits = d[2].logits;
  o.log_prob_device = pick_columns(d[0].log_softmax, o.actions.device);
  o.log_prob_priority = pick_columns(d[1].log_softmax, o.actions.priority);
  o.log_prob_fusion = pick_columns(d[2].log_softmax, o.actions.fuse);
  o.log_prob = o.log_prob_device + o.log_prob_priority + o.log_prob_fusion;
  o.log_prob_sum = sum(o.log_prob);
  o.entropy_mean = mean(o.entropy);
  o.value = value;
  o.node_embedding = h;
}

void GoPolicy::check_call(const PolicyGraph& g, int num_devices, Decode mode, std::size_t count,
                          const std::vector<Actions>* given, const std::vector<Rng>* rngs) const {
  check_graph(g);
  GO_CHECK(num_devices >= 1 && num_devices <= cfg_.max_devices, "GoPolicy: num_devices ", num_devices,
           " out of range [1, ", cfg_.max_devices, "] (config max_devices)");
  GO_CHECK(count >= 1, "GoPolicy: at least one output is needed");
  GO_CHECK(mode != Decode::sample || (rngs != nullptr && rngs->size() == count), "GoPolicy: sampling needs an Rng",
           count > 1 ? " per output" : "");
  GO_CHECK(mode != Decode::given || (given != nullptr && given->size() == count),
           "GoPolicy: Decode::given needs actions", count > 1 ? " per output" : "");
}

Variable GoPolicy::head(const Variable& z, int task, const nn::Dense& dense) const {
  return nn::ln_linear(z, final_ln_[task]->gamma(), final_ln_[task]->beta(), dense.weight(), dense.bias());
}

Variable GoPolicy::anchored(const Variable& logits, const Tensor& anchor, std::int64_t width, int task) const {
  const std::int64_t n = anchor.numel();
  Tensor onehot = Tensor::zeros(Shape{n, width});
  const std::int32_t* a = anchor.data<std::int32_t>();
  float* o = onehot.f32();
  for (std::int64_t r = 0; r < n; ++r) {
    GO_CHECK(a[r] < width, "GoPolicy: anchor action ", a[r], " of row ", r, " out of range [0, ", width, ") (task ",
             task, "; was the anchor computed for another cluster or policy config?)");
    o[r * width + a[r]] = 1.f;
  }
  return logits + mul(Variable(onehot), slice(anchor_bias_, 1, task, task + 1));
}

void GoPolicy::check_graph(const PolicyGraph& g) const {
  const std::int64_t n = g.num_nodes;
  GO_CHECK(n >= 1, "GoPolicy: graph '", g.name, "' has no nodes");
  GO_CHECK(g.numeric.defined() && g.numeric.shape() == Shape({n, kNumNumericFeatures}) && g.kinds.defined() &&
               g.kinds.numel() == n && g.preds.n_dst() == n && g.succs.n_dst() == n &&
               g.fusion_mask.shape() == Shape({n, 2}),
           "GoPolicy: graph '", g.name, "' is inconsistent (", n, " nodes; numeric ",
           g.numeric.defined() ? g.numeric.shape().to_string() : "undefined", ")");
}

void GoPolicy::check_actions(const PolicyGraph& g, const Actions& a, int num_devices) const {
  const std::int64_t n = g.num_nodes;
  auto check = [&](const Tensor& t, const char* what, int limit) {
    GO_CHECK(t.defined() && t.dtype() == DType::i32 && t.numel() == n, "GoPolicy: given ", what, " actions ",
             t.defined() ? t.describe() : std::string("(undefined)"), " must be i32 [", n, "]");
    const std::int32_t* p = t.data<std::int32_t>();
    for (std::int64_t i = 0; i < n; ++i)
      GO_CHECK(p[i] >= 0 && p[i] < limit, "GoPolicy: given ", what, " action ", p[i], " of row ", i,
               " out of range [0, ", limit, ")");
  };
  check(a.device, "device", num_devices);
  check(a.priority, "priority", cfg_.priority_levels);
  check(a.fuse, "fusion", 2);
  for (std::int64_t i = 0; i < n; ++i)
    GO_CHECK(a.fuse.data<std::int32_t>()[i] == 0 || g.fusion_mask.f32()[i * 2 + 1] == 0.f,
             "GoPolicy: given fusion "
             "action 1 (fuse into producers) for row ",
             i, ", which its fusion mask forbids");
}

}  // namespace go::policy
