#pragma once
// GoPolicy: the GO policy network (Zhou et al., NeurIPS 2020) on go's own autodiff.
//
//   h0   = relu(numeric W_in + b_in + E_kind[kind])                   node features -> [n, d]
//   h    = GraphSAGE(h0) over predecessors and successors (max-pool)  [n, d]
//   c    = mean over rows of h                                        graph embedding [1, d]
//   gates: one per attention block, 2 sigmoid(c W_l + b_l)           (parameter superposition)
//   placement:  z_p = Blocks_p(h)                 logits_p = (LN(z_p) W_q + b_q) E_dev[:D]^T / sqrt(d)
//   priority:   z_s = Blocks_s(z_p [+ A_dev[a_p]])  logits_s = LN(z_s) W_s + b_s            [n, P]
//   fusion:     z_f = Blocks_f(z_s [+ A_pri[a_s]])  logits_f = LN(z_f) W_f + b_f + mask     [n, 2]
//   value       = W_2 relu(W_1 [c, mean(E_dev[:D])] + b_1) + b_2                           [1, 1]
// The bracketed action embeddings are config "chain": "action" only. With "hidden" (the default)
// the tasks chain through hidden states alone, as the GO paper's recurrent attention layers do:
// every task's logits are then independent of the sampled actions, so one pass gives the
// distribution of all three tasks and serves any number of samples (forward_many).
// With an anchor plan (config "anchor", PolicyGraph::set_anchor): h0 += E_anc[anchor device], and
// each task's logits get + b_t on the anchor's action (b learned, starting at "anchor_bias").
// Heads only (set_heads_only, fine-tuning's setting): everything up to each task's last block,
// encoder, gates and action embeddings included, runs without recording gradients; what a
// backward reaches are the heads: LN_t, W_q, b_q, E_dev, W_s, b_s, W_f, b_f, the value's layers
// and b.
//
// Blocks are pre-norm segment-recurrent attention blocks (go/nn/segment_attention.hpp); each
// task has its own, and each task reads the previous task's hidden states (plus, with chain
// "action", the embedding of the action sampled for it): the three are optimized jointly. Rows
// are nodes in topological order; every task decides all rows in one pass.
//
// Placement works for any number of devices D in [1, max_devices] with the same weights: the
// logits are scores against the first D learned device embeddings (the others are masked out).
// Fusion: action 1 = "fuse into producers" (go/policy/decode.hpp), 0 = not; masked for rows that
// can never join a producer (PolicyGraph::fusion_mask).
//
// forward() samples (seeded), decodes greedily, or takes given actions (teacher forcing, for
// PPO's re-evaluation of stored actions), and returns the differentiable per-row joint
// log-probability log p(a_p) + log p(a_s | a_p) + log p(a_f | a_p, a_s) and the sum of the
// three conditional entropies. forward_many() gives several outputs from one shared pass, and
// backward_many() back-propagates a loss over several given decisions (PPO's minibatches).
// The bodies are compiled once into libgo (src/policy/policy.cpp).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "go/autograd/autograd.hpp"
#include "go/nn/graph_sage.hpp"
#include "go/nn/layers.hpp"
#include "go/nn/segment_attention.hpp"
#include "go/nn/superposition.hpp"
#include "go/policy/config.hpp"
#include "go/policy/features.hpp"

namespace go::policy {

// Actions of every row (topological order), i32 [n] each.
struct Actions {
  Tensor device;    // in [0, D)
  Tensor priority;  // in [0, P)
  Tensor fuse;      // 0 or 1

