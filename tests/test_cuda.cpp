// CUDA backend, first increment (go/cuda/*.hpp): every CUDA kernel against its CPU counterpart
// on random inputs, including empty graphs, zero-degree rows, duplicate edges and ragged sizes.
//
// Without a CUDA device (or in a build without the CUDA backend) each TEST_CASE prints one
// "SKIP" warning saying why (go::cuda_describe()) and passes without touching CUDA. The file
// compiles in every build: go/cuda/*.hpp declare the same API either way (stubs throw).
//
// Tolerances (|gpu - cpu| <= atol + rtol * |cpu|):
//   aggregation sum/mean fwd+bwd: rtol 1e-5, atol 1e-6 (same edge order per feature; mean may
//     divide where the CPU multiplies by a reciprocal, one rounding apart). max: exact (values
//     and argmax are picked, never computed).
//   activations, Adam: rtol 1e-5, atol 1e-6 (same math.hpp code; nvcc contracts to FMA, the
//     ISO-mode CPU build does not, a few ulps apart).
//   layer norm, softmax: rtol 1e-4, atol 1e-5 (tree reductions on the GPU vs sequential ones
//     on the CPU); dgamma / dbeta sum over rows: atol 1e-4.
//   GEMM: rtol 1e-4, atol 1e-5 * k (cuBLAS in FP32 pedantic mode, no TF32; different
//     summation order).
//   segment attention: out and lse rtol 1e-4, atol 1e-5; dq, dk, dv rtol 1e-3, atol 1e-4 (sums
//     over up to seg + mem keys in another order; CUDA's expf against the CPU's exp2 polynomial).
#include <catch2/catch.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "go/core/csr.hpp"
#include "go/core/cuda.hpp"
#include "go/core/error.hpp"
#include "go/cuda/device.hpp"
#include "go/cuda/kernels.hpp"
#include "go/cuda/tensor.hpp"
#include "go/kernels/aggregate.hpp"
#include "go/kernels/attention.hpp"
#include "go/kernels/gemm.hpp"
#include "go/kernels/rowwise.hpp"
#include "harness.hpp"

using go::Csr;
using go::DType;
using go::Rng;
using go::Shape;
using go::Tensor;
using go::cuda::DeviceTensor;
using go::cuda::to_device;
using go::cuda::to_host;
using go::kernels::Reduce;
using go::kernels::Unary;
using go::test::random_tensor;
using go::test::require_close;

// Skips the rest of the TEST_CASE, with one warning line, when no CUDA device can be used.
#define GO_CUDA_OR_SKIP()                                                      \
  do {                                                                         \
    if (go::cuda_device_count() == 0) {                                        \
      WARN("SKIP (no CUDA device): " << go::cuda_describe());                  \
      return;                                                                  \
    }                                                                          \
  } while (0)

namespace {

// A random CSR graph: each destination has 0..max_deg in-edges (a fraction of rows get none),
// sources drawn with replacement (duplicates and, for square graphs, self-loops happen).
Csr random_csr(std::int64_t n_dst, std::int64_t n_src, std::int64_t max_deg, double zero_frac, Rng& rng) {
  std::vector<std::int32_t> dst, src;
  if (n_src > 0) {
    for (std::int64_t i = 0; i < n_dst; ++i) {
      if (rng.uniform() < zero_frac) continue;
      const auto deg = static_cast<std::int64_t>(rng.uniform_int(static_cast<std::uint64_t>(max_deg) + 1));
      for (std::int64_t e = 0; e < deg; ++e) {
        dst.push_back(static_cast<std::int32_t>(i));
        src.push_back(static_cast<std::int32_t>(rng.uniform_int(static_cast<std::uint64_t>(n_src))));
      }
    }
  }
  return Csr::from_edges(n_dst, n_src, std::span<const std::int32_t>(dst), std::span<const std::int32_t>(src));
}

void require_equal_i32(const Tensor& got, const Tensor& want, const std::string& what) {
  INFO(what);
  REQUIRE(got.shape() == want.shape());
  const std::vector<std::int32_t> g = got.to_vector<std::int32_t>(), w = want.to_vector<std::int32_t>();
  for (std::size_t i = 0; i < g.size(); ++i)
    if (g[i] != w[i]) FAIL(what << ": element " << i << " is " << g[i] << ", expected " << w[i]);
}

// Sizes of the row-wise tests (layer norm, softmax): rows of cols floats.
struct RowsCols {
  std::int64_t rows, cols;
};

const char* reduce_name(Reduce r) { return r == Reduce::sum ? "sum" : r == Reduce::mean ? "mean" : "max"; }

}  // namespace

