#pragma once
// Segment-recurrent multi-head attention (Transformer-XL style).
//
// Rows (nodes, in topological order) are cut into segments of seg_len rows; the
// last segment may be shorter. A query row i in segment s = i / seg_len, whose
// rows are [b, e), attends to the keys [max(0, b - mem_len), e): its own segment
// plus up to mem_len cached rows before it. With causal, keys after i are
// excluded (query i sees [max(0, b - mem_len), i]), so every query sees at least
// itself. The cached rows (j < b) are constants for the gradient: no gradient
// flows into their keys or values from the queries of segment s (their own
// segment's queries still give them gradient). Consequently the key/value rows
// of a segment get gradient only from the queries of the same segment.
//
// Scores are never materialised beyond one tile; the softmax is computed online
// (FlashAttention-2 style), masks are evaluated on the fly, and the backward
// recomputes the probabilities from the saved lse. Work is parallel over
// (segment, head) with OpenMP; per-thread scratch is reused across calls.
#include <cstdint>

namespace go::kernels {

// q, k, v and out are [n, heads * head_dim] row-major; head h owns the columns
// [h * head_dim, (h + 1) * head_dim).
struct SegAttention {
  std::int64_t n = 0;         // rows
  std::int32_t heads = 1;
  std::int32_t head_dim = 0;
  std::int64_t seg_len = 128;
  std::int64_t mem_len = 128;
  bool causal = false;
  float scale = 0.f;          // applied to q.k; 0 means 1 / sqrt(head_dim)
};

// Checks p as both passes do (go::Error for n < 0, heads < 1, head_dim < 1, seg_len < 1 or
// mem_len < 0) and returns the scale they apply. The CUDA kernels (go/cuda/kernels.hpp) share it.
float seg_attention_scale(const SegAttention& p);

// out: [n, heads * head_dim]; lse: [heads, n], the natural log-sum-exp of each
// query's scaled scores (lse[h * n + i]), saved for the backward pass.
// Throws go::Error for n < 0, heads < 1, head_dim < 1, seg_len < 1 or mem_len < 0.
// n == 0 is a no-op.
void seg_attention_forward(const SegAttention& p, const float* q, const float* k, const float* v, float* out,
                           float* lse);

// Given out and lse from the forward and dout = dLoss/dout, writes
// dq, dk, dv: [n, heads * head_dim], overwritten (not accumulated).
void seg_attention_backward(const SegAttention& p, const float* q, const float* k, const float* v, const float* out,
                            const float* lse, const float* dout, float* dq, float* dk, float* dv);

}  // namespace go::kernels
