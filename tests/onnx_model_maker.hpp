#pragma once
// Builds ONNX models with the protobuf API, without value_info, for the importer's tests
// (tests/test_graph_onnx.cpp, tests/test_onnx_fold.cpp).
#include <catch2/catch.hpp>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "go/graph/graph.hpp"
#include "go/graph/onnx.hpp"
#include "go/graph/onnx_proto.hpp"

namespace onnx_test {

namespace pb = ::ONNX_NAMESPACE;

struct ModelMaker {
  pb::ModelProto model;
  pb::GraphProto* g;
  ModelMaker() {
    model.set_ir_version(8);
    model.add_opset_import()->set_version(17);
    g = model.mutable_graph();
    g->set_name("synthetic");
  }
  ModelMaker(const ModelMaker&) = delete;  // g points into model
  ModelMaker& operator=(const ModelMaker&) = delete;
  // A graph input of that shape (a negative dim is kept, for the importer's error).
  void input(const std::string& name, std::initializer_list<std::int64_t> dims, int elem = 1) {
    typed(g->add_input(), name, dims, elem, false);
  }
  // A recorded shape of an intermediate tensor (as onnx.shape_inference writes); a dim of -1 is
  // symbolic (dim_param).
  void value_info(const std::string& name, std::initializer_list<std::int64_t> dims, int elem = 1) {
    typed(g->add_value_info(), name, dims, elem, true);
  }
  static void typed(pb::ValueInfoProto* vi, const std::string& name, std::initializer_list<std::int64_t> dims, int elem,
                    bool negative_symbolic) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    auto* sh = tt->mutable_shape();
    for (auto d : dims) {
      if (d < 0 && negative_symbolic) sh->add_dim()->set_dim_param("N");
      else sh->add_dim()->set_dim_value(d);
    }
  }
  void initializer(const std::string& name, std::initializer_list<std::int64_t> dims) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(1);
    for (auto d : dims) t->add_dims(d);
  }
  // The tensor of a new Constant node named out + "_const" with element type elem.
  pb::TensorProto* constant(const std::string& out, int elem) {
    auto* n = g->add_node();
    n->set_op_type("Constant");
    n->set_name(out + "_const");
    n->add_output(out);
    auto* a = n->add_attribute();
    a->set_name("value");
    a->set_type(pb::AttributeProto_AttributeType_TENSOR);
    auto* t = a->mutable_t();
    t->set_data_type(elem);
    return t;
  }
  void int_constant(const std::string& out, std::vector<std::int64_t> values, bool raw) {
    auto* t = constant(out, 7);
    t->add_dims(static_cast<std::int64_t>(values.size()));
    if (raw) t->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * 8));
    else
      for (auto v : values) t->add_int64_data(v);
  }
  // A 0-d constant, INT64 (elem 7) or FLOAT (elem 1), as exporters emit for shape arithmetic.
  void scalar_constant(const std::string& out, double value, int elem = 7) {
    auto* t = constant(out, elem);
    if (elem == 1) t->add_float_data(static_cast<float>(value));
    else t->add_int64_data(static_cast<std::int64_t>(value));
  }
  pb::NodeProto* node(const std::string& type, const std::string& name, std::initializer_list<std::string> ins,
                      std::initializer_list<std::string> outs) {
    auto* n = g->add_node();
    n->set_op_type(type);
    n->set_name(name);
    for (const auto& i : ins) n->add_input(i);
    for (const auto& o : outs) n->add_output(o);
    return n;
  }
  static void ints(pb::NodeProto* n, const std::string& name, std::initializer_list<std::int64_t> v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(pb::AttributeProto_AttributeType_INTS);
    for (auto x : v) a->add_ints(x);
  }
  static void i(pb::NodeProto* n, const std::string& name, std::int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(pb::AttributeProto_AttributeType_INT);
    a->set_i(v);
  }
  static void s(pb::NodeProto* n, const std::string& name, const std::string& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(pb::AttributeProto_AttributeType_STRING);
    a->set_s(v);
  }
  go::OpGraph load(const std::string& name = "synthetic.onnx") {
    return go::parse_onnx(model.SerializeAsString(), name);
  }
};

inline std::vector<std::int64_t> out_shape(const go::OpGraph& g, const std::string& op, int k = 0) {
  auto id = g.find(op);
  REQUIRE(id.has_value());
  REQUIRE(k < g.op(*id).num_outputs);
  REQUIRE(g.tensor(g.op(*id).first_output + k).rank >= 0);
  auto s = g.shape(g.op(*id).first_output + k);
  return {s.begin(), s.end()};
}
inline double flops_of(const go::OpGraph& g, const std::string& op) { return g.op(*g.find(op)).flops; }
using V = std::vector<std::int64_t>;

}  // namespace onnx_test
