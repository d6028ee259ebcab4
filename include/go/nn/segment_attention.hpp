#pragma once
// Segment-recurrent attention block (Transformer-XL style), pre-norm:
//
//   u   = x * gate                          (parameter superposition; skipped without a gate)
//   a   = u + Attn(LN1(u)) W_o + b_o         Attn: go::seg_attention, multi-head, over segments of
//                                           seg_len rows that also see mem_len cached rows before
//                                           them, gradient-stopped (see go/autograd/attention.hpp)
//   out = a + W_2 gelu(W_1 LN2(a) + b_1) + b_2
//
// Memory: the fused ops keep u, LN1(u), q, k, v, the attention output, a, and the feed-forward's
// pre-activation; LN2(a), the gelu output and the projections before each residual add are not
// kept (nn::linear / nn::mlp_gelu with residuals, LN2 recomputed in the backward pass).
//
// Rows are nodes in topological order; the whole sequence is processed in one
// call (every segment in parallel), which equals running the segments one after
// another with the previous segment's states cached, since the cache is
// stop-gradient. No positional encoding: positions enter through the node features.
#include <cmath>
#include <cstdint>
#include <memory>

#include "go/autograd/attention.hpp"
#include "go/nn/layers.hpp"

namespace go::nn {

struct SegmentAttentionOptions {
  std::int64_t dim = 128;
  std::int32_t heads = 4;
  std::int64_t seg_len = 128;
  std::int64_t mem_len = 128;
  bool causal = true;
  std::int64_t ffn_dim = 512;
};

class SegmentAttentionBlock : public Module {
 public:
  SegmentAttentionBlock(const SegmentAttentionOptions& o, Rng& rng) : o_(o) {
    GO_CHECK(o.dim >= 1 && o.heads >= 1 && o.dim % o.heads == 0, "SegmentAttentionBlock: dim ", o.dim,
             " must be a positive multiple of heads ", o.heads);
    GO_CHECK(o.seg_len >= 1 && o.mem_len >= 0 && o.ffn_dim >= 1, "SegmentAttentionBlock: seg_len ", o.seg_len,
             " (>= 1), mem_len ", o.mem_len, " (>= 0) or ffn_dim ", o.ffn_dim, " (>= 1) out of range");
    ln1_ = register_module("ln1", std::make_shared<LayerNorm>(o.dim));
    q_ = register_module("q", std::make_shared<Dense>(o.dim, o.dim, rng, Activation::none, false));
    k_ = register_module("k", std::make_shared<Dense>(o.dim, o.dim, rng, Activation::none, false));
    v_ = register_module("v", std::make_shared<Dense>(o.dim, o.dim, rng, Activation::none, false));
    o_proj_ = register_module("o", std::make_shared<Dense>(o.dim, o.dim, rng));
    ln2_ = register_module("ln2", std::make_shared<LayerNorm>(o.dim));
    ff1_ = register_module("ff1", std::make_shared<Dense>(o.dim, o.ffn_dim, rng, Activation::gelu));
    ff2_ = register_module("ff2", std::make_shared<Dense>(o.ffn_dim, o.dim, rng));
  }

  kernels::SegAttention attention_params() const {
    kernels::SegAttention p;
    p.heads = o_.heads;
    p.head_dim = static_cast<std::int32_t>(o_.dim / o_.heads);
    p.seg_len = o_.seg_len;
    p.mem_len = o_.mem_len;
    p.causal = o_.causal;
    p.scale = 0.f;
    return p;
  }

  // x [n, dim]; gate: [1, dim] or undefined.
  Variable forward(const Variable& x, const Variable& gate = Variable()) const {
    GO_CHECK(x.value().rank() == 2 && x.dim(1) == o_.dim, "SegmentAttentionBlock: x ", x.shape().to_string(),
             " must be [n, ", o_.dim, "]");
    Variable u = gate.defined() ? mul_row(x, gate) : x;
    Variable z = ln1_->forward(u);
    Variable att = seg_attention(q_->forward(z), k_->forward(z), v_->forward(z), attention_params());
    Variable a = linear(att, o_proj_->weight(), o_proj_->bias(), Activation::none, u);  // u + att W_o + b_o
    return mlp_gelu(a, ff1_->weight(), ff1_->bias(), ff2_->weight(), ff2_->bias(), a, ln2_->gamma(), ln2_->beta());
  }
  const SegmentAttentionOptions& options() const { return o_; }

 private:
  SegmentAttentionOptions o_;
  std::shared_ptr<LayerNorm> ln1_, ln2_;
  std::shared_ptr<Dense> q_, k_, v_, o_proj_, ff1_, ff2_;
};

}  // namespace go::nn
