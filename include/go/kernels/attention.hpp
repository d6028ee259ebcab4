#pragma once
// Segment-recurrent multi-head attention (Transformer-XL style).
//
// Rows (nodes, in topological order) are cut into segments of seg_len rows.
// A query row i in segment s = i / seg_len, whose rows are [b, e), attends to the
// keys [max(0, b - mem_len), e): its own segment plus up to mem_len cached rows
// before it. With causal, keys after i are excluded. The cached rows (j < b) are
// constants for the gradient: no gradient flows into their keys or values.
// Scores are never materialised beyond one tile; the softmax is computed online.
#include <cstdint>

namespace go::kernels {

struct SegAttention {
  std::int64_t n = 0;         // rows
  std::int32_t heads = 1;
  std::int32_t head_dim = 0;  // q, k, v, out are [n, heads * head_dim] row-major
  std::int64_t seg_len = 128;
  std::int64_t mem_len = 128;
  bool causal = false;
  float scale = 0.f;          // applied to q.k; 0 means 1 / sqrt(head_dim)
};

// out: [n, heads * head_dim]; lse: [heads, n], the log-sum-exp of each query's
// scaled scores, saved for the backward pass.
void seg_attention_forward(const SegAttention& p, const float* q, const float* k, const float* v, float* out,
                           float* lse);

// dq, dk, dv: [n, heads * head_dim], overwritten.
void seg_attention_backward(const SegAttention& p, const float* q, const float* k, const float* v,
                            const float* out, const float* lse, const float* dout, float* dq, float* dk,
                            float* dv);

}  // namespace go::kernels
