// The Python module `gopt`: graphs, clusters, plans and the simulator of the go library, with the
// optimizers (place, train) bound in gopt_optimize.cpp. Arrays are numpy arrays; go::Error (and
// malformed JSON) becomes gopt.Error, a RuntimeError carrying go's one-line message. Calls that
// parse files, simulate, place or train release the GIL.
#include "gopt_module.hpp"

#include <dlfcn.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "go/graph/json.hpp"
#include "go/graph/load.hpp"
#include "go/graph/training.hpp"
#include "go/sim/bound.hpp"
#include "go/version.hpp"

#ifndef GOPT_SOURCE_POLICY
#define GOPT_SOURCE_POLICY ""
#endif
#ifndef GOPT_INSTALLED_POLICY
#define GOPT_INSTALLED_POLICY ""
#endif

namespace gopt_py {

namespace {

// ---- helpers ------------------------------------------------------------------------------------

// The values of an array of integers as int64, or an error naming the entry: numpy's cast would
// wrap an unsigned 2**64-1 to -1 and truncate a float 1.5 to 1. Floats are taken where whole
// (byte counts computed in float64).
std::vector<std::int64_t> int64_values(const py::array& a, const char* what, bool floats) {
  const char kind = a.dtype().kind();
  std::vector<std::int64_t> out(static_cast<std::size_t>(a.size()));
  if (kind == 'u') {
    auto v = py::array_t<std::uint64_t, py::array::c_style | py::array::forcecast>::ensure(a);
    for (std::size_t i = 0; i < out.size(); ++i) {
      GO_CHECK(v.data()[i] <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()), what, "[", i,
               "] = ", v.data()[i], " does not fit in int64");
      out[i] = static_cast<std::int64_t>(v.data()[i]);
    }
  } else if (kind == 'f' && floats) {
    auto v = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(a);
    for (std::size_t i = 0; i < out.size(); ++i) {
      const double x = v.data()[i];
      // 2**63 is the first double past int64
      GO_CHECK(std::isfinite(x) && x == std::floor(x) && std::abs(x) < 9223372036854775808.0, what, "[", i, "] = ", x,
               " is not a whole number of int64's range");
      out[i] = static_cast<std::int64_t>(x);
    }
  } else {
    auto v = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
    out.assign(v.data(), v.data() + v.size());
  }
  return out;
}

// A 1-D numpy array of integers (any integer dtype), checked to fit int32, or an error naming it.
std::vector<std::int32_t> int32_vector(const py::handle& h, const char* what) {
  py::array a = py::array::ensure(h);
  GO_CHECK(a, what, " must be an array of integers");
  GO_CHECK(a.ndim() == 1, what, " must be one-dimensional, got ", a.ndim(), " dimensions");
  const char kind = a.dtype().kind();
  // bool is refused (numpy calls it an integer kind): True as device 1 is a mistake more often than not
  GO_CHECK(kind == 'i' || kind == 'u' || a.size() == 0, what, " must hold integers, got dtype ",
           std::string(py::str(a.dtype())));
  const std::vector<std::int64_t> v = int64_values(a, what, false);
  std::vector<std::int32_t> out(v.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    GO_CHECK(v[i] >= std::numeric_limits<std::int32_t>::min() && v[i] <= std::numeric_limits<std::int32_t>::max(),
             what, "[", i, "] = ", v[i], " does not fit in int32");
    out[i] = static_cast<std::int32_t>(v[i]);
  }
  return out;
}

template <class T>
std::vector<T> number_vector(const py::handle& h, const char* what, bool nan_allowed = false) {
  py::array a = py::array::ensure(h);
  GO_CHECK(a, what, " must be an array of numbers");
  GO_CHECK(a.ndim() == 1, what, " must be one-dimensional, got ", a.ndim(), " dimensions");
  const char kind = a.dtype().kind();
  GO_CHECK(kind == 'i' || kind == 'u' || kind == 'f' || a.size() == 0, what, " must hold numbers, got dtype ",
           std::string(py::str(a.dtype())));
  if constexpr (std::is_same_v<T, std::int64_t>) {
    return int64_values(a, what, true);
  } else {
    // checked in float64 before the cast: numpy would turn 1e300 into an inf float32 with a warning
    auto v = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(a);
    std::vector<T> out(static_cast<std::size_t>(v.size()));
    for (std::size_t i = 0; i < out.size(); ++i) {
      const double x = v.data()[i];
      GO_CHECK(std::isfinite(x) || (nan_allowed && std::isnan(x)), what, "[", i, "] = ", x, " is not a finite number");
      GO_CHECK(std::isnan(x) || std::abs(x) <= static_cast<double>(std::numeric_limits<T>::max()), what, "[", i, "] = ", x,
               " is outside the range of ", sizeof(T) == 4 ? "float32" : "float64");
      out[i] = static_cast<T>(x);
    }
    return out;
  }
}

// A read-only copy: writing into plan.device[i] must not look as if it changed the plan.
template <class T>
py::array_t<T> frozen(const std::vector<T>& v) {
  py::array_t<T> a = to_array(v);
  a.attr("setflags")(py::arg("write") = false);
  return a;
}

std::vector<std::string> string_list(const py::handle& h, const char* what) {
  GO_CHECK(!py::isinstance<py::str>(h), what, " must be a list of strings, not one string");
  std::vector<std::string> out;
  for (const py::handle& x : py::iter(h)) {
    GO_CHECK(py::isinstance<py::str>(x), what, "[", out.size(), "] is not a string");
    Py_ssize_t size = 0;
    const char* utf8 = PyUnicode_AsUTF8AndSize(x.ptr(), &size);
    if (utf8 == nullptr) {  // a lone surrogate ('\udc80', from os.fsdecode of bytes that are no UTF-8)
      PyErr_Clear();
      GO_FAIL(what, "[", out.size(), "] cannot be written as UTF-8 (it holds a lone surrogate)");
    }
    out.emplace_back(utf8, static_cast<std::size_t>(size));
  }
  return out;
}

std::string kind_list() {
  std::string s;
  for (auto k : go::kOpKindNames) s += (s.empty() ? "" : ", ") + std::string(k);
  return s;
}

// Builds a graph from per-op arrays. Simple form: op i has one output tensor of output_bytes[i]
// bytes (shape unknown) and edge (u, v) makes v read u's output. Tensor form (what Graph's
// tensor_producer / tensor_bytes / edge_tensors give back, so any graph round-trips): tensor t is an
// output of op tensor_producer[t] with tensor_bytes[t] bytes, and edge k carries tensor
// edge_tensors[k] (-1: a control edge, ordering only).
go::OpGraph graph_from_arrays(const std::vector<std::string>& kinds, const py::handle& edges,
                              const py::handle& flops, const py::handle& output_bytes, const py::handle& param_bytes,
                              const py::handle& temp_bytes, const py::handle& time, const py::handle& names,
                              const py::handle& roles, const py::handle& colocation, const py::handle& tensor_producer,
                              const py::handle& tensor_bytes, const py::handle& edge_tensors, const std::string& name,
                              bool training) {
  const std::size_t n = kinds.size();
  auto sized = [n](std::size_t got, const char* what) {
    GO_CHECK(got == n, "from_arrays: ", what, " has ", got, " entries for ", n, " ops (one per entry of kinds)");
  };
  std::vector<double> fl, tm;
  std::vector<std::int64_t> ob, pb, tb;
  std::vector<std::int32_t> co;
  std::vector<std::string> nm, rl;
  if (!flops.is_none()) sized((fl = number_vector<double>(flops, "flops")).size(), "flops");
  if (!output_bytes.is_none())
    sized((ob = number_vector<std::int64_t>(output_bytes, "output_bytes")).size(), "output_bytes");
  if (!param_bytes.is_none()) sized((pb = number_vector<std::int64_t>(param_bytes, "param_bytes")).size(), "param_bytes");
  if (!temp_bytes.is_none()) sized((tb = number_vector<std::int64_t>(temp_bytes, "temp_bytes")).size(), "temp_bytes");
  if (!time.is_none()) sized((tm = number_vector<double>(time, "time", /*nan_allowed=*/true)).size(), "time");  // NaN: none
  if (!colocation.is_none()) sized((co = int32_vector(colocation, "colocation")).size(), "colocation");
  if (!names.is_none()) sized((nm = string_list(names, "names")).size(), "names");
  if (!roles.is_none()) sized((rl = string_list(roles, "roles")).size(), "roles");
  const bool tensor_form = !tensor_producer.is_none() || !tensor_bytes.is_none() || !edge_tensors.is_none();
  std::vector<std::int32_t> tp, et;
  std::vector<std::int64_t> tby;
  if (tensor_form) {
    GO_CHECK(!tensor_producer.is_none() && !tensor_bytes.is_none() && !edge_tensors.is_none(),
             "from_arrays: give tensor_producer, tensor_bytes and edge_tensors together");
    GO_CHECK(output_bytes.is_none(), "from_arrays: give output_bytes or the tensor arrays, not both");
    tp = int32_vector(tensor_producer, "tensor_producer");
    tby = number_vector<std::int64_t>(tensor_bytes, "tensor_bytes");
    et = int32_vector(edge_tensors, "edge_tensors");
    GO_CHECK(tby.size() == tp.size(), "from_arrays: tensor_bytes has ", tby.size(), " entries for ", tp.size(),
             " tensors (one per entry of tensor_producer)");
  }

  // edges: [E, 2] of op indices (an empty list or array is no edges)
  std::vector<std::int64_t> ev;
  {
    py::array a = py::array::ensure(edges);
    GO_CHECK(a, "from_arrays: edges must be an [E, 2] array of op indices");
    if (a.size() > 0) {
      GO_CHECK(a.ndim() == 2 && a.shape(1) == 2, "from_arrays: edges must have shape [E, 2], got ",
               std::string(py::str(py::tuple(a.attr("shape")))));
      const char kind = a.dtype().kind();
      GO_CHECK(kind == 'i' || kind == 'u', "from_arrays: edges must hold integers, got dtype ",
               std::string(py::str(a.dtype())));
      ev = int64_values(a, "from_arrays: edges", false);
    }
  }

  if (tensor_form)
    GO_CHECK(et.size() * 2 == ev.size(), "from_arrays: edge_tensors has ", et.size(), " entries for ", ev.size() / 2,
             " edges");

  // tensor form: each tensor becomes the next output of its producer
  std::vector<std::int32_t> out_index(tp.size());
  std::vector<std::vector<go::TensorSpec>> outputs(n);
  for (std::size_t t = 0; t < tp.size(); ++t) {
    GO_CHECK(tp[t] >= 0 && static_cast<std::size_t>(tp[t]) < n, "from_arrays: tensor_producer[", t, "] is ", tp[t],
             ", outside [0, ", n, ")");
    auto& outs = outputs[static_cast<std::size_t>(tp[t])];
    out_index[t] = static_cast<std::int32_t>(outs.size());
    go::TensorSpec ts;
    ts.shape_known = false;
    ts.bytes = tby[t];
    outs.push_back(std::move(ts));
  }

  go::GraphInfo info;
  info.name = name;
  info.source = name.empty() ? "from_arrays" : name;
  info.format = "builder";
  go::GraphBuilder b(info);
  b.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    go::OpSpec s;
    s.id = static_cast<std::int64_t>(i);
    s.name = nm.empty() ? "op" + std::to_string(i) : nm[i];
    const auto k = go::parse_op_kind(kinds[i]);
    GO_CHECK(k.has_value(), "from_arrays: kinds[", i, "] is '", kinds[i], "' (known: ", kind_list(), ")");
    s.kind = *k;
    if (!rl.empty()) {
      const auto r = go::parse_op_role(rl[i]);
      GO_CHECK(r.has_value(), "from_arrays: roles[", i, "] is '", rl[i], "' (known: forward, backward, update)");
      s.role = *r;
    }
    if (!fl.empty()) s.flops = fl[i];
    if (!pb.empty()) s.param_bytes = pb[i];
    if (!tb.empty()) s.temp_bytes = tb[i];
    // NaN or a negative time: no measured time (the roofline applies)
    if (!tm.empty() && std::isfinite(tm[i]) && tm[i] >= 0) s.time = tm[i];
    if (!co.empty()) s.colocation = co[i];
    if (tensor_form) {
      s.outputs = std::move(outputs[i]);
    } else {
      go::TensorSpec t;
      t.shape_known = false;
      t.bytes = ob.empty() ? 0 : ob[i];
      s.outputs.push_back(std::move(t));
    }
    b.add_op(std::move(s));
  }
  for (std::size_t e = 0; e + 1 < ev.size(); e += 2) {
    const std::int64_t u = ev[e], v = ev[e + 1];
    GO_CHECK(v >= 0 && v < static_cast<std::int64_t>(n), "from_arrays: edge ", e / 2, " (", u, ", ", v,
             ") ends at an op index outside [0, ", n, ")");
    go::OpSpec& dst = b.spec(static_cast<go::OpId>(v));
    if (!tensor_form) {
      dst.inputs.push_back(go::TensorRef{u, 0});
      continue;
    }
    const std::int32_t t = et[e / 2];
    if (t == -1) {
      dst.control_inputs.push_back(u);
      continue;
    }
    GO_CHECK(t >= 0 && static_cast<std::size_t>(t) < tp.size(), "from_arrays: edge_tensors[", e / 2, "] is ", t,
             " (valid: -1 for a control edge, or 0 to ", tp.size(), " - 1)");
    GO_CHECK(tp[static_cast<std::size_t>(t)] == u, "from_arrays: edge ", e / 2, " (", u, ", ", v, ") carries tensor ", t,
             ", an output of op ", tp[static_cast<std::size_t>(t)], ", not of op ", u);
    dst.inputs.push_back(go::TensorRef{u, out_index[static_cast<std::size_t>(t)]});
  }
  go::OpGraph g = b.build();  // checks sources, cycles and every value
  if (training) g.mutable_info().training = true;
  return g;
}