  std::int64_t size() const { return device.defined() ? device.numel() : 0; }
  Actions clone() const { return {device.clone(), priority.clone(), fuse.clone()}; }
};

// Row i's joint log-probability of a's three actions, from the three tasks' log-softmax values
// (ls[t]: [n, width[t]]), summed as PolicyOutput::log_prob sums them: (device + priority) + fusion.
// PPO's ratios compare two of these, so every place that forms one (GoPolicy::sample_many,
// go/rl/ppo_loss.hpp) sums them alike: a ratio of a decision against its own pass is exactly 1.
inline float joint_log_prob(const std::array<const float*, 3>& ls, const std::array<std::int64_t, 3>& width,
                            const Actions& a, std::int64_t i) {
  const float d = ls[0][i * width[0] + a.device.data<std::int32_t>()[i]];
  const float p = ls[1][i * width[1] + a.priority.data<std::int32_t>()[i]];
  const float f = ls[2][i * width[2] + a.fuse.data<std::int32_t>()[i]];
  return (d + p) + f;
}

// Whether two tasks' actions are the same on every row (i32 tensors; two undefined ones are).
inline bool same_task_actions(const Tensor& x, const Tensor& y) {
  if (x.defined() != y.defined()) return false;
  if (!x.defined()) return true;
  if (x.numel() != y.numel() || x.dtype() != DType::i32 || y.dtype() != DType::i32) return false;
  return std::equal(x.data<std::int32_t>(), x.data<std::int32_t>() + x.numel(), y.data<std::int32_t>());
}
// Whether a and b are the same decision: every task's action equal on every row.
inline bool same_actions(const Actions& a, const Actions& b) {
  return same_task_actions(a.device, b.device) && same_task_actions(a.priority, b.priority) &&
         same_task_actions(a.fuse, b.fuse);
}

struct PolicyOutput {
  Variable device_logits;    // [n, D]
  Variable priority_logits;  // [n, P]
  Variable fusion_logits;    // [n, 2]
  Actions actions;           // sampled, greedy or the given ones
  Variable log_prob_device, log_prob_priority, log_prob_fusion;  // [n] each, conditional on earlier tasks
  Variable log_prob;         // [n] joint log-probability of each row's three actions (their sum)
  Variable log_prob_sum;     // scalar: the whole plan's log-probability
  Variable entropy;          // [n] sum of the three conditional entropies of each row
  Variable entropy_mean;     // scalar: mean over rows
  Variable value;            // [1, 1] graph-level value estimate
  Variable node_embedding;   // [n, d] encoder output (GraphSAGE)
};

enum class Decode : std::uint8_t { sample, greedy, given };

class GoPolicy : public nn::Module {
 public:
  explicit GoPolicy(PolicyConfig cfg);

  const PolicyConfig& config() const { return cfg_; }

  // Heads only (TrainConfig "trainable": "heads"; PpoTrainer sets it from its config): the passes
  // record no gradient for the encoder and the attention blocks, so a backward costs the heads'
  // share of the network and keeps none of the blocks' activations, and an optimizer step leaves
  // every other parameter as it is (they get no gradient). The outputs' values are the same either
  // way. Why fine-tuning uses it: with 20 updates, training the whole network changed no plan
  // measurably and cost a quarter to a third of an update (bench/README.md "Fine-tuning the heads only").
  void set_heads_only(bool on) { heads_only_ = on; }
  bool heads_only() const { return heads_only_; }

  // The encoder alone: GraphSAGE node embeddings [n, d] (rows in topological order).
  Variable encode(const PolicyGraph& g) const;

  // One pass over the whole graph. mode: sample (needs rng), greedy, or given (needs `given`,
  // whose rows are in topological order). num_devices in [1, max_devices].
  PolicyOutput forward(const PolicyGraph& g, int num_devices, Decode mode, const Actions* given = nullptr,
                       Rng* rng = nullptr) const;

  // `count` decisions on one graph in one pass: output k is sampled with (*rngs)[k], or takes
  // (*given)[k], or is greedy. Everything that does not depend on a sampled action is computed
  // once and shared by the outputs (the same Variables): the encoder, the placement blocks and
  // head, the value, and with chain "hidden" the priority and fusion blocks and heads too, so the
  // whole call costs one network pass whatever `count`. With chain "action" the priority and
  // fusion blocks read output k's sampled actions and run once per output. Output k equals
  // forward() with the same rng or actions.
  std::vector<PolicyOutput> forward_many(const PolicyGraph& g, int num_devices, Decode mode, std::size_t count,
                                         const std::vector<Actions>* given = nullptr,
                                         std::vector<Rng>* rngs = nullptr) const;

