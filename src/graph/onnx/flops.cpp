// FLOP counting of the ONNX importer (the formulas are listed in go/graph/onnx.hpp).
#include <algorithm>
#include <string>
#include <vector>

#include "importer.hpp"

namespace go::detail::onnx_import {

double Importer::flops(const pb::NodeProto& n, OpKind kind, const std::vector<const TType*>& in,
                              const std::vector<TType>& out) const {
  const std::string& t = n.op_type();
  const double y = out.empty() ? 0.0 : out[0].numel();
  const double x = (!in.empty() && in[0]) ? in[0]->numel() : 0.0;
  auto has_input = [&](int i) { return n.input_size() > i && !n.input(i).empty(); };
  switch (kind) {
    case OpKind::conv: {
      if (in.size() < 2 || !in[1] || !in[1]->known || in[1]->dims.size() < 2) return 0;
      double per = 1;  // prod(W.dims[1:])
      for (std::size_t i = 1; i < in[1]->dims.size(); ++i) per *= static_cast<double>(in[1]->dims[i]);
      if (t == "ConvTranspose") return 2.0 * x * per + (has_input(2) ? y : 0.0);
      return 2.0 * y * per + (has_input(2) ? y : 0.0);
    }
    case OpKind::matmul: {
      if (in.size() < 2 || !in[0] || !in[0]->known || in[0]->dims.empty()) return 0;
      double k;
      if (t == "Gemm") {
        if (in[0]->dims.size() != 2) return 0;
        k = static_cast<double>(attr_int(n, "transA", 0) ? in[0]->dims[0] : in[0]->dims[1]);
        return 2.0 * y * k + (has_input(2) ? y : 0.0);
      }
      k = static_cast<double>(in[0]->dims.back());
      return 2.0 * y * k;
    }
    case OpKind::batch_norm: return 2.0 * y;
    case OpKind::layer_norm: return 8.0 * y;
    case OpKind::relu: return y;
    case OpKind::sigmoid:
    case OpKind::tanh: return 4.0 * y;
    case OpKind::gelu: return 8.0 * y;
    case OpKind::elementwise:
      if (t == "Erf") return 4.0 * y;
      if (t == "Expand" || t == "Tile" || t == "Range" || t == "Cast") return 0.0;
      return y * std::max(1, static_cast<int>(in.size()) - (t == "Where" ? 2 : 1));
    case OpKind::add:
    case OpKind::sub:
    case OpKind::mul:
    case OpKind::div: return y * std::max(1, static_cast<int>(in.size()) - 1);
    case OpKind::max_pool:
    case OpKind::avg_pool: {
      double k = 1;
      for (auto d : attr_ints(n, "kernel_shape")) k *= static_cast<double>(d);
      return y * k;
    }
    case OpKind::global_pool:
    case OpKind::reduce: return x;
    case OpKind::softmax: return 5.0 * y;
    case OpKind::dropout: return y;
    case OpKind::rnn: {
      if (in.size() < 2 || !in[0] || !in[0]->known || in[0]->dims.size() != 3) return 0;
      const double h = static_cast<double>(attr_int(n, "hidden_size", 0));
      const bool batch_first = attr_int(n, "layout", 0) != 0;
      const double seq = static_cast<double>(in[0]->dims[batch_first ? 1 : 0]);
      const double batch = static_cast<double>(in[0]->dims[batch_first ? 0 : 1]);
      const double inp = static_cast<double>(in[0]->dims[2]);
      const double dirs = attr_string(n, "direction") == "bidirectional" ? 2.0 : 1.0;
      double per;
      if (t == "LSTM") per = 8.0 * h * (inp + h) + 20.0 * h;
      else if (t == "GRU") per = 6.0 * h * (inp + h) + 16.0 * h;
      else per = 2.0 * h * (inp + h) + 4.0 * h;
      return seq * batch * dirs * per;
    }
    default: return 0.0;
  }
}

}  // namespace go::detail::onnx_import
