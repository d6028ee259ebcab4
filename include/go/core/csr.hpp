#pragma once
// Compressed sparse rows of a directed graph, as consumed by the aggregation
// kernels (go/kernels/aggregate.hpp).
//
// Row i lists the in-neighbours of destination node i: its edges are
// [row_ptr[i], row_ptr[i+1]) and col_idx[e] is the source node of edge e.
// Duplicate edges and self-loops are allowed (a duplicate counts twice in a sum).
//
// CsrPair holds a graph and its transpose, built once per graph and reused at
// every step: the forward pass reads `fwd`, the backward pass reads `bwd`, so
// each gradient row is written by one thread without atomics.
#include <cstdint>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include "go/core/error.hpp"
#include "go/core/tensor.hpp"

namespace go {

struct Csr {
  Tensor row_ptr;  // i64 [n_dst + 1], row_ptr[0] == 0, nondecreasing, row_ptr[n_dst] == nnz
  Tensor col_idx;  // i32 [nnz], each in [0, n_src)
  std::int64_t n_dst = 0;
  std::int64_t n_src = 0;

  std::int64_t nnz() const { return col_idx.defined() ? col_idx.numel() : 0; }
  std::int64_t degree(std::int64_t i) const {
    GO_CHECK(0 <= i && i < n_dst, "Csr::degree: row ", i, " out of range for ", n_dst, " rows");
    const std::int64_t* rp = row_ptr.data<std::int64_t>();
    return rp[i + 1] - rp[i];
  }

  // The empty graph: n_dst rows without edges over n_src source nodes.
  static Csr empty(std::int64_t n_dst, std::int64_t n_src) {
    GO_CHECK(n_dst >= 0 && n_src >= 0, "Csr::empty: negative size (n_dst ", n_dst, ", n_src ", n_src, ")");
    Csr g;
    g.n_dst = n_dst;
    g.n_src = n_src;
    g.row_ptr = Tensor::zeros(Shape{n_dst + 1}, DType::i64);
    g.col_idx = Tensor::zeros(Shape{0}, DType::i32);
    return g;
  }

  // Cheap checks of dtypes and sizes: O(1), done by the tensor adapters on every call.
  void check_layout() const {
    GO_CHECK(n_dst >= 0 && n_src >= 0, "Csr: negative size (n_dst ", n_dst, ", n_src ", n_src, ")");
    GO_CHECK(n_src <= std::numeric_limits<std::int32_t>::max(), "Csr: n_src ", n_src,
             " does not fit the int32 column indices");
    GO_CHECK(row_ptr.defined() && col_idx.defined(), "Csr: row_ptr or col_idx is undefined");
    GO_CHECK(row_ptr.dtype() == DType::i64 && row_ptr.rank() == 1 && row_ptr.numel() == n_dst + 1,
             "Csr: row_ptr must be i64 [n_dst + 1] = [", n_dst + 1, "], got ", row_ptr.describe());
    GO_CHECK(col_idx.dtype() == DType::i32 && col_idx.rank() == 1,
             "Csr: col_idx must be an i32 vector, got ", col_idx.describe());
    GO_CHECK(row_ptr.device().is_cpu() && col_idx.device().is_cpu(), "Csr: host tensors expected");
    const std::int64_t* rp = row_ptr.data<std::int64_t>();
    GO_CHECK(rp[0] == 0, "Csr: row_ptr[0] is ", rp[0], ", expected 0");
    GO_CHECK(rp[n_dst] == col_idx.numel(), "Csr: row_ptr[", n_dst, "] (the last offset) is ", rp[n_dst],
             " but col_idx holds ", col_idx.numel(), " edges");
  }

  // Full validation, O(n_dst + nnz): every offset and every index. Throws go::Error naming
  // the first bad offset or index.
  void validate() const {
    check_layout();
    const std::int64_t* rp = row_ptr.data<std::int64_t>();
    for (std::int64_t i = 0; i < n_dst; ++i)
      GO_CHECK(rp[i] <= rp[i + 1], "Csr: row_ptr decreases at row ", i, ": row_ptr[", i, "] = ", rp[i],
               " > row_ptr[", i + 1, "] = ", rp[i + 1]);
    const std::int32_t* ci = col_idx.data<std::int32_t>();
    const std::int64_t m = nnz();
    for (std::int64_t e = 0; e < m; ++e)
      GO_CHECK(ci[e] >= 0 && ci[e] < n_src, "Csr: col_idx[", e, "] = ", ci[e], " is out of range [0, ", n_src,
               ")");
  }

  // From an edge list (dst[k] <- src[k]); edges are sorted stably by destination, so
  // the edges of one row keep their order in the list.
  static Csr from_edges(std::int64_t n_dst, std::int64_t n_src, std::span<const std::int32_t> dst,
                        std::span<const std::int32_t> src) {
    return from_edges_impl(n_dst, n_src, dst, src);
  }
  static Csr from_edges(std::int64_t n_dst, std::int64_t n_src, std::span<const std::int64_t> dst,
                        std::span<const std::int64_t> src) {
    return from_edges_impl(n_dst, n_src, dst, src);
  }