  // Gradients of sum_k loss_of(k, output k) for the given actions, accumulated into the parameters'
  // gradients: what forward_many(given) followed by one backward of the sum gives, but with chain
  // "action" each output's priority and fusion blocks are back-propagated before the next one runs
  // (only the shared part is kept for the whole call), so memory does not grow with the count.
  // The shared part is back-propagated once, with the outputs' gradients summed.
  void backward_many(const PolicyGraph& g, int num_devices, const std::vector<Actions>& given,
                     const std::function<Variable(std::size_t, const PolicyOutput&)>& loss_of) const;

  // Chain "hidden": backward_many's gradients, bit for bit, back-propagated through the recorded
  // pass that produced `drawn` instead of a new one. `drawn`: an output of forward_many on g called
  // with gradients recorded, with the parameters unchanged since (PPO's first minibatch, whose
  // parameters are those the samples were drawn with). The pass serves one backward (backward
  // releases it); a second call is refused.
  void backward_from(const PolicyGraph& g, const PolicyOutput& drawn, const std::vector<Actions>& given,
                     const std::function<Variable(std::size_t, const PolicyOutput&)>& loss_of) const;

  // `rngs.size()` sampled decisions of one pass, what PPO's sampling keeps of them: the actions
  // and the per-row log-probabilities of each (the same bits as forward_many(Decode::sample) with
  // the same rngs gives in its outputs' actions and log_prob), and `pass`, an output carrying the
  // pass's logits, entropy, value and embedding (recorded with gradients unless called under
  // NoGradGuard: backward_shared and backward_from take it as `drawn`). With chain "hidden" no
  // decision gets Variables of its own (forward_many's outputs hold five [n] ones each, which on
  // 80,588 rows and 128 samples are 206 MB).
  struct Samples {
    PolicyOutput pass;
    std::vector<Actions> actions;
    std::vector<Tensor> log_prob;  // [n] each
  };
  Samples sample_many(const PolicyGraph& g, int num_devices, std::vector<Rng>& rngs) const;

  // Chain "hidden": what every decision of one pass reads, for a loss over many decisions that
  // reads it once (PPO's batched loss, go/rl/ppo_loss.hpp) instead of building each one's
  // log-probabilities (backward_many's outputs).
  struct SharedOutput {
    std::array<Variable, 3> log_softmax;  // of the device, priority and fusion logits: [n, D], [n, P], [n, 2]
    Variable entropy_mean;                // scalar: mean over rows of the three tasks' entropies
    Variable value;                       // [1, 1]
  };
  // Chain "hidden": gradients of loss(shared), accumulated into the parameters, from a new pass, or
  // with `drawn` through the recorded pass that produced it (as backward_from, with its
  // conditions). `given`: the decisions the loss reads, checked against g.
  void backward_shared(const PolicyGraph& g, int num_devices, const PolicyOutput* drawn,
                       const std::vector<Actions>& given,
                       const std::function<Variable(const SharedOutput&)>& loss) const;

  // The greedy decision of an output's distribution (chain "hidden": its logits do not depend on
  // the sampled actions, so the output of any sample gives it).
  Actions greedy_actions(const PolicyOutput& o) const;

  // Convenience: a sampled (or greedy) decision without recording gradients.
  Actions act(const PolicyGraph& g, int num_devices, Rng* rng, bool greedy = false) const;

  // Saves the parameters with the config as metadata; load() checks the names and shapes.
  void save_policy(const std::string& path) const;
  // Builds a policy from a file written by save_policy().
  static std::shared_ptr<GoPolicy> load_policy(const std::string& path);
  // The same from a file already read by load_tensors (`path` names it in errors).
  static std::shared_ptr<GoPolicy> load_policy(const LoadedTensors& file, const std::string& path);