TEST_CASE("cuda: device buffers and tensor copies round-trip f32, i32, i64", "[cuda]") {
  GO_CUDA_OR_SKIP();
  Rng rng(1);
  const Tensor f = random_tensor(Shape{7, 13}, rng);
  const Tensor i32 = Tensor::from_vector<std::int32_t>({-3, 0, 7, 2147483647}, Shape{4});
  const Tensor i64 = Tensor::from_vector<std::int64_t>({-1, 0, std::int64_t{1} << 40}, Shape{3});
  require_close(to_host(to_device(f)), f, 0, 0, "f32");
  require_equal_i32(to_host(to_device(i32)), i32, "i32");
  CHECK(to_host(to_device(i64)).to_vector<std::int64_t>() == i64.to_vector<std::int64_t>());
  // Empty tensors, zeros, moves.
  CHECK(to_host(to_device(Tensor::zeros(Shape{0, 5}))).numel() == 0);
  DeviceTensor z = go::cuda::device_zeros(Shape{3, 3});
  DeviceTensor moved = std::move(z);
  CHECK(to_host(moved).to_vector<float>() == std::vector<float>(9, 0.f));
  CHECK_THROWS_AS(moved.data<std::int32_t>(), go::Error);
}

TEST_CASE("cuda: errors throw go::Error with the CUDA error string", "[cuda]") {
  if (!go::cuda_compiled()) {
    WARN("SKIP (no CUDA backend): " << go::cuda_describe());
    CHECK_THROWS_WITH(go::cuda::synchronize(), Catch::Contains("this build has no CUDA backend"));
    return;
  }
  // No device needed: the message comes from cudaGetErrorName / cudaGetErrorString.
  CHECK_THROWS_WITH(go::cuda::check_status(2, "cudaMalloc(test)", "here.cu", 1),
                    Catch::Contains("cudaErrorMemoryAllocation") && Catch::Contains("here.cu:1"));
  CHECK_NOTHROW(go::cuda::check_status(0, "ok", "here.cu", 1));
  GO_CUDA_OR_SKIP();
  CHECK_THROWS_WITH(go::cuda::DeviceBuffer(std::size_t{1} << 62), Catch::Contains("cudaMalloc"));
}

