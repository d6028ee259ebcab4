#pragma once
// The workload zoo: Inception-v3, inception_v3 (see go/graph/zoo.hpp for its sizes and defaults).
#include <cstdint>
#include <string>

#include "go/graph/graph.hpp"
#include "go/graph/op_kind.hpp"
#include "go/graph/zoo/common.hpp"

namespace go::detail::zoo {

// torchvision's Inception3. Names: <module>/b<branch>/<conv>/{conv,bn,relu}, <module>/concat,
// modules stem, mixed_5b..mixed_7c, aux, head.
inline OpGraph inception_v3(const Sizes& z) {
  const std::int64_t B = z.batch, S = z.image, V = z.vocab;
  Net n(z.name, B, z.max_ops);
  auto basic = [&](const std::string& p, const T& in, std::int64_t c, std::int64_t kh, std::int64_t kw,
                   std::int64_t s = 1, std::int64_t ph = 0, std::int64_t pw = 0) {
    T y = n.conv(p + "/conv", in, c, kh, kw, s, s, ph, pw);
    return n.relu(p + "/relu", n.batch_norm(p + "/bn", y));
  };
  T x = n.input("stem/images", {B, 3, S, S});
  T labels = n.input("head/labels", {B});
  x = basic("stem/conv1a_3x3", x, 32, 3, 3, 2);
  x = basic("stem/conv2a_3x3", x, 32, 3, 3);
  x = basic("stem/conv2b_3x3", x, 64, 3, 3, 1, 1, 1);
  x = n.pool("stem/pool1", OpKind::max_pool, x, 3, 2, 0);
  x = basic("stem/conv3b_1x1", x, 80, 1, 1);
  x = basic("stem/conv4a_3x3", x, 192, 3, 3);
  x = n.pool("stem/pool2", OpKind::max_pool, x, 3, 2, 0);
  auto module_a = [&](const std::string& m, const T& in, std::int64_t pool_features) {
    T b0 = basic(m + "/b0/1x1", in, 64, 1, 1);
    T b1 = basic(m + "/b1/5x5_reduce", in, 48, 1, 1);
    b1 = basic(m + "/b1/5x5", b1, 64, 5, 5, 1, 2, 2);
    T b2 = basic(m + "/b2/3x3_reduce", in, 64, 1, 1);
    b2 = basic(m + "/b2/3x3a", b2, 96, 3, 3, 1, 1, 1);
    b2 = basic(m + "/b2/3x3b", b2, 96, 3, 3, 1, 1, 1);
    T b3 = n.pool(m + "/b3/pool", OpKind::avg_pool, in, 3, 1, 1);
    b3 = basic(m + "/b3/1x1", b3, pool_features, 1, 1);
    return n.concat(m + "/concat", {b0, b1, b2, b3}, 1);
  };
  auto module_b = [&](const std::string& m, const T& in) {  // reduction-A
    T b0 = basic(m + "/b0/3x3", in, 384, 3, 3, 2);
    T b1 = basic(m + "/b1/3x3_reduce", in, 64, 1, 1);
    b1 = basic(m + "/b1/3x3a", b1, 96, 3, 3, 1, 1, 1);
    b1 = basic(m + "/b1/3x3b", b1, 96, 3, 3, 2);
    T b2 = n.pool(m + "/b2/pool", OpKind::max_pool, in, 3, 2, 0);
    return n.concat(m + "/concat", {b0, b1, b2}, 1);
  };
  auto module_c = [&](const std::string& m, const T& in, std::int64_t c7) {  // factorized 7x7
    T b0 = basic(m + "/b0/1x1", in, 192, 1, 1);
    T b1 = basic(m + "/b1/7x7_reduce", in, c7, 1, 1);
    b1 = basic(m + "/b1/1x7", b1, c7, 1, 7, 1, 0, 3);
    b1 = basic(m + "/b1/7x1", b1, 192, 7, 1, 1, 3, 0);
    T b2 = basic(m + "/b2/7x7dbl_reduce", in, c7, 1, 1);
    b2 = basic(m + "/b2/7x1a", b2, c7, 7, 1, 1, 3, 0);
    b2 = basic(m + "/b2/1x7a", b2, c7, 1, 7, 1, 0, 3);
    b2 = basic(m + "/b2/7x1b", b2, c7, 7, 1, 1, 3, 0);
    b2 = basic(m + "/b2/1x7b", b2, 192, 1, 7, 1, 0, 3);
    T b3 = n.pool(m + "/b3/pool", OpKind::avg_pool, in, 3, 1, 1);
    b3 = basic(m + "/b3/1x1", b3, 192, 1, 1);
    return n.concat(m + "/concat", {b0, b1, b2, b3}, 1);
  };
  auto module_d = [&](const std::string& m, const T& in) {  // reduction-B
    T b0 = basic(m + "/b0/3x3_reduce", in, 192, 1, 1);
    b0 = basic(m + "/b0/3x3", b0, 320, 3, 3, 2);
    T b1 = basic(m + "/b1/7x7x3_reduce", in, 192, 1, 1);
    b1 = basic(m + "/b1/1x7", b1, 192, 1, 7, 1, 0, 3);
    b1 = basic(m + "/b1/7x1", b1, 192, 7, 1, 1, 3, 0);
    b1 = basic(m + "/b1/3x3", b1, 192, 3, 3, 2);
    T b2 = n.pool(m + "/b2/pool", OpKind::max_pool, in, 3, 2, 0);
    return n.concat(m + "/concat", {b0, b1, b2}, 1);
  };
  auto module_e = [&](const std::string& m, const T& in) {  // expanded filter bank
    T b0 = basic(m + "/b0/1x1", in, 320, 1, 1);
    T b1 = basic(m + "/b1/3x3_reduce", in, 384, 1, 1);
    T b1a = basic(m + "/b1/1x3", b1, 384, 1, 3, 1, 0, 1);
    T b1b = basic(m + "/b1/3x1", b1, 384, 3, 1, 1, 1, 0);
    b1 = n.concat(m + "/b1/concat", {b1a, b1b}, 1);
    T b2 = basic(m + "/b2/3x3dbl_reduce", in, 448, 1, 1);
    b2 = basic(m + "/b2/3x3", b2, 384, 3, 3, 1, 1, 1);
    T b2a = basic(m + "/b2/1x3", b2, 384, 1, 3, 1, 0, 1);
    T b2b = basic(m + "/b2/3x1", b2, 384, 3, 1, 1, 1, 0);
    b2 = n.concat(m + "/b2/concat", {b2a, b2b}, 1);
    T b3 = n.pool(m + "/b3/pool", OpKind::avg_pool, in, 3, 1, 1);
    b3 = basic(m + "/b3/1x1", b3, 192, 1, 1);
    return n.concat(m + "/concat", {b0, b1, b2, b3}, 1);
  };
  x = module_a("mixed_5b", x, 32);
  x = module_a("mixed_5c", x, 64);
  x = module_a("mixed_5d", x, 64);
  x = module_b("mixed_6a", x);
  x = module_c("mixed_6b", x, 128);
  x = module_c("mixed_6c", x, 160);
  x = module_c("mixed_6d", x, 160);
  x = module_c("mixed_6e", x, 192);
  // auxiliary classifier (training only)
  T a = n.pool("aux/pool", OpKind::avg_pool, x, 5, 3, 0);
  a = basic("aux/conv0", a, 128, 1, 1);
  a = basic("aux/conv1", a, 768, a.shape[2], a.shape[3]);
  a = n.fc("aux/fc", n.global_pool("aux/global_pool", a), V);
  T aux_loss = n.xent("aux/xent", a, labels);
  x = module_d("mixed_7a", x);
  x = module_e("mixed_7b", x);
  x = module_e("mixed_7c", x);
  T y = n.dropout("head/dropout", n.global_pool("head/global_pool", x));
  y = n.fc("head/fc", y, V);
  n.sum("head/loss", {n.xent("head/xent", y, labels), aux_loss});
  return n.build();
}

}  // namespace go::detail::zoo