// Preset clusters by name, built once (a file is read every time: it may have changed).
PyCluster cluster_by_name(const std::string& s) {
  static std::mutex mu;
  static std::unordered_map<std::string, PyCluster> presets;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = presets.find(s); it != presets.end()) return it->second;
  }
  go::Cluster c = go::load_cluster(s);
  const bool file = c.name != s || std::filesystem::exists(s);
  PyCluster pc(std::move(c));
  if (!file) {
    std::lock_guard<std::mutex> lock(mu);
    presets.emplace(s, pc);
  }
  return pc;
}

// ---- simulation ---------------------------------------------------------------------------------

py::object critical_path_dict(const PySimResult& r) {
  if (!r.critical_path) return py::none();
  const go::StepPath& cp = *r.critical_path;
  std::vector<std::int64_t> units;
  std::vector<double> start, finish, ready;
  py::list link;
  for (const auto& u : cp.units) {
    units.push_back(u.unit);
    start.push_back(ms(u.start));
    finish.push_back(ms(u.finish));
    ready.push_back(ms(u.ready));
    link.append(std::string(go::path_link_name(u.link)));
  }
  std::vector<double> by_device;
  for (double b : cp.compute_by_device) by_device.push_back(ms(b));
  py::dict by_kind;
  for (std::size_t k = 0; k < go::kNumOpKinds; ++k)
    if (cp.compute_by_kind[k] > 0) by_kind[py::str(std::string(go::kOpKindNames[k]))] = ms(cp.compute_by_kind[k]);
  py::dict d;
  d["units"] = to_array(std::span<const std::int64_t>(units));
  d["start_ms"] = to_array(std::span<const double>(start));
  d["finish_ms"] = to_array(std::span<const double>(finish));
  d["ready_ms"] = to_array(std::span<const double>(ready));
  d["link"] = link;
  d["end_ms"] = ms(cp.end);
  d["compute_ms"] = ms(cp.compute);
  d["transfers_ms"] = ms(cp.transfers);
  d["link_wait_ms"] = ms(cp.link_wait);
  d["gaps_ms"] = ms(cp.gaps);
  d["compute_by_device_ms"] = to_array(std::span<const double>(by_device));
  d["compute_by_kind_ms"] = by_kind;
  return d;
}

