#pragma once
// Sparse neighbour aggregation over a CSR graph (GraphSAGE's aggregators).
// Conventions follow DGL/PyG: mean divides by max(degree, 1); a node without
// neighbours gets 0 from max and records argmax -1.
//
// Raw kernels on host pointers (all arrays contiguous, row-major), parallel with
// OpenMP over output rows; any d >= 0, n_dst >= 0 and nnz >= 0. Duplicate edges
// and self-loops are allowed: a duplicate counts twice in sum and mean. The
// caller owns every buffer (no allocation inside); the tensor adapters with
// their checks are in go/autograd/aggregate.hpp, the CSR type in go/core/csr.hpp.
// row_ptr[0] must be 0 and the offsets nondecreasing; indices are not checked here.
#include <cstdint>

namespace go::kernels {

enum class Reduce : std::uint8_t { sum, mean, max };

// out[i, :] = reduce_{e in [row_ptr[i], row_ptr[i+1])} x[col_idx[e], :]
//   row_ptr: n_dst + 1 offsets; col_idx: source node of each edge, in [0, n_src).
//   x: [n_src, d]; out: [n_dst, d] (overwritten).
//   argmax: [n_dst, d], written for Reduce::max only (may be null otherwise): the source
//   node (col_idx value) of the maximum; ties go to the first edge of the row that holds it.
void csr_aggregate_forward(Reduce reduce, const std::int64_t* row_ptr, const std::int32_t* col_idx,
                           std::int64_t n_dst, const float* x, std::int64_t d, float* out, std::int32_t* argmax);

// dx[j, :] = sum over edges (i <- j) of the gradient that edge carries:
//   sum:  dout[i, :]; mean: dout[i, :] / max(deg(i), 1); max: dout[i, f] where argmax[i, f] == j.
//   The transposed CSR (t_row_ptr: n_src + 1 offsets, t_col_idx: destination of each edge)
//   lets every source row be written by one thread, without atomics.
//   row_ptr (the forward CSR) gives deg(i) for mean (may be null otherwise). dx: [n_src, d]
//   (overwritten); a source without out-edges gets 0.
//   For max, the duplicates of a destination within a transposed row must be adjacent
//   (Csr::transpose lists each row in ascending order): a destination that reaches j through
//   several duplicate edges passes its gradient to x[j] once, the derivative of a max over
//   copies of one value. argmax: the [n_dst, d] tensor written by the forward pass.
void csr_aggregate_backward(Reduce reduce, const std::int64_t* row_ptr, const std::int64_t* t_row_ptr,
                            const std::int32_t* t_col_idx, std::int64_t n_src, std::int64_t n_dst,
                            const float* dout, std::int64_t d, const std::int32_t* argmax, float* dx);

}  // namespace go::kernels
