#pragma once
// The (query, visible key) pairs of segment-recurrent attention, per head: the FLOP counts of
// bench_attention (CPU) and bench_cuda (GPU) are made from them.
#include <algorithm>
#include <cstdint>

#include "go/kernels/attention.hpp"

namespace go::bench {

struct Pairs {
  double all = 0, own = 0;  // visible (query, key) pairs per head; those with the key in the query's segment
};

inline Pairs count_pairs(const go::kernels::SegAttention& p) {
  Pairs c;
  for (std::int64_t b = 0; b < p.n; b += p.seg_len) {
    const std::int64_t e = std::min(p.n, b + p.seg_len), kb = std::max<std::int64_t>(0, b - p.mem_len);
    for (std::int64_t i = b; i < e; ++i) {
      const std::int64_t hi = p.causal ? i + 1 : e;
      c.all += static_cast<double>(hi - kb);
      c.own += static_cast<double>(hi - b);
    }
  }
  return c;
}

}  // namespace go::bench
