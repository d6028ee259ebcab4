#pragma once
// Sparse neighbour aggregation over a CSR graph (GraphSAGE's aggregators).
// Conventions follow DGL/PyG: mean divides by max(degree, 1); a node without
// neighbours gets 0 from max and records argmax -1.
#include <cstdint>

namespace go::kernels {

enum class Reduce : std::uint8_t { sum, mean, max };

// out[i, :] = reduce_{e in [row_ptr[i], row_ptr[i+1])} x[col_idx[e], :]
//   row_ptr: n_dst + 1 offsets; col_idx: source node of each edge, in [0, n_src).
//   x: [n_src, d]; out: [n_dst, d] (overwritten).
//   argmax: [n_dst, d], written for Reduce::max only (may be null otherwise).
void csr_aggregate_forward(Reduce reduce, const std::int64_t* row_ptr, const std::int32_t* col_idx,
                           std::int64_t n_dst, const float* x, std::int64_t d, float* out, std::int32_t* argmax);

// dx[j, :] = sum over edges (i <- j) of the gradient that edge carries:
//   sum:  dout[i, :]; mean: dout[i, :] / max(deg(i), 1); max: dout[i, f] where argmax[i, f] == j.
//   The transposed CSR (t_row_ptr: n_src + 1 offsets, t_col_idx: destination of each edge)
//   lets every source row be written by one thread, without atomics.
//   row_ptr (the forward CSR) gives deg(i) for mean. dx: [n_src, d] (overwritten).
void csr_aggregate_backward(Reduce reduce, const std::int64_t* row_ptr, const std::int64_t* t_row_ptr,
                            const std::int32_t* t_col_idx, std::int64_t n_src, std::int64_t n_dst,
                            const float* dout, std::int64_t d, const std::int32_t* argmax, float* dx);

}  // namespace go::kernels