TEST_CASE("cuda: CSR aggregation forward and backward match the CPU kernels", "[cuda]") {
  GO_CUDA_OR_SKIP();
  struct Case {
    std::int64_t n_dst, n_src, d, max_deg;
    double zero_frac;
  };
  // Empty graph, no edges at all, d = 0, one node, ragged d (not multiples of 32), long rows;
  // d = 1..256 keeps 1, 2, 4 or 8 features per lane in registers (max backward: 2 at most, up to
  // d = 64); wider rows keep 1 and loop over 32-feature chunks (d = 130 for max backward, d = 300
  // for all).
  const std::vector<Case> cases = {{0, 0, 8, 3, 0.0},   {0, 5, 8, 3, 0.0},     {20, 10, 16, 0, 0.0},
                                   {6, 4, 0, 3, 0.2},   {1, 1, 1, 2, 0.0},     {37, 53, 1, 5, 0.3},
                                   {100, 80, 33, 8, 0.2}, {257, 300, 64, 12, 0.1}, {1000, 1500, 130, 20, 0.25},
                                   {64, 2000, 7, 400, 0.1}, {50, 40, 300, 6, 0.1}};
  Rng rng(7);
  for (const Case& c : cases) {
    const Csr g = random_csr(c.n_dst, c.n_src, c.max_deg, c.zero_frac, rng);
    const Csr t = g.transpose();
    const Tensor x = random_tensor(Shape{c.n_src, c.d}, rng);
    const Tensor dout = random_tensor(Shape{c.n_dst, c.d}, rng);
    const DeviceTensor d_rp = to_device(g.row_ptr), d_ci = to_device(g.col_idx);
    const DeviceTensor d_trp = to_device(t.row_ptr), d_tci = to_device(t.col_idx);
    const DeviceTensor d_x = to_device(x), d_dout = to_device(dout);
    for (const Reduce r : {Reduce::sum, Reduce::mean, Reduce::max}) {
      const std::string what = std::string(reduce_name(r)) + " n_dst=" + std::to_string(c.n_dst) +
                               " n_src=" + std::to_string(c.n_src) + " d=" + std::to_string(c.d) +
                               " nnz=" + std::to_string(g.nnz());
      Tensor out = Tensor::zeros(Shape{c.n_dst, c.d});
      Tensor am = Tensor::zeros(Shape{c.n_dst, c.d}, DType::i32);
      go::kernels::csr_aggregate_forward(r, g.row_ptr.data<std::int64_t>(), g.col_idx.data<std::int32_t>(), c.n_dst,
                                         x.f32(), c.d, out.f32(), r == Reduce::max ? am.data<std::int32_t>() : nullptr);
      DeviceTensor d_out = go::cuda::device_empty(Shape{c.n_dst, c.d});
      DeviceTensor d_am = go::cuda::device_empty(Shape{c.n_dst, c.d}, DType::i32);
      go::cuda::csr_aggregate_forward(r, d_rp.data<std::int64_t>(), d_ci.data<std::int32_t>(), c.n_dst,
                                      d_x.data<float>(), c.d, d_out.data<float>(),
                                      r == Reduce::max ? d_am.data<std::int32_t>() : nullptr);
      go::cuda::synchronize();
      if (r == Reduce::max) {
        require_close(to_host(d_out), out, 0, 0, what + " forward");
        require_equal_i32(to_host(d_am), am, what + " argmax");
      } else {
        require_close(to_host(d_out), out, 1e-5, 1e-6, what + " forward");
      }

      Tensor dx = Tensor::zeros(Shape{c.n_src, c.d});
      go::kernels::csr_aggregate_backward(r, g.row_ptr.data<std::int64_t>(), t.row_ptr.data<std::int64_t>(),
                                          t.col_idx.data<std::int32_t>(), c.n_src, c.n_dst, dout.f32(), c.d,
                                          r == Reduce::max ? am.data<std::int32_t>() : nullptr, dx.f32());
      DeviceTensor d_dx = go::cuda::device_empty(Shape{c.n_src, c.d});
      go::cuda::csr_aggregate_backward(r, d_rp.data<std::int64_t>(), d_trp.data<std::int64_t>(),
                                       d_tci.data<std::int32_t>(), c.n_src, c.n_dst, d_dout.data<float>(), c.d,
                                       r == Reduce::max ? d_am.data<std::int32_t>() : nullptr, d_dx.data<float>());
      go::cuda::synchronize();
      require_close(to_host(d_dx), dx, r == Reduce::max ? 0 : 1e-5, r == Reduce::max ? 0 : 1e-6, what + " backward");
    }
  }
}

TEST_CASE("cuda: cuSPARSE SpMM with unit values equals the sum aggregation", "[cuda]") {
  GO_CUDA_OR_SKIP();
  Rng rng(11);
  const Csr g = random_csr(300, 200, 10, 0.2, rng);
  const std::int64_t d = 48;
  std::vector<std::int32_t> rp32;
  for (const std::int64_t v : g.row_ptr.to_vector<std::int64_t>()) rp32.push_back(static_cast<std::int32_t>(v));
  const Tensor x = random_tensor(Shape{g.n_src, d}, rng);
  Tensor want = Tensor::zeros(Shape{g.n_dst, d});
  go::kernels::csr_aggregate_forward(Reduce::sum, g.row_ptr.data<std::int64_t>(), g.col_idx.data<std::int32_t>(),
                                     g.n_dst, x.f32(), d, want.f32(), nullptr);
  const DeviceTensor d_rp = to_device(Tensor::from_vector(rp32, Shape{g.n_dst + 1}));
  const DeviceTensor d_ci = to_device(g.col_idx);
  const DeviceTensor d_val = to_device(Tensor::ones(Shape{g.nnz()}));
  const DeviceTensor d_x = to_device(x);
  DeviceTensor d_out = go::cuda::device_zeros(Shape{g.n_dst, d});
  go::cuda::CsrSpmm spmm(d_rp.data<std::int32_t>(), d_ci.data<std::int32_t>(), d_val.data<float>(), g.n_dst, g.n_src,
                         g.nnz(), d_x.data<float>(), d, d_out.data<float>());
  spmm.run();
  go::cuda::synchronize();
  require_close(to_host(d_out), want, 1e-5, 1e-5, "cusparse spmm");
}

