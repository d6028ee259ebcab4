#pragma once
// The ONNX importer's state and per-node steps (go/graph/onnx.hpp documents what it imports).
// Private to libgo: import.cpp runs it, shapes.cpp infers missing shapes, flops.cpp counts FLOPs.
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "go/core/error.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/onnx.hpp"
#include "go/graph/onnx_fold.hpp"
#include "go/graph/onnx_proto.hpp"
#include "go/graph/op_kind.hpp"

namespace go::detail::onnx_import {

namespace pb = ::ONNX_NAMESPACE;

class Importer {
 public:
  Importer(const pb::ModelProto& model, std::string source, const OnnxOptions& opts)
      : g_(model.graph()), source_(std::move(source)), at_(source_ + ": "), opts_(opts) {}

  OpGraph run();

 private:
  TType type_of(const pb::TypeProto& tp, const std::string& name) const {
    TType t;
    if (!tp.has_tensor_type()) return t;
    const auto& tt = tp.tensor_type();
    t.dtype = elem_type_of(tt.elem_type());
    if (!tt.has_shape()) return t;
    t.known = true;
    for (const auto& d : tt.shape().dim()) {
      if (d.has_dim_value()) {
        GO_CHECK(d.dim_value() >= 0, at_, "tensor '", name, "' has negative dimension ", d.dim_value());
        t.dims.push_back(d.dim_value());
      } else {
        if (t.dims.size() < 64) t.symbolic_dims |= std::uint64_t{1} << t.dims.size();
        t.dims.push_back(opts_.symbolic_dim);
        t.symbolic = true;
      }
    }
    return t;
  }
  TType type_of(const pb::TensorProto& tp) const {
    TType t;
    t.dtype = elem_type_of(tp.data_type());
    t.known = true;
    for (auto d : tp.dims()) {
      GO_CHECK(d >= 0, at_, "initializer '", tp.name(), "' has negative dimension ", d);
      t.dims.push_back(d);
    }
    return t;
  }
  std::string node_label(int i) const {
    const auto& n = g_.node(i);
    return "node '" + node_name(i) + "' (" + n.op_type() + ")";
  }
  std::string node_name(int i) const {
    const auto& n = g_.node(i);
    return n.name().empty() ? n.op_type() + "_" + std::to_string(i) : n.name();
  }
  const std::vector<std::int64_t>* const_of(const std::string& name) const {
    auto it = consts_.find(name);
    return it == consts_.end() ? nullptr : &it->second;
  }
  std::vector<TType> infer(const pb::NodeProto& n, const std::vector<const TType*>& in) const;
  // After node i's outputs were inferred: an output of unknown shape from known inputs is recorded
  // in `origin` (Range's length is a value, not a shape: later ops have recorded shapes, or none
  // need one); unknown inputs that leave the outputs unknown too are an error naming where the
  // shapes stopped, since every op after it would count 0 FLOPs and 0 bytes.
  void check_shapes_flow(int i, const std::vector<const TType*>& in, std::unordered_map<std::string, int>& origin) const;
  // Node i's operands against each other (a convolution's channels, a product's inner size,
  // broadcasting; sizes that stand in for symbolic ones are not compared) and, where no input is
  // symbolic, its recorded output shapes against the ones its inputs give (`inferred`):
  // contradicting shapes are an error, since the FLOPs and bytes would follow whichever came last.
  void check_operands(int i, const std::vector<const TType*>& in, const std::vector<TType>& inferred,
                      bool symbolic_inputs) const;
  void fold_constants(const pb::NodeProto& n, const std::vector<const TType*>& in);
  double flops(const pb::NodeProto& n, OpKind kind, const std::vector<const TType*>& in,
               const std::vector<TType>& out) const;
  bool is_weight_slot(const pb::NodeProto& n, int slot) const;

  const pb::GraphProto& g_;
  std::string source_;
  std::string at_;
  OnnxOptions opts_;
  std::unordered_map<std::string, TType> types_;
  std::unordered_map<std::string, std::vector<std::int64_t>> consts_;  // integer values of folded_, for infer
  std::unordered_map<std::string, Folded> folded_;                      // tensors known at import time
};

}  // namespace go::detail::onnx_import