  // The reverse graph: n_src rows over n_dst source nodes. Rows of the result list
  // their columns in ascending order (duplicates adjacent), which the max backward
  // kernel relies on.
  Csr transpose() const {
    check_layout();
    GO_CHECK(n_dst <= std::numeric_limits<std::int32_t>::max(), "Csr::transpose: n_dst ", n_dst,
             " does not fit the int32 column indices");
    const std::int64_t m = nnz();
    Csr t;
    t.n_dst = n_src;
    t.n_src = n_dst;
    t.row_ptr = Tensor::zeros(Shape{n_src + 1}, DType::i64);
    t.col_idx = Tensor::empty(Shape{m}, DType::i32);
    const std::int64_t* rp = row_ptr.data<std::int64_t>();
    const std::int32_t* ci = col_idx.data<std::int32_t>();
    std::int64_t* trp = t.row_ptr.data<std::int64_t>();
    std::int32_t* tci = t.col_idx.data<std::int32_t>();
    for (std::int64_t e = 0; e < m; ++e) {
      GO_CHECK(ci[e] >= 0 && ci[e] < n_src, "Csr::transpose: col_idx[", e, "] = ", ci[e],
               " is out of range [0, ", n_src, ")");
      ++trp[ci[e] + 1];
    }
    for (std::int64_t j = 0; j < n_src; ++j) trp[j + 1] += trp[j];
    std::vector<std::int64_t> next(trp, trp + n_src);
    for (std::int64_t i = 0; i < n_dst; ++i)
      for (std::int64_t e = rp[i]; e < rp[i + 1]; ++e) tci[next[ci[e]]++] = static_cast<std::int32_t>(i);
    return t;
  }

  friend bool operator==(const Csr& a, const Csr& b) {
    if (a.n_dst != b.n_dst || a.n_src != b.n_src || a.nnz() != b.nnz()) return false;
    const auto* ra = a.row_ptr.data<std::int64_t>();
    const auto* rb = b.row_ptr.data<std::int64_t>();
    for (std::int64_t i = 0; i <= a.n_dst; ++i)
      if (ra[i] != rb[i]) return false;
    const auto* ca = a.col_idx.data<std::int32_t>();
    const auto* cb = b.col_idx.data<std::int32_t>();
    for (std::int64_t e = 0; e < a.nnz(); ++e)
      if (ca[e] != cb[e]) return false;
    return true;
  }

 private:
  template <class I>
  static Csr from_edges_impl(std::int64_t n_dst, std::int64_t n_src, std::span<const I> dst,
                             std::span<const I> src) {
    GO_CHECK(dst.size() == src.size(), "Csr::from_edges: ", dst.size(), " destinations but ", src.size(),
             " sources");
    Csr g = empty(n_dst, n_src);
    GO_CHECK(n_src <= std::numeric_limits<std::int32_t>::max(), "Csr::from_edges: n_src ", n_src,
             " does not fit the int32 column indices");
    const auto m = static_cast<std::int64_t>(dst.size());
    std::int64_t* rp = g.row_ptr.data<std::int64_t>();
    for (std::int64_t k = 0; k < m; ++k) {
      GO_CHECK(dst[k] >= 0 && dst[k] < n_dst, "Csr::from_edges: edge ", k, " has destination ", dst[k],
               " out of range [0, ", n_dst, ")");
      GO_CHECK(src[k] >= 0 && src[k] < n_src, "Csr::from_edges: edge ", k, " has source ", src[k],
               " out of range [0, ", n_src, ")");
      ++rp[dst[k] + 1];
    }
    for (std::int64_t i = 0; i < n_dst; ++i) rp[i + 1] += rp[i];
    g.col_idx = Tensor::empty(Shape{m}, DType::i32);
    std::int32_t* ci = g.col_idx.data<std::int32_t>();
    std::vector<std::int64_t> next(rp, rp + n_dst);
    for (std::int64_t k = 0; k < m; ++k) ci[next[dst[k]]++] = static_cast<std::int32_t>(src[k]);
    return g;
  }
};

// A graph and its transpose; the pair the aggregation op needs.
struct CsrPair {
  Csr fwd;  // n_dst rows: in-neighbours of each destination
  Csr bwd;  // fwd.transpose(): n_src rows, destinations of each source, ascending

  CsrPair() = default;
  // Validates `g` once (O(nnz)) and builds its transpose.
  explicit CsrPair(Csr g) : fwd(std::move(g)) {
    fwd.validate();
    bwd = fwd.transpose();
  }
  static CsrPair from_edges(std::int64_t n_dst, std::int64_t n_src, std::span<const std::int32_t> dst,
                            std::span<const std::int32_t> src) {
    return CsrPair(Csr::from_edges(n_dst, n_src, dst, src));
  }
  static CsrPair from_edges(std::int64_t n_dst, std::int64_t n_src, std::span<const std::int64_t> dst,
                            std::span<const std::int64_t> src) {
    return CsrPair(Csr::from_edges(n_dst, n_src, dst, src));
  }

  std::int64_t n_dst() const { return fwd.n_dst; }
  std::int64_t n_src() const { return fwd.n_src; }
  std::int64_t nnz() const { return fwd.nnz(); }
};

}  // namespace go
