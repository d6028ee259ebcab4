#pragma once
// Protobuf-level helpers of the ONNX importer (go/graph/onnx.hpp, src/graph/onnx/): tensor types as the
// importer sees them, node attributes, the integer contents of small tensors, broadcasting.
#ifndef ONNX_ML
#define ONNX_ML 1
#endif
#ifndef ONNX_NAMESPACE
#define ONNX_NAMESPACE onnx
#endif

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <onnx/onnx_pb.h>

#include "go/graph/graph.hpp"

namespace go::detail::onnx_import {

namespace pb = ::ONNX_NAMESPACE;

struct TType {
  ElemType dtype = ElemType::f32;
  bool known = false;
  // Some dimension, of this tensor or of one it was computed from, was symbolic (dim_param): its
  // sizes (or values) may stand in for unknown ones, so it is not checked against recorded shapes.
  bool symbolic = false;
  // The dims that stand in for unknown sizes (bit i: dim i): a recorded type's dim_params, every
  // dim of one inferred from a symbolic input. The others are checked against other operands.
  std::uint64_t symbolic_dims = 0;
  bool concrete(std::size_t i) const { return i < 64 ? ((symbolic_dims >> i) & 1u) == 0 : !symbolic; }
  std::vector<std::int64_t> dims;

  double numel() const {
    if (!known) return 0;
    double n = 1;
    for (auto d : dims) n *= static_cast<double>(d);
    return n;
  }
  std::int64_t dim(int i) const {  // negative i counts from the back; -1 when absent
    const int r = static_cast<int>(dims.size());
    if (i < 0) i += r;
    return (known && i >= 0 && i < r) ? dims[static_cast<std::size_t>(i)] : -1;
  }
  int rank() const { return known ? static_cast<int>(dims.size()) : -1; }
};

inline ElemType elem_type_of(int t) {
  switch (t) {
    case pb::TensorProto_DataType_FLOAT: return ElemType::f32;
    case pb::TensorProto_DataType_FLOAT16: return ElemType::f16;
    case pb::TensorProto_DataType_BFLOAT16: return ElemType::bf16;
    case pb::TensorProto_DataType_DOUBLE: return ElemType::f64;
    case pb::TensorProto_DataType_INT8: return ElemType::i8;
    case pb::TensorProto_DataType_UINT8: return ElemType::u8;
    case pb::TensorProto_DataType_INT16:
    case pb::TensorProto_DataType_UINT16: return ElemType::i16;
    case pb::TensorProto_DataType_INT32:
    case pb::TensorProto_DataType_UINT32: return ElemType::i32;
    case pb::TensorProto_DataType_INT64:
    case pb::TensorProto_DataType_UINT64: return ElemType::i64;
    case pb::TensorProto_DataType_BOOL: return ElemType::boolean;
    default: return ElemType::other;
  }
}

inline const pb::AttributeProto* attr(const pb::NodeProto& n, std::string_view name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}
inline std::int64_t attr_int(const pb::NodeProto& n, std::string_view name, std::int64_t def) {
  const auto* a = attr(n, name);
  return a && a->has_i() ? a->i() : def;
}
inline std::vector<std::int64_t> attr_ints(const pb::NodeProto& n, std::string_view name) {
  const auto* a = attr(n, name);
  if (!a) return {};
  return std::vector<std::int64_t>(a->ints().begin(), a->ints().end());
}
inline std::string attr_string(const pb::NodeProto& n, std::string_view name) {
  const auto* a = attr(n, name);
  return a && a->has_s() ? a->s() : std::string();
}

// Integer contents of a small tensor (shape constants, axes, pads), when stored in a form we read.
inline std::optional<std::vector<std::int64_t>> tensor_ints(const pb::TensorProto& t) {
  constexpr std::size_t kMaxValues = 1 << 16;
  std::vector<std::int64_t> v;
  if (t.data_type() == pb::TensorProto_DataType_INT64) {
    if (t.int64_data_size() > 0) {
      if (static_cast<std::size_t>(t.int64_data_size()) > kMaxValues) return std::nullopt;
      v.assign(t.int64_data().begin(), t.int64_data().end());
    } else if (t.has_raw_data()) {
      const std::string& raw = t.raw_data();
      if (raw.size() % 8 != 0 || raw.size() / 8 > kMaxValues) return std::nullopt;
      v.resize(raw.size() / 8);
      if (!raw.empty()) std::memcpy(v.data(), raw.data(), raw.size());  // an empty vector's data() may be null
    }
    return v;
  }
  if (t.data_type() == pb::TensorProto_DataType_INT32) {
    if (t.int32_data_size() > 0) {
      if (static_cast<std::size_t>(t.int32_data_size()) > kMaxValues) return std::nullopt;
      v.assign(t.int32_data().begin(), t.int32_data().end());
    } else if (t.has_raw_data()) {
      const std::string& raw = t.raw_data();
      if (raw.size() % 4 != 0 || raw.size() / 4 > kMaxValues) return std::nullopt;
      std::vector<std::int32_t> w(raw.size() / 4);
      if (!raw.empty()) std::memcpy(w.data(), raw.data(), raw.size());
      v.assign(w.begin(), w.end());
    }
    return v;
  }
  return std::nullopt;
}

inline bool all_known(const std::vector<const TType*>& in, std::size_t count) {
  if (in.size() < count) return false;
  for (std::size_t i = 0; i < count; ++i)
    if (!in[i] || !in[i]->known) return false;
  return true;
}

inline std::optional<std::vector<std::int64_t>> broadcast(const std::vector<const TType*>& in) {
  std::vector<std::int64_t> out;
  for (const TType* t : in) {
    if (!t) continue;
    if (!t->known) return std::nullopt;
    if (t->dims.size() > out.size()) out.insert(out.begin(), t->dims.size() - out.size(), 1);
    for (std::size_t k = 0; k < t->dims.size(); ++k) {
      auto& o = out[out.size() - t->dims.size() + k];
      const auto d = t->dims[k];
      if (o == 1) o = d;
      else if (d != 1 && d != o) return std::nullopt;
    }
  }
  return out;
}

}  // namespace go::detail::onnx_import