 private:
  // What no sampled action influences: encoder output, graph context, placement blocks, the
  // device embeddings in use, placement logits and the value.
  struct Trunk {
    Variable h, context, zp, dev, device_logits, value;  // dev: the device table; only trunk() reads it
  };
  Trunk trunk(const PolicyGraph& g, int num_devices) const;
  Variable run_blocks(int task, Variable x, const Variable& context) const;
  Variable priority_logits(const PolicyGraph& g, const Variable& zs) const;
  Variable fusion_logits(const PolicyGraph& g, const Variable& zf) const;
  // The outputs from a trunk: actions task by task (output k's draws come from its own rng in the
  // order device, priority, fusion, as a single forward() makes them), then log-probabilities.
  std::vector<PolicyOutput> tails(const PolicyGraph& g, const Trunk& t, int num_devices, Decode mode,
                                  std::size_t count, const std::vector<Actions>* given, std::vector<Rng>* rngs) const;
  // Chain "hidden": what one pass gives every output (none of it depends on a sampled action).
  struct Shared {
    Variable device_logits, priority_logits, fusion_logits, entropy, value, h;
  };
  struct Dist;
  // Chain "hidden": the pass from a trunk (the priority and fusion blocks and heads, the entropy).
  Shared hidden_pass(const PolicyGraph& g, const Trunk& t) const;
  // Chain "hidden": the recorded pass of an output of forward_many, checked for another backward
  // through it with these decisions (backward_from, backward_shared).
  Shared recorded_pass(const PolicyGraph& g, const PolicyOutput& drawn, const std::vector<Actions>& given) const;
  std::vector<PolicyOutput> outputs(const Shared& s, Decode mode, std::size_t count, const std::vector<Actions>* given,
                                    std::vector<Rng>* rngs) const;
  // Output k's draws of each task from its rng: every output's draws of a task together, each rng
  // taking its uniforms in the order one forward() would (the tasks in turn, rows in order).
  static std::vector<Actions> draw(const Dist* d, std::vector<Rng>& rngs);
  // An output's logits, log-probabilities of its actions, entropy mean, value and embedding.
  static void finish(PolicyOutput& o, const Dist* d, const Variable& value, const Variable& h);
  // Back-propagates sum_k loss_of(k, outs[k]) in one backward.
  static void backward_sum(const std::vector<PolicyOutput>& outs,
                           const std::function<Variable(std::size_t, const PolicyOutput&)>& loss_of);
  void check_call(const PolicyGraph& g, int num_devices, Decode mode, std::size_t count,
                  const std::vector<Actions>* given, const std::vector<Rng>* rngs) const;
  // LN_task(z) W + b without keeping LN_task(z) (nn::ln_linear).
  Variable head(const Variable& z, int task, const nn::Dense& dense) const;
  bool uses_anchor(const PolicyGraph& g) const { return cfg_.anchor && g.has_anchor(); }
  // logits + bias[task] * onehot(anchor): the anchor's action gets a learned head start.
  Variable anchored(const Variable& logits, const Tensor& anchor, std::int64_t width, int task) const;
  void check_graph(const PolicyGraph& g) const;
  void check_actions(const PolicyGraph& g, const Actions& a, int num_devices) const;

  PolicyConfig cfg_;
  std::shared_ptr<nn::Dense> input_;
  std::shared_ptr<nn::Embedding> kind_;
  std::shared_ptr<nn::GraphSage> sage_;
  std::vector<std::shared_ptr<nn::SegmentAttentionBlock>> blocks_[3];
  std::shared_ptr<nn::LayerNorm> final_ln_[3];
  std::shared_ptr<nn::Superposition> superposition_;
  std::shared_ptr<nn::Dense> device_query_, priority_head_, fusion_head_, value1_, value2_;
  std::shared_ptr<nn::Embedding> devices_, device_action_, priority_action_;
  std::shared_ptr<nn::Embedding> anchor_device_;  // with cfg.anchor
  Variable anchor_bias_;                          // [1, 3]: device, priority, fusion
  bool heads_only_ = false;
};

}  // namespace go::policy