TEST_CASE("cuda: cuBLAS GEMM matches go::kernels::gemm (row-major, transposes, strides, beta)", "[cuda]") {
  GO_CUDA_OR_SKIP();
  Rng rng(3);
  struct Dims {
    std::int64_t m, n, k;
  };
  for (const Dims dm : {Dims{1, 1, 1}, Dims{17, 33, 65}, Dims{128, 64, 256}, Dims{5, 300, 3}, Dims{40, 9, 0}}) {
    for (const bool ta : {false, true}) {
      for (const bool tb : {false, true}) {
        const std::int64_t pad = 3;  // row strides larger than the rows
        const std::int64_t a_rows = ta ? dm.k : dm.m, a_cols = ta ? dm.m : dm.k;
        const std::int64_t b_rows = tb ? dm.n : dm.k, b_cols = tb ? dm.k : dm.n;
        const std::int64_t lda = a_cols + pad, ldb = b_cols + pad, ldc = dm.n + pad;
        const Tensor a = random_tensor(Shape{a_rows, lda}, rng);
        const Tensor b = random_tensor(Shape{b_rows, ldb}, rng);
        Tensor c = random_tensor(Shape{dm.m, ldc}, rng);
        const DeviceTensor d_a = to_device(a), d_b = to_device(b);
        DeviceTensor d_c = to_device(c);
        const float alpha = 0.75f, beta = 0.5f;
        go::kernels::gemm(ta, tb, dm.m, dm.n, dm.k, alpha, a.f32(), lda, b.f32(), ldb, beta, c.f32(), ldc);
        go::cuda::gemm(ta, tb, dm.m, dm.n, dm.k, alpha, d_a.data<float>(), lda, d_b.data<float>(), ldb, beta,
                       d_c.data<float>(), ldc);
        go::cuda::synchronize();
        require_close(to_host(d_c), c, 1e-4, 1e-5 * static_cast<double>(dm.k + 1),
                      "gemm m=" + std::to_string(dm.m) + " n=" + std::to_string(dm.n) + " k=" + std::to_string(dm.k) +
                          " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb));
      }
    }
  }
}

TEST_CASE("cuda: activations forward and backward match the CPU", "[cuda]") {
  GO_CUDA_OR_SKIP();
  Rng rng(5);
  for (const std::int64_t n : {std::int64_t{0}, std::int64_t{1}, std::int64_t{1000}, std::int64_t{100003}}) {
    const Tensor x = random_tensor(Shape{n}, rng, -6.f, 6.f);
    const Tensor dy = random_tensor(Shape{n}, rng);
    const DeviceTensor d_x = to_device(x), d_dy = to_device(dy);
    for (const Unary op : {Unary::relu, Unary::gelu, Unary::tanh, Unary::sigmoid, Unary::exp, Unary::square}) {
      const std::string what = "unary op " + std::to_string(static_cast<int>(op)) + " n=" + std::to_string(n);
      Tensor y = Tensor::zeros(Shape{n});
      go::kernels::unary_forward(op, x.f32(), y.f32(), n);
      DeviceTensor d_y = go::cuda::device_empty(Shape{n});
      go::cuda::unary_forward(op, d_x.data<float>(), d_y.data<float>(), n);
      go::cuda::synchronize();
      require_close(to_host(d_y), y, 1e-5, 1e-6, what + " forward");
      // Backward from the CPU's y so that only the derivative is compared; accumulate onto ones.
      const DeviceTensor d_ycpu = to_device(y);
      Tensor dx = Tensor::ones(Shape{n});
      go::kernels::unary_backward(op, x.f32(), y.f32(), dy.f32(), dx.f32(), n, true);
      DeviceTensor d_dx = to_device(Tensor::ones(Shape{n}));
      go::cuda::unary_backward(op, d_x.data<float>(), d_ycpu.data<float>(), d_dy.data<float>(), d_dx.data<float>(), n,
                               true);
      go::cuda::synchronize();
      require_close(to_host(d_dx), dx, 1e-5, 1e-6, what + " backward");
    }
  }
}

TEST_CASE("cuda: layer norm forward and backward match the CPU", "[cuda]") {
  GO_CUDA_OR_SKIP();
  Rng rng(9);
  for (const RowsCols dm : {RowsCols{0, 8}, RowsCols{1, 1}, RowsCols{3, 5}, RowsCols{100, 33}, RowsCols{17, 1000},
                             RowsCols{64, 4096}}) {
    for (const bool affine : {false, true}) {
      const std::string what = "layer norm " + std::to_string(dm.rows) + "x" + std::to_string(dm.cols) +
                               (affine ? " affine" : " plain");
      const Tensor x = random_tensor(Shape{dm.rows, dm.cols}, rng, -3.f, 3.f);
      const Tensor gamma = random_tensor(Shape{dm.cols}, rng, 0.5f, 1.5f);
      const Tensor beta = random_tensor(Shape{dm.cols}, rng);
      const Tensor dy = random_tensor(Shape{dm.rows, dm.cols}, rng);
      Tensor y = Tensor::zeros(Shape{dm.rows, dm.cols}), mean = Tensor::zeros(Shape{dm.rows}),
             rstd = Tensor::zeros(Shape{dm.rows});
      go::kernels::layer_norm_forward(x.f32(), affine ? gamma.f32() : nullptr, affine ? beta.f32() : nullptr, y.f32(),
                                      mean.f32(), rstd.f32(), dm.rows, dm.cols, 1e-5f);
      const DeviceTensor d_x = to_device(x), d_g = to_device(gamma), d_b = to_device(beta), d_dy = to_device(dy);
      DeviceTensor d_y = go::cuda::device_empty(Shape{dm.rows, dm.cols});
      DeviceTensor d_mean = go::cuda::device_empty(Shape{dm.rows}), d_rstd = go::cuda::device_empty(Shape{dm.rows});
      go::cuda::layer_norm_forward(d_x.data<float>(), affine ? d_g.data<float>() : nullptr,
                                   affine ? d_b.data<float>() : nullptr, d_y.data<float>(), d_mean.data<float>(),
                                   d_rstd.data<float>(), dm.rows, dm.cols, 1e-5f);
      go::cuda::synchronize();
      require_close(to_host(d_y), y, 1e-4, 1e-5, what + " y");
      require_close(to_host(d_mean), mean, 1e-4, 1e-5, what + " mean");
      require_close(to_host(d_rstd), rstd, 1e-4, 1e-5, what + " rstd");

      // Backward from the CPU's saved statistics; dgamma / dbeta start non-zero (accumulated into).
      Tensor dx = Tensor::zeros(Shape{dm.rows, dm.cols});
      Tensor dgamma = Tensor::ones(Shape{dm.cols}), dbeta = Tensor::ones(Shape{dm.cols});
      go::kernels::layer_norm_backward(x.f32(), affine ? gamma.f32() : nullptr, mean.f32(), rstd.f32(), dy.f32(),
                                       dx.f32(), dgamma.f32(), dbeta.f32(), dm.rows, dm.cols);
      const DeviceTensor d_mean_cpu = to_device(mean), d_rstd_cpu = to_device(rstd);
      DeviceTensor d_dx = go::cuda::device_empty(Shape{dm.rows, dm.cols});
      DeviceTensor d_dgamma = to_device(Tensor::ones(Shape{dm.cols})), d_dbeta = to_device(Tensor::ones(Shape{dm.cols}));
      go::cuda::layer_norm_backward(d_x.data<float>(), affine ? d_g.data<float>() : nullptr, d_mean_cpu.data<float>(),
                                    d_rstd_cpu.data<float>(), d_dy.data<float>(), d_dx.data<float>(),
                                    d_dgamma.data<float>(), d_dbeta.data<float>(), dm.rows, dm.cols);
      go::cuda::synchronize();
      require_close(to_host(d_dx), dx, 1e-4, 1e-5, what + " dx");
      require_close(to_host(d_dgamma), dgamma, 1e-4, 1e-4, what + " dgamma");
      require_close(to_host(d_dbeta), dbeta, 1e-4, 1e-4, what + " dbeta");
    }
  }
}

TEST_CASE("cuda: softmax and log-softmax forward and backward match the CPU", "[cuda]") {
  GO_CUDA_OR_SKIP();
  Rng rng(13);
  for (const RowsCols dm : {RowsCols{0, 4}, RowsCols{1, 1}, RowsCols{7, 3}, RowsCols{50, 257}, RowsCols{8, 5000}}) {
    for (const bool log : {false, true}) {
      const std::string what = std::string(log ? "log-softmax " : "softmax ") + std::to_string(dm.rows) + "x" +
                               std::to_string(dm.cols);
      Tensor x = random_tensor(Shape{dm.rows, dm.cols}, rng, -8.f, 8.f);
      // Masked entries (large negative, as attention masks use) in every other row but one entry.
      for (std::int64_t r = 0; r < dm.rows; r += 2)
        for (std::int64_t c = 1; c < dm.cols; c += 3) x.f32()[r * dm.cols + c] = -1e30f;
      const Tensor dy = random_tensor(Shape{dm.rows, dm.cols}, rng);
      Tensor y = Tensor::zeros(Shape{dm.rows, dm.cols});
      go::kernels::softmax_forward(x.f32(), y.f32(), dm.rows, dm.cols, log);
      const DeviceTensor d_x = to_device(x), d_dy = to_device(dy);
      DeviceTensor d_y = go::cuda::device_empty(Shape{dm.rows, dm.cols});
      go::cuda::softmax_forward(d_x.data<float>(), d_y.data<float>(), dm.rows, dm.cols, log);
      go::cuda::synchronize();
      require_close(to_host(d_y), y, 1e-4, 1e-5, what + " forward");

      Tensor dx = Tensor::zeros(Shape{dm.rows, dm.cols});
      go::kernels::softmax_backward(y.f32(), dy.f32(), dx.f32(), dm.rows, dm.cols, log);
      const DeviceTensor d_ycpu = to_device(y);
      DeviceTensor d_dx = go::cuda::device_empty(Shape{dm.rows, dm.cols});
      go::cuda::softmax_backward(d_ycpu.data<float>(), d_dy.data<float>(), d_dx.data<float>(), dm.rows, dm.cols, log);
      go::cuda::synchronize();
      require_close(to_host(d_dx), dx, 1e-4, 1e-5, what + " backward");
    }
  }
}

TEST_CASE("cuda: segment-recurrent attention forward and backward match the CPU", "[cuda]") {
  GO_CUDA_OR_SKIP();
  Rng rng(21);
  struct Case {
    std::int64_t n;
    std::int32_t heads, head_dim;
    std::int64_t seg, mem;
    float scale;
  };
  // Empty, one row, segments of one row, memory longer than a segment, ragged last segment,
  // head dims between the register widths (5, 24, 33, 100) and the shipped policy's (4 x 16).
  for (const Case c : {Case{0, 2, 8, 4, 4, 0.f}, Case{1, 1, 16, 8, 8, 0.f}, Case{37, 2, 5, 1, 3, 0.f},
                       Case{100, 3, 24, 16, 40, 0.5f}, Case{300, 4, 16, 128, 128, 0.f}, Case{130, 1, 33, 50, 0, 0.f},
                       Case{90, 2, 64, 32, 32, 0.f}, Case{70, 1, 100, 20, 10, 0.f}}) {
    for (const bool causal : {false, true}) {
      const std::string what = "attention n " + std::to_string(c.n) + " heads " + std::to_string(c.heads) + " dim " +
                               std::to_string(c.head_dim) + " seg " + std::to_string(c.seg) + " mem " +
                               std::to_string(c.mem) + (causal ? " causal" : "");
      go::kernels::SegAttention p;
      p.n = c.n;
      p.heads = c.heads;
      p.head_dim = c.head_dim;
      p.seg_len = c.seg;
      p.mem_len = c.mem;
      p.causal = causal;
      p.scale = c.scale;
      const Shape rows{c.n, static_cast<std::int64_t>(c.heads) * c.head_dim}, stats{c.heads, c.n};
      const Tensor q = random_tensor(rows, rng, -2.f, 2.f), k = random_tensor(rows, rng, -2.f, 2.f),
                   v = random_tensor(rows, rng), dout = random_tensor(rows, rng);
      Tensor out = Tensor::zeros(rows), lse = Tensor::zeros(stats);
      go::kernels::seg_attention_forward(p, q.f32(), k.f32(), v.f32(), out.f32(), lse.f32());
      const DeviceTensor d_q = to_device(q), d_k = to_device(k), d_v = to_device(v), d_dout = to_device(dout);
      DeviceTensor d_out = go::cuda::device_empty(rows), d_lse = go::cuda::device_empty(stats);
      go::cuda::seg_attention_forward(p, d_q.data<float>(), d_k.data<float>(), d_v.data<float>(), d_out.data<float>(),
                                      d_lse.data<float>());
      go::cuda::synchronize();
      require_close(to_host(d_out), out, 1e-4, 1e-5, what + " out");
      require_close(to_host(d_lse), lse, 1e-4, 1e-5, what + " lse");

      // Backward from the CPU's out and lse.
      Tensor dq = Tensor::zeros(rows), dk = Tensor::zeros(rows), dv = Tensor::zeros(rows);
      go::kernels::seg_attention_backward(p, q.f32(), k.f32(), v.f32(), out.f32(), lse.f32(), dout.f32(), dq.f32(),
                                          dk.f32(), dv.f32());
      const DeviceTensor d_outc = to_device(out), d_lsec = to_device(lse);
      DeviceTensor d_dq = go::cuda::device_empty(rows), d_dk = go::cuda::device_empty(rows),
                   d_dv = go::cuda::device_empty(rows);
      go::cuda::seg_attention_backward(p, d_q.data<float>(), d_k.data<float>(), d_v.data<float>(), d_outc.data<float>(),
                                       d_lsec.data<float>(), d_dout.data<float>(), d_dq.data<float>(),
                                       d_dk.data<float>(), d_dv.data<float>());
      go::cuda::synchronize();
      require_close(to_host(d_dq), dq, 1e-3, 1e-4, what + " dq");
      require_close(to_host(d_dk), dk, 1e-3, 1e-4, what + " dk");
      require_close(to_host(d_dv), dv, 1e-3, 1e-4, what + " dv");
    }
  }
  go::kernels::SegAttention wide;
  wide.n = 4;
  wide.head_dim = 300;
  CHECK_THROWS_WITH(go::cuda::seg_attention_forward(wide, nullptr, nullptr, nullptr, nullptr, nullptr),
                    Catch::Contains("head_dim = 300 must be <= 256"));
  wide.head_dim = 16;
  wide.seg_len = 0;
  CHECK_THROWS_WITH(go::cuda::seg_attention_forward(wide, nullptr, nullptr, nullptr, nullptr, nullptr),
                    Catch::Contains("seg_len = 0 must be >= 1"));
}

TEST_CASE("cuda: Adam steps match the CPU", "[cuda]") {
  GO_CUDA_OR_SKIP();
  Rng rng(17);
  for (const std::int64_t n : {std::int64_t{0}, std::int64_t{1}, std::int64_t{12345}}) {
    for (const float wd : {0.f, 0.01f}) {
      Tensor p = random_tensor(Shape{n}, rng), m = Tensor::zeros(Shape{n}), v = Tensor::zeros(Shape{n});
      DeviceTensor d_p = to_device(p), d_m = to_device(m), d_v = to_device(v);
      const float b1 = 0.9f, b2 = 0.999f;
      float pb1 = 1.f, pb2 = 1.f;
      for (int step = 1; step <= 5; ++step) {
        pb1 *= b1;
        pb2 *= b2;
        const Tensor g = random_tensor(Shape{n}, rng);
        const DeviceTensor d_g = to_device(g);
        go::kernels::adam_step(p.f32(), g.f32(), m.f32(), v.f32(), n, 1e-3f, b1, b2, 1e-8f, wd, 1.f - pb1, 1.f - pb2);
        go::cuda::adam_step(d_p.data<float>(), d_g.data<float>(), d_m.data<float>(), d_v.data<float>(), n, 1e-3f, b1,
                            b2, 1e-8f, wd, 1.f - pb1, 1.f - pb2);
      }
      go::cuda::synchronize();
      const std::string what = "adam n=" + std::to_string(n) + " wd=" + std::to_string(wd);
      require_close(to_host(d_p), p, 1e-5, 1e-6, what + " param");
      require_close(to_host(d_m), m, 1e-5, 1e-6, what + " m");
      require_close(to_host(d_v), v, 1e-5, 1e-6, what + " v");
    }
  }
}
