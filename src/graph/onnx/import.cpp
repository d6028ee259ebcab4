// The ONNX importer's driver: reads the protobuf message, classifies graph inputs into data and
// parameters, orders nodes for inference, then builds the OpGraph (go/graph/onnx.hpp).
#include <climits>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "go/graph/io.hpp"
#include "importer.hpp"

namespace go {

namespace detail::onnx_import {

bool Importer::is_weight_slot(const pb::NodeProto& n, int slot) const {
  const std::string& t = n.op_type();
  if (t == "Conv" || t == "ConvTranspose" || t == "Gemm") return slot == 1 || slot == 2;
  if (t == "MatMul" || t == "PRelu" || t == "Add" || t == "Sub" || t == "Mul" || t == "Div") return slot == 1;
  if (t == "BatchNormalization") return slot >= 1 && slot <= 4;
  if (t == "LayerNormalization" || t == "InstanceNormalization" || t == "GroupNormalization") return slot >= 1;
  if (t == "LSTM" || t == "GRU" || t == "RNN") return slot >= 1 && slot != 4;
  if (t == "Gather") return slot == 0;
  return false;
}

void Importer::fold_constants(const pb::NodeProto& n, const std::vector<const TType*>& in) {
  if (n.output_size() != 1 || n.output(0).empty()) return;
  std::vector<const Folded*> vals;
  for (const auto& name : n.input()) {
    auto it = name.empty() ? folded_.end() : folded_.find(name);
    vals.push_back(it == folded_.end() ? nullptr : &it->second);
  }
  auto ot = types_.find(n.output(0));
  auto v = fold_node(n, vals, in, ot == types_.end() ? nullptr : &ot->second);
  if (!v) return;
  if (ot == types_.end() || !ot->second.known) {  // e.g. Range, whose shape is its value
    TType& ty = types_[n.output(0)];
    ty.known = true;
    ty.dims = v->dims;
    if (ot == types_.end()) ty.dtype = v->real ? ElemType::f32 : ElemType::i64;
  }
  if (!v->real) consts_[n.output(0)] = v->i;
  folded_[n.output(0)] = std::move(*v);
}

OpGraph Importer::run() {
  const int n_nodes = g_.node_size();
  GO_CHECK(n_nodes > 0 || g_.input_size() > 0, at_, "ONNX model has an empty graph (no nodes)");
  // ---- types of named tensors ----
  std::unordered_set<std::string> initializers;
  for (const auto& t : g_.initializer()) {
    types_[t.name()] = type_of(t);
    initializers.insert(t.name());
    if (auto v = fold_tensor(t)) {
      if (!v->real) consts_[t.name()] = v->i;
      folded_[t.name()] = std::move(*v);
    }
  }
  for (const auto& vi : g_.input()) types_[vi.name()] = type_of(vi.type(), vi.name());
  for (const auto& vi : g_.value_info()) types_[vi.name()] = type_of(vi.type(), vi.name());
  for (const auto& vi : g_.output()) types_[vi.name()] = type_of(vi.type(), vi.name());

  // ---- producers and consumers by name ----
  std::unordered_map<std::string, std::pair<int, int>> producer;  // tensor -> (node, output)
  for (int i = 0; i < n_nodes; ++i) {
    const auto& nd = g_.node(i);
    for (int k = 0; k < nd.output_size(); ++k) {
      if (nd.output(k).empty()) continue;
      auto [it, fresh] = producer.emplace(nd.output(k), std::make_pair(i, k));
      GO_CHECK(fresh, at_, "tensor '", nd.output(k), "' is produced twice: by ", node_label(it->second.first), " and ",
               node_label(i));
      GO_CHECK(!initializers.count(nd.output(k)), at_, node_label(i), " overwrites initializer '", nd.output(k), "'");
    }
  }
  std::unordered_map<std::string, std::vector<std::pair<int, int>>> consumers;  // tensor -> (node, slot)
  for (int i = 0; i < n_nodes; ++i) {
    const auto& nd = g_.node(i);
    for (int k = 0; k < nd.input_size(); ++k)
      if (!nd.input(k).empty()) consumers[nd.input(k)].emplace_back(i, k);
  }

  // ---- classify graph inputs: data or parameter ----
  std::unordered_set<std::string> graph_inputs;
  std::vector<std::string> data_inputs;
  std::unordered_set<std::string> param_like(initializers.begin(), initializers.end());
  auto has_data_use = [&](const std::string& root) {
    std::vector<std::string> stack{root};
    std::unordered_set<std::string> seen{root};
    while (!stack.empty()) {
      std::string name = std::move(stack.back());
      stack.pop_back();
      auto it = consumers.find(name);
      if (it == consumers.end()) continue;
      for (auto [ni, slot] : it->second) {
        const auto& nd = g_.node(ni);
        const std::string& t = nd.op_type();
        if (t == "Identity" || t == "Transpose" || t == "Cast" || t == "Reshape" || t == "Unsqueeze" ||
            t == "Squeeze") {
          if (slot == 0 && nd.output_size() > 0 && seen.insert(nd.output(0)).second) stack.push_back(nd.output(0));
          continue;
        }
        // commutative ops (Add(bias, x), Mul(scale, x)) say nothing about which operand is data
        if (t == "Add" || t == "Mul" || t == "Sum" || t == "Max" || t == "Min" || t == "Mean") continue;
        if (!is_weight_slot(nd, slot)) return true;
      }
    }
    return false;
  };
  for (int i = 0; i < g_.input_size(); ++i) {
    const std::string& name = g_.input(i).name();
    graph_inputs.insert(name);
    if (initializers.count(name)) continue;
    GO_CHECK(!producer.count(name), at_, "graph input '", name, "' is also produced by ",
             node_label(producer[name].first));
    if (data_inputs.empty() || has_data_use(name)) data_inputs.push_back(name);
    else param_like.insert(name);
  }

  // ---- node order for inference: Kahn over tensor dependencies (cyclic nodes last) ----
  std::vector<int> order;
  order.reserve(static_cast<std::size_t>(n_nodes));
  {
    std::vector<int> pending(static_cast<std::size_t>(n_nodes), 0);
    std::vector<std::vector<int>> next(static_cast<std::size_t>(n_nodes));
    for (int i = 0; i < n_nodes; ++i) {
      const auto& nd = g_.node(i);
      for (int k = 0; k < nd.input_size(); ++k) {
        auto it = producer.find(nd.input(k));
        if (it != producer.end()) {
          ++pending[static_cast<std::size_t>(i)];
          next[static_cast<std::size_t>(it->second.first)].push_back(i);
        }
      }
    }
    for (int i = 0; i < n_nodes; ++i)
      if (pending[static_cast<std::size_t>(i)] == 0) order.push_back(i);
    for (std::size_t h = 0; h < order.size(); ++h)
      for (int w : next[static_cast<std::size_t>(order[h])])
        if (--pending[static_cast<std::size_t>(w)] == 0) order.push_back(w);
    for (int i = 0; i < n_nodes; ++i)
      if (pending[static_cast<std::size_t>(i)] > 0) order.push_back(i);
  }

  // ---- infer missing types, fold small integer constants, fold Identity of parameters ----
  std::vector<bool> skip(static_cast<std::size_t>(n_nodes), false);
  const TType unknown;
  auto input_types = [&](const pb::NodeProto& nd) {
    std::vector<const TType*> in;
    in.reserve(static_cast<std::size_t>(nd.input_size()));
    for (const auto& name : nd.input()) {
      if (name.empty()) {
        in.push_back(nullptr);
        continue;
      }
      auto it = types_.find(name);
      in.push_back(it == types_.end() ? &unknown : &it->second);
    }
    return in;
  };
  std::vector<std::vector<TType>> out_types(static_cast<std::size_t>(n_nodes));
  std::unordered_map<std::string, int> shape_origin;  // unknown-shaped tensor -> the node that made it
  for (int i : order) {
    const auto& nd = g_.node(i);
    auto in = input_types(nd);
    bool missing = false, symbolic = false;
    for (const auto& o : nd.output())
      if (!o.empty() && (!types_.count(o) || !types_[o].known)) missing = true;
    for (const TType* t : in) symbolic = symbolic || (t && t->symbolic);
    const auto inferred = infer(nd, in);
    if (missing || symbolic) {
      for (int k = 0; k < nd.output_size(); ++k) {
        const std::string& o = nd.output(k);
        if (o.empty()) continue;
        auto it = types_.find(o);
        if (it == types_.end() || !it->second.known) {
          TType ty = inferred[static_cast<std::size_t>(k)];
          if (it != types_.end() && !ty.known) ty.dtype = it->second.dtype;
          if (symbolic) ty.symbolic_dims = ~std::uint64_t{0};  // sizes computed from a symbolic one
          types_[o] = std::move(ty);
        }
        // a value computed from a symbolic size (Shape, then Reshape) is a guess as well; a
        // recorded output keeps its dims, which are the file's
        types_[o].symbolic = types_[o].symbolic || symbolic;
      }
      in = input_types(nd);  // rehash may have moved entries
      if (missing) check_shapes_flow(i, in, shape_origin);
    }
    check_operands(i, in, inferred, symbolic);
    fold_constants(nd, in);
    if (nd.op_type() == "Identity" && nd.input_size() == 1 && nd.output_size() == 1 && param_like.count(nd.input(0))) {
      param_like.insert(nd.output(0));
      skip[static_cast<std::size_t>(i)] = true;
    }
  }

  // ---- ops ----
  GraphInfo info;
  info.source = source_;
  info.format = "onnx";
  info.name = g_.name();
  GraphBuilder b(info);
  b.reserve(data_inputs.size() + static_cast<std::size_t>(n_nodes));
  std::unordered_map<std::string, std::pair<OpId, std::int32_t>> ref;  // tensor -> (op, output)
  auto tensor_spec = [&](const std::string& name) {
    TensorSpec ts;
    auto it = types_.find(name);
    if (it == types_.end() || !it->second.known) {
      ts.shape_known = false;
      if (it != types_.end()) ts.dtype = it->second.dtype;
      return ts;
    }
    ts.dtype = it->second.dtype;
    ts.shape = it->second.dims;
    return ts;
  };
  for (const auto& name : data_inputs) {
    OpSpec s;
    s.name = name;
    s.kind = OpKind::input;
    s.outputs.push_back(tensor_spec(name));
    ref[name] = {b.add_op(std::move(s)), 0};
  }
  if (!data_inputs.empty()) {
    auto it = types_.find(data_inputs.front());
    if (it != types_.end() && it->second.known && !it->second.dims.empty()) info.batch = it->second.dims[0];
  }
  // node index -> op id (skipped nodes get -1); ops are added in file order
  std::vector<OpId> op_of(static_cast<std::size_t>(n_nodes), -1);
  for (int i = 0; i < n_nodes; ++i) {
    if (skip[static_cast<std::size_t>(i)]) continue;
    const auto& nd = g_.node(i);
    OpSpec s;
    s.name = node_name(i);
    s.kind = onnx_op_kind(nd.op_type());
    for (int k = 0; k < nd.output_size(); ++k) s.outputs.push_back(tensor_spec(nd.output(k)));
    op_of[static_cast<std::size_t>(i)] = static_cast<OpId>(b.size());
    for (int k = 0; k < nd.output_size(); ++k)
      if (!nd.output(k).empty()) ref[nd.output(k)] = {static_cast<OpId>(b.size()), k};
    b.add_op(std::move(s));
  }
  // inputs, parameters (owned by the first reader in inference order) and FLOPs
  std::unordered_set<std::string> owned;
  for (int i : order) {
    if (skip[static_cast<std::size_t>(i)]) continue;
    const auto& nd = g_.node(i);
    OpSpec& s = b.spec(op_of[static_cast<std::size_t>(i)]);
    for (int k = 0; k < nd.input_size(); ++k) {
      const std::string& name = nd.input(k);
      if (name.empty()) continue;
      if (param_like.count(name)) {
        if (owned.insert(name).second) {
          auto it = types_.find(name);
          std::int64_t bytes = 0;
          if (it != types_.end() && it->second.known) {
            auto by = detail::checked_bytes(it->second.dims, elem_size(it->second.dtype));
            GO_CHECK(by.has_value(), at_, "parameter '", name, "' is too large");
            bytes = *by;
          }
          s.params.push_back(ParamSpec{name, bytes});
        }
        continue;
      }
      auto r = ref.find(name);
      GO_CHECK(r != ref.end(), at_, node_label(i), " reads unknown tensor '", name, "'");
      s.inputs.push_back(TensorRef{r->second.first, r->second.second});
    }
    std::vector<TType> outs;
    for (const auto& o : nd.output()) {
      auto it = types_.find(o);
      outs.push_back(it == types_.end() ? TType{} : it->second);
    }
    // folded nodes compute shapes at import time, not work at run time (like Shape and Constant)
    const bool folded = nd.output_size() == 1 && folded_.count(nd.output(0));
    s.flops = folded ? 0.0 : flops(nd, s.kind, input_types(nd), outs);
  }
  b.info().batch = info.batch;
  return b.build();
}


}  // namespace detail::onnx_import

OpGraph parse_onnx(std::string_view bytes, const std::string& source, const OnnxOptions& opts) {
  namespace pb = ::ONNX_NAMESPACE;
  GO_CHECK(!bytes.empty(), source, ": empty file");
  GO_CHECK(bytes.size() < static_cast<std::size_t>(INT_MAX), source, ": ONNX file larger than 2 GiB");
  pb::ModelProto model;
  google::protobuf::io::ArrayInputStream raw(bytes.data(), static_cast<int>(bytes.size()));
  google::protobuf::io::CodedInputStream in(&raw);
  in.SetTotalBytesLimit(INT_MAX);
  const bool ok = model.ParseFromCodedStream(&in) && in.ConsumedEntireMessage();
  GO_CHECK(ok, source, ": not a valid ONNX model (protobuf parse failed: truncated or corrupt file)");
  GO_CHECK(model.has_graph() && model.ir_version() > 0, source,
           ": not an ONNX model (no graph or IR version in the protobuf message)");
  return detail::onnx_import::Importer(model, source, opts).run();
}

OpGraph load_onnx(const std::string& path, const OnnxOptions& opts) {
  return parse_onnx(detail::read_file(path), path, opts);
}


}  // namespace go