py::dict sim_result_dict(const PySimResult& r) {
  py::dict d;
  d["step_time_ms"] = r.step_time_ms;
  d["valid"] = r.valid;
  d["status"] = r.status;
  d["reason"] = r.reason;
  d["busy_time_ms"] = r.busy_time_ms;
  d["peak_memory_bytes"] = r.peak_memory;
  d["resident_memory_bytes"] = r.resident_memory;
  d["transfer_bytes"] = r.transfer_bytes;
  d["transfers"] = r.transfers;
  d["kernel_launches"] = r.kernel_launches;
  d["units"] = r.units;
  d["memory_traffic_bytes"] = r.memory_traffic;
  return d;
}

// One numpy array (or list of str) of a field of every op.
template <class F>
auto per_op(const PyGraph& g, F field) {
  std::vector<decltype(field(std::declval<const go::Op&>()))> v;
  v.reserve(static_cast<std::size_t>(g.g->num_ops()));
  for (const go::Op& o : g.g->ops()) v.push_back(field(o));
  return to_array(v);
}
template <class F>
py::list per_op_str(const PyGraph& g, F field) {
  py::list l(static_cast<std::size_t>(g.g->num_ops()));
  for (const go::Op& o : g.g->ops()) l[static_cast<std::size_t>(o.id)] = py::str(std::string(field(o)));
  return l;
}

void bind_graph(py::module_& m) {
  py::class_<PyGraph, std::shared_ptr<PyGraph>> graph(m, "Graph", R"doc(
A dataflow graph (go's OpGraph): ops with kinds, FLOPs, bytes and measured times, and the edges
between them. Immutable; arrays are fresh numpy copies. Load one with gopt.load_graph(), or build
one from arrays with Graph.from_arrays() (e.g. from a torch.fx or JAX trace).)doc");
  graph
      .def_property_readonly("name", [](const PyGraph& g) { return g.g->info().name; })
      .def_property_readonly("source", [](const PyGraph& g) { return g.g->info().source; })
      .def_property_readonly("format", [](const PyGraph& g) { return g.g->info().format; })
      .def_property_readonly("training", [](const PyGraph& g) { return g.g->info().training; },
                             "whether the graph holds backward and update ops")
      .def_property_readonly("batch", [](const PyGraph& g) { return g.g->info().batch; })
      .def_property_readonly("num_ops", [](const PyGraph& g) { return g.g->num_ops(); })
      .def_property_readonly("num_edges", [](const PyGraph& g) { return g.g->num_edges(); })
      .def_property_readonly("num_tensors", [](const PyGraph& g) { return g.g->num_tensors(); })
      .def("__len__", [](const PyGraph& g) { return g.g->num_ops(); })
      .def_property_readonly("names", [](const PyGraph& g) {
        return per_op_str(g, [&](const go::Op& o) { return g.g->name(o.id); });
      }, "op names (list of str)")
      .def_property_readonly("kinds", [](const PyGraph& g) {
        return per_op_str(g, [](const go::Op& o) { return go::op_kind_name(o.kind); });
      }, "op kinds (list of str, as gopt.op_kinds() lists them)")
      .def_property_readonly("roles", [](const PyGraph& g) {
        return per_op_str(g, [](const go::Op& o) { return go::op_role_name(o.role); });
      }, "op roles (list of str: forward, backward, update)")
      .def_property_readonly("flops", [](const PyGraph& g) {
        return per_op(g, [](const go::Op& o) { return o.flops; });
      }, "floating-point operations per op (float64)")
      .def_property_readonly("output_bytes", [](const PyGraph& g) {
        return per_op(g, [](const go::Op& o) { return o.output_bytes; });
      }, "bytes an op writes, all its outputs (int64)")
      .def_property_readonly("input_bytes", [](const PyGraph& g) {
        return per_op(g, [](const go::Op& o) { return o.input_bytes; });
      }, "bytes of the distinct tensors an op reads (int64)")
      .def_property_readonly("param_bytes", [](const PyGraph& g) {
        return per_op(g, [](const go::Op& o) { return o.param_bytes; });
      }, "resident parameter bytes an op owns (int64)")
      .def_property_readonly("temp_bytes", [](const PyGraph& g) {
        return per_op(g, [](const go::Op& o) { return o.temp_bytes; });
      }, "scratch bytes while an op runs (int64)")
      .def_property_readonly("time", [](const PyGraph& g) {
        return per_op(g, [](const go::Op& o) { return o.has_time() ? o.time : std::nan(""); });
      }, "measured time per op in seconds, NaN where the graph has none (float64)")
      .def_property_readonly("colocation", [](const PyGraph& g) {
        return per_op(g, [](const go::Op& o) { return o.colocation; });
      }, "colocation group per op, -1 for none (int32)")
      .def_property_readonly("edges", [](const PyGraph& g) {
        const go::OpGraph& G = *g.g;
        py::array_t<std::int32_t> a({static_cast<py::ssize_t>(G.num_edges()), py::ssize_t{2}});
        std::int32_t* p = a.mutable_data();
        for (go::OpId u = 0; u < G.num_ops(); ++u)
          for (go::OpId v : G.succ(u)) {
            *p++ = u;
            *p++ = v;
          }
        return a;
      }, "[E, 2] int32 array of (source op, destination op), grouped by source (control edges included)")
      .def_property_readonly("edge_bytes", [](const PyGraph& g) {
        const go::OpGraph& G = *g.g;
        std::vector<std::int64_t> v;
        v.reserve(static_cast<std::size_t>(G.num_edges()));
        for (go::OpId u = 0; u < G.num_ops(); ++u)
          for (go::TensorId t : G.succ_tensors(u)) v.push_back(t < 0 ? 0 : G.tensor(t).bytes);
        return to_array(v);
      }, "bytes of the tensor each edge of `edges` carries, 0 for a control edge (int64)")
      .def_property_readonly("edge_tensors", [](const PyGraph& g) {
        const go::OpGraph& G = *g.g;
        std::vector<std::int32_t> v;
        v.reserve(static_cast<std::size_t>(G.num_edges()));
        for (go::OpId u = 0; u < G.num_ops(); ++u)
          for (go::TensorId t : G.succ_tensors(u)) v.push_back(t);
        return to_array(v);
      }, "the tensor each edge of `edges` carries, -1 for a control edge (int32)")
      .def_property_readonly("tensor_producer", [](const PyGraph& g) {
        std::vector<std::int32_t> v;
        for (const go::TensorInfo& t : g.g->tensors()) v.push_back(t.producer);
        return to_array(v);
      }, "the op that writes each tensor (int32; an op's outputs are consecutive tensors)")
      .def_property_readonly("tensor_bytes", [](const PyGraph& g) {
        std::vector<std::int64_t> v;
        for (const go::TensorInfo& t : g.g->tensors()) v.push_back(t.bytes);
        return to_array(v);
      }, "bytes of each tensor (int64)")
      .def_property_readonly("topo_order", [](const PyGraph& g) { return to_array(g.g->topo_order()); },
                             "op indices in topological order (int32)")
      .def("training_graph", [](const PyGraph& g) {
        GO_CHECK(!g.g->info().training, g.g->where(), "the graph is already a training graph");
        std::shared_ptr<const go::OpGraph> keep = g.g;
        py::gil_scoped_release nogil;
        return std::make_shared<PyGraph>(go::make_training_graph(*keep));
      }, "the training graph: forward + backward + parameter update ops")
      .def("to_json", [](const PyGraph& g) { return go::save_json_string(*g.g); },
           "the graph as go-graph JSON text (gopt.Graph.from_json and gopt.load_graph read it back)")
      .def("save", [](const PyGraph& g, const std::string& path) { go::save_json(*g.g, path); }, py::arg("path"),
           "writes the graph as a go-graph JSON file")
      .def_static("from_json", [](const std::string& text) {
        py::gil_scoped_release nogil;
        return std::make_shared<PyGraph>(go::parse_json_graph(text, "from_json"));
      }, py::arg("text"), "a graph from go-graph JSON text")
      .def_static("from_arrays", [](const py::object& kinds, const py::object& edges, const py::object& flops,
                                    const py::object& output_bytes, const py::object& param_bytes,
                                    const py::object& temp_bytes, const py::object& time, const py::object& names,
                                    const py::object& roles, const py::object& colocation,
                                    const py::object& tensor_producer, const py::object& tensor_bytes,
                                    const py::object& edge_tensors, const std::string& name, bool training) {
        return std::make_shared<PyGraph>(graph_from_arrays(string_list(kinds, "kinds"), edges, flops, output_bytes,
                                                           param_bytes, temp_bytes, time, names, roles, colocation,
                                                           tensor_producer, tensor_bytes, edge_tensors, name, training));
      }, py::kw_only(), py::arg("kinds"), py::arg("edges"), py::arg("flops") = py::none(),
         py::arg("output_bytes") = py::none(), py::arg("param_bytes") = py::none(), py::arg("temp_bytes") = py::none(),
         py::arg("time") = py::none(), py::arg("names") = py::none(), py::arg("roles") = py::none(),
         py::arg("colocation") = py::none(), py::arg("tensor_producer") = py::none(),
         py::arg("tensor_bytes") = py::none(), py::arg("edge_tensors") = py::none(), py::arg("name") = "",
         py::arg("training") = false,
         R"doc(
A graph from per-op arrays, e.g. a torch.fx or JAX trace. Op i has kind kinds[i] (str) and one
output tensor of output_bytes[i] bytes; each row (u, v) of edges ([E, 2] ints) makes op v read op
u's output. Optional per-op arrays: flops, param_bytes, temp_bytes, time (measured seconds; NaN
or negative = none, use the roofline), names, roles ("forward", "backward", "update"),
colocation (group id, -1 none). training=True marks a graph that already holds its backward and
update ops. Ops with several outputs, or control edges: instead of output_bytes give
tensor_producer (op of each tensor), tensor_bytes and edge_tensors (the tensor each edge carries,
-1 for a control edge), as a Graph's attributes of those names hold them; then
Graph.from_arrays round-trips any graph. Cycles, bad indices and negative values raise gopt.Error.)doc")
      .def("__repr__", [](const PyGraph& g) {
        return "<gopt.Graph '" + (g.g->info().name.empty() ? g.g->info().source : g.g->info().name) + "': " +
               std::to_string(g.g->num_ops()) + " ops, " + std::to_string(g.g->num_edges()) + " edges" +
               (g.g->info().training ? ", training" : "") + ">";
      });

  m.def("load_graph", [](const std::string& path, bool training) {
    py::gil_scoped_release nogil;
    go::OpGraph g = go::load_graph(path);
    if (training && !g.info().training) g = go::make_training_graph(g);
    return std::make_shared<PyGraph>(std::move(g));
  }, py::arg("path"), py::arg("training") = false, R"doc(
Loads a graph: a file (.onnx, go-graph .json, PipeDream graph.txt, dnn-partitioning .json, a NeuSight
profile .csv, with ":layers=N" after it to set its layer count) or
"zoo:<name>[:key=value...]" (e.g. "zoo:gnmt8:seq=121"). training=True expands it into the training
graph (forward + backward + update), as gopt's --training does.)doc");
}

void bind_cluster(py::module_& m) {
  py::class_<PyCluster>(m, "Cluster", "A simulated multi-GPU machine (immutable): devices and links.")
      .def_property_readonly("name", [](const PyCluster& c) { return c.c->name; })
      .def_property_readonly("num_devices", [](const PyCluster& c) { return c.c->num_devices(); })
      .def("__len__", [](const PyCluster& c) { return c.c->num_devices(); })
      .def_property_readonly("device_names", [](const PyCluster& c) {
        std::vector<std::string> v;
        for (const auto& d : c.c->devices) v.push_back(d.name);
        return v;
      })
      .def_property_readonly("device_types", [](const PyCluster& c) {
        std::vector<std::string> v;
        for (const auto& d : c.c->devices) v.push_back(d.spec.name);
        return v;
      })
      .def_property_readonly("memory_bytes", [](const PyCluster& c) {
        std::vector<std::int64_t> v;
        for (const auto& d : c.c->devices) v.push_back(d.spec.memory_bytes);
        return to_array(v);
      })
      .def_property_readonly("peak_flops", [](const PyCluster& c) {
        std::vector<double> v;
        for (const auto& d : c.c->devices) v.push_back(d.spec.peak_flops);
        return to_array(v);
      })
      .def_property_readonly("bandwidth", [](const PyCluster& c) {
        const auto n = static_cast<py::ssize_t>(c.c->num_devices());
        py::array_t<double> a({n, n});
        std::copy(c.c->bandwidth.begin(), c.c->bandwidth.end(), a.mutable_data());
        return a;
      }, "[n, n] link bandwidth in bytes/s (diagonal unused)")
      .def_property_readonly("latency", [](const PyCluster& c) {
        const auto n = static_cast<py::ssize_t>(c.c->num_devices());
        py::array_t<double> a({n, n});
        std::copy(c.c->latency.begin(), c.c->latency.end(), a.mutable_data());
        return a;
      }, "[n, n] link latency in seconds (diagonal unused)")
      .def_property_readonly("channels",
                             [](const PyCluster& c) { return std::string(go::channel_model_name(c.c->channels)); })
      .def("to_json", [](const PyCluster& c) { return go::cluster_to_json(*c.c).dump(1); },
           "the cluster as go-cluster JSON text")
      .def_static("from_json", [](const std::string& text) { return PyCluster(go::parse_cluster(text, "from_json")); },
                  py::arg("text"))
      .def("__repr__", [](const PyCluster& c) {
        return "<gopt.Cluster '" + c.c->name + "': " + std::to_string(c.c->num_devices()) + " devices>";
      });
  m.def("cluster", &cluster_by_name, py::arg("name_or_path"), R"doc(
A cluster preset ("v100x4", "v100x8", "p100x4", "k80x2", "h100x8": any <device>x<count> with device
one of v100, p100, k80, a100, h100 (H100 SXM 80GB), a100-pcie-40gb, a100-sxm4-40gb, a100-80gb-pcie,
v100-pcie-32gb, p100-pcie-16gb, p4, t4, l4, mi100, mi210, mi250; go/graph/cost.hpp and
go/sim/cluster.hpp give their numbers and links) or a go-cluster JSON file.)doc");
  m.def("cluster_presets", &go::cluster_preset_names);
  m.def("op_kinds", [] { return std::vector<std::string>(go::kOpKindNames.begin(), go::kOpKindNames.end()); },
        "the op kinds a graph may hold (Graph.kinds, Graph.from_arrays)");
}

// A plan's arrays from Python (None: empty, the plan's default).
std::vector<std::int32_t> plan_devices(const py::handle& h) {
  return h.is_none() ? std::vector<std::int32_t>{} : int32_vector(h, "device");
}
std::vector<float> plan_priorities(const py::handle& h) {
  return h.is_none() ? std::vector<float>{} : number_vector<float>(h, "priority");
}
std::vector<std::int32_t> plan_fusion(const py::handle& h) {
  return h.is_none() ? std::vector<std::int32_t>{} : int32_vector(h, "fusion");
}

void bind_plan(py::module_& m) {
  py::class_<PyPlan>(m, "Plan", R"doc(
What an optimizer decides per op: device (int32), priority (float32, higher runs first among ready
ops; empty: first ready, first run) and fusion group (int32, -1 unfused; empty: no fusion). Arrays
read back as read-only copies; assign a whole array to change one.)doc")
      .def(py::init([](const py::object& device, const py::object& priority, const py::object& fusion) {
             return PyPlan{go::Plan{plan_devices(device), plan_priorities(priority), plan_fusion(fusion)}};
           }),
           py::arg("device") = py::none(), py::arg("priority") = py::none(), py::arg("fusion") = py::none())
      .def_property("device", [](const PyPlan& p) { return frozen(p.p.device); },
                    [](PyPlan& p, const py::object& v) { p.p.device = plan_devices(v); })
      .def_property("priority", [](const PyPlan& p) { return frozen(p.p.priority); },
                    [](PyPlan& p, const py::object& v) { p.p.priority = plan_priorities(v); })
      .def_property("fusion", [](const PyPlan& p) { return frozen(p.p.fusion); },
                    [](PyPlan& p, const py::object& v) { p.p.fusion = plan_fusion(v); })
      .def_static("single_device", [](std::int32_t num_ops, std::int32_t device) {
        GO_CHECK(num_ops >= 0, "single_device: num_ops must be >= 0, got ", num_ops);
        return PyPlan{go::Plan::single_device(num_ops, device)};
      }, py::arg("num_ops"), py::arg("device") = 0)
      .def("check", [](const PyPlan& p, const PyGraph& g, const PyCluster& c, bool check_colocation,
                       bool check_fusion_rules) {
        return go::check_plan(*g.g, p.p, c.c->num_devices(), check_colocation, check_fusion_rules);
      }, py::arg("graph"), py::arg("cluster"), py::arg("check_colocation") = true, py::arg("check_fusion_rules") = true,
         "\"\" when the plan is valid for the graph on the cluster, else the first problem")
      .def("to_json", [](const PyPlan& p, const PyGraph& g) { return go::plan_to_json(p.p, *g.g).dump(); }, py::arg("graph"),
           "go-plan JSON text, as gopt place --out writes it")
      .def("save", [](const PyPlan& p, const std::string& path, const PyGraph& g) { go::save_plan(p.p, *g.g, path); },
           py::arg("path"), py::arg("graph"), "writes a go-plan JSON file (what gopt simulate --plan reads)")
      .def_static("from_json", [](const std::string& text, const PyGraph& g) {
        return PyPlan{go::parse_plan(text, *g.g, "from_json")};
      }, py::arg("text"), py::arg("graph"))
      .def_static("load", [](const std::string& path, const PyGraph& g) { return PyPlan{go::load_plan(path, *g.g)}; },
                  py::arg("path"), py::arg("graph"),
                  "a go-plan file (gopt place --out) or a dnn-partitioning human-expert split")
      .def("__eq__", [](const PyPlan& a, const PyPlan& b) {
        return a.p.device == b.p.device && a.p.priority == b.p.priority && a.p.fusion == b.p.fusion;
      })
      .def("__len__", [](const PyPlan& p) { return p.p.device.size(); })
      .def("__repr__", [](const PyPlan& p) {
        return "<gopt.Plan: " + std::to_string(p.p.device.size()) + " devices" + (p.p.has_priority() ? ", priorities" : "") +
               (p.p.has_fusion() ? ", fusion" : "") + ">";
      });
}

void bind_simulate(py::module_& m) {
  py::class_<PySimResult>(m, "SimResult", "One simulated step of a plan.")
      .def_readonly("valid", &PySimResult::valid, "False when the plan is invalid or runs out of memory")
      .def_readonly("status", &PySimResult::status, "ok, out_of_memory, bad_device, fusion_not_convex, ...")
      .def_readonly("reason", &PySimResult::reason, "why the plan is invalid (\"\" when valid)")
      .def_readonly("step_time_ms", &PySimResult::step_time_ms, "simulated step time (inf when it cannot run)")
      .def_property_readonly("busy_time_ms", [](const PySimResult& r) { return to_array(r.busy_time_ms); })
      .def_property_readonly("peak_memory_bytes", [](const PySimResult& r) { return to_array(r.peak_memory); })
      .def_property_readonly("resident_memory_bytes", [](const PySimResult& r) { return to_array(r.resident_memory); })
      .def_readonly("transfer_bytes", &PySimResult::transfer_bytes)
      .def_readonly("transfers", &PySimResult::transfers)
      .def_readonly("kernel_launches", &PySimResult::kernel_launches)
      .def_readonly("units", &PySimResult::units)
      .def_readonly("memory_traffic_bytes", &PySimResult::memory_traffic)
      .def_readonly("trace", &PySimResult::trace, "Chrome trace JSON text (simulate(..., trace=True)), else None")
      .def_property_readonly("critical_path", &critical_path_dict,
                             "where the step time goes (simulate(..., critical_path=True)), else None: a dict, see "
                             "gopt.simulate")
      .def("to_dict", &sim_result_dict, "the fields of gopt simulate --json (its lower_bound_ms: gopt.lower_bound)")
      .def("__repr__", [](const PySimResult& r) {
        char b[64];
        std::snprintf(b, sizeof b, "%.3f ms", r.step_time_ms);
        return "<gopt.SimResult " + std::string(b) + (r.valid ? "" : ", invalid: " + r.reason) + ">";
      });

  m.def("simulate", [](const py::object& graph, const py::object& cluster, const py::object& plan, bool trace,
                       bool critical_path, bool check_colocation, bool check_fusion_rules, bool stop_on_oom,
                       const std::string& cost) {
    std::shared_ptr<PyGraph> g = graph_arg(graph);
    const PyCluster c = cluster_arg(cluster);
    static const go::Plan empty;
    const go::Plan& p = plan_arg(plan, empty);
    go::SimOptions o;
    o.check_colocation = check_colocation;
    o.check_fusion_rules = check_fusion_rules;
    o.stop_on_oom = stop_on_oom;
    o.cost = go::parse_cost_source(cost);
    py::gil_scoped_release nogil;
    return simulate(*g, c, p, trace, critical_path, o);
  }, py::arg("graph"), py::arg("cluster"), py::arg("plan") = py::none(), py::kw_only(), py::arg("trace") = false,
     py::arg("critical_path") = false, py::arg("check_colocation") = true, py::arg("check_fusion_rules") = true, py::arg("stop_on_oom") = false, py::arg("cost") = "measured", R"doc(
Simulates one step of plan (None: every op on device 0, first ready first run, no fusion) of the
graph on the cluster, as gopt simulate does. The simulator is built once per graph and cluster and
reused. trace=True also returns the Chrome trace (chrome://tracing, ui.perfetto.dev) as JSON text.
critical_path=True also returns where the step time goes (go/sim/critical_path.hpp, gopt simulate
--critical-path): the path walked back from the unit that ends last through what let each unit
start (its latest data input, or its device's previous unit), as a dict of "units" (op indices
of the path's units, the last first; a fusion group's first op), "start_ms", "finish_ms",
"ready_ms" (when what let it start was there) and "link" ("data", "transfer", "device" or
"start") per unit, "end_ms", "compute_ms", "transfers_ms", "link_wait_ms" and "gaps_ms" (they add
up to end_ms, the step time), "compute_by_device_ms" and "compute_by_kind_ms".
check_colocation / check_fusion_rules: a colocation group split across devices / a fusion group a
compiler would not fuse (go/graph/fusion_rules.hpp) makes the plan invalid (default: both on).
cost: "measured" (a profile's measured op times where the graph has them, the cost model elsewhere)
or "roofline" (the cost model alone), as gopt simulate --cost.
A plan that does not fit memory is a result (valid False, status out_of_memory); a plan whose
arrays do not have one entry per op raises gopt.Error.)doc");

  m.def("lower_bound", [](const py::object& graph, const py::object& cluster, const std::string& cost) {
    std::shared_ptr<PyGraph> g = graph_arg(graph);
    const PyCluster c = cluster_arg(cluster);
    const go::CostSource src = go::parse_cost_source(cost);
    go::StepTimeBound b;
    {
      py::gil_scoped_release nogil;
      b = go::step_time_lower_bound(*g->g, *c.c, src);
    }
    py::dict d;
    d["valid_plan"] = b.valid * 1e3;
    d["valid_plan_path"] = b.valid_path * 1e3;
    d["valid_plan_work"] = b.valid_work * 1e3;
    d["valid_plan_compute"] = b.valid_compute * 1e3;
    d["valid_plan_traffic"] = b.valid_traffic * 1e3;
    d["any_plan"] = b.fused * 1e3;
    d["unfused"] = b.unfused * 1e3;
    d["any_plan_path"] = b.fused_path * 1e3;
    d["any_plan_work"] = b.fused_work * 1e3;
    d["unfused_path"] = b.unfused_path * 1e3;
    d["unfused_work"] = b.unfused_work * 1e3;
    return d;
  }, py::arg("graph"), py::arg("cluster"), py::kw_only(), py::arg("cost") = "measured", R"doc(
Lower bounds (ms) on the simulated step time of every plan of the graph on the cluster, as gopt
simulate --json's lower_bound_ms (go/sim/bound.hpp): "valid_plan" holds for every plan whose fusion
groups keep go's fusion rules (the plans gopt.simulate runs with check_fusion_rules, the default),
"any_plan" for every placement, priorities and fusion, "unfused" for plans without fusion; each is
the larger of its longest path ("_path") and its total work / devices ("_work"). "valid_plan" is
the larger of two such bounds: "valid_plan_compute" (each op's FLOPs, or its whole time where the
rules keep it alone) and "valid_plan_traffic" (the bytes the rules force a loop op to move; 0 on a
graph with measured op times and cost "measured"), their paths with the launches of the loop
kernels the rules force. Transfers and memory are left out.)doc");
}

}  // namespace

const go::Plan& plan_arg(const py::handle& h, const go::Plan& empty) {
  if (h.is_none()) return empty;
  GO_CHECK(py::isinstance<PyPlan>(h), "plan must be a gopt.Plan or None, got ", std::string(py::str(h.get_type())));
  return h.cast<const PyPlan&>().p;
}

namespace {
// The argument as a Python int (numpy integers included; bool and float refused), or an error.
py::int_ whole_number(const py::handle& h, const char* what) {
  GO_CHECK(!py::isinstance<py::bool_>(h) && !py::isinstance<py::float_>(h) && PyIndex_Check(h.ptr()), what,
           " must be an integer, got ", std::string(py::repr(h)), " (", std::string(py::str(h.get_type().attr("__name__"))),
           ")");
  return py::reinterpret_steal<py::int_>(PyNumber_Index(h.ptr()));
}
}  // namespace

std::int64_t int_arg(const py::handle& h, const char* what, std::int64_t lo, std::int64_t hi) {
  const py::int_ v = whole_number(h, what);
  int overflow = 0;
  const long long x = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
  GO_CHECK(overflow == 0 && x >= lo && x <= hi, what, " is ", std::string(py::repr(v)), "; it must be ", lo, " to ", hi);
  return x;
}

std::uint64_t seed_arg(const py::handle& h, const char* what) {
  const py::int_ v = whole_number(h, what);
  const unsigned long long x = PyLong_AsUnsignedLongLong(v.ptr());
  if (PyErr_Occurred()) {  // negative or past 2**64 - 1
    PyErr_Clear();
    GO_FAIL(what, " is ", std::string(py::repr(v)), "; a seed is 0 to 18446744073709551615");
  }
  return x;
}

PyCluster cluster_arg(const py::handle& h) {
  if (py::isinstance<PyCluster>(h)) return h.cast<const PyCluster&>();
  GO_CHECK(py::isinstance<py::str>(h), "cluster must be a gopt.Cluster, a preset name or a go-cluster JSON path, got ",
           std::string(py::str(h.get_type())));
  return cluster_by_name(h.cast<std::string>());
}

std::shared_ptr<PyGraph> graph_arg(const py::handle& h, bool training) {
  if (py::isinstance<PyGraph>(h)) return h.cast<std::shared_ptr<PyGraph>>();
  GO_CHECK(py::isinstance<py::str>(h), "graph must be a gopt.Graph, a file path or zoo:<name>, got ",
           std::string(py::str(h.get_type())));
  const std::string path = h.cast<std::string>();
  py::gil_scoped_release nogil;
  go::OpGraph g = go::load_graph(path);
  if (training && !g.info().training) g = go::make_training_graph(g);
  return std::make_shared<PyGraph>(std::move(g));
}

std::string default_policy_path() {
  if (const char* env = std::getenv("GO_POLICY"); env && *env) return env;
  Dl_info info{};
  if (*GOPT_INSTALLED_POLICY && dladdr(reinterpret_cast<void*>(&default_policy_path), &info) && info.dli_fname) {
    const auto p = (std::filesystem::path(info.dli_fname).parent_path() / GOPT_INSTALLED_POLICY).lexically_normal();
    std::error_code ec;
    if (std::filesystem::is_regular_file(p, ec)) return p.string();
  }
  return GOPT_SOURCE_POLICY;
}

}  // namespace gopt_py

PYBIND11_MODULE(gopt, m) {
  namespace py = pybind11;
  using namespace gopt_py;
  m.doc() = R"doc(
go from Python: load ML dataflow graphs, simulate plans on multi-GPU clusters, optimize placement,
scheduling and fusion with the baselines and with GO (a policy trained with PPO), and train it.

    import gopt
    g = gopt.load_graph("data/models/resnet50.onnx", training=True)
    r = gopt.place(g, "v100x4", "go-zero-shot")
    print(r.step_time_ms, gopt.simulate(g, "v100x4", r.plan).step_time_ms)
)doc";
  m.attr("__version__") = GO_VERSION_STRING;

  static py::exception<go::Error> error(m, "Error", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const go::Error& e) {
      PyErr_SetString(error.ptr(), e.what());
    } catch (const nlohmann::json::exception& e) {  // malformed JSON text
      PyErr_SetString(error.ptr(), e.what());
    } catch (const std::filesystem::filesystem_error& e) {  // a path the file system refuses (a symlink loop)
      PyErr_SetString(error.ptr(), (e.path1().string() + ": " + e.code().message()).c_str());
    }
  });

  bind_graph(m);
  bind_cluster(m);
  bind_plan(m);
  bind_simulate(m);
  bind_optimize(m);
}
