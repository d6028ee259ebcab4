#pragma once
// The objects the Python module `gopt` wraps, shared by its two translation units
// (gopt_module.cpp: graphs, clusters, plans, simulation; gopt_optimize.cpp: place and train).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "go/core/error.hpp"
#include "go/graph/graph.hpp"
#include "go/sim/cluster.hpp"
#include "go/sim/critical_path.hpp"
#include "go/sim/plan.hpp"
#include "go/sim/simulator.hpp"

namespace gopt_py {

namespace py = pybind11;

// A simulator of one (graph, cluster, options) with its workspace, kept by the graph so that
// repeated gopt.simulate() calls neither rebuild the simulator's cost tables nor allocate.
struct SimEntry {
  std::shared_ptr<const go::OpGraph> graph;  // keeps the graph the simulator points to alive
  std::shared_ptr<const go::Cluster> cluster;
  std::string cluster_key;
  go::SimOptions options;
  std::unique_ptr<go::Simulator> sim;
  go::SimWorkspace ws;
  std::mutex mu;  // one simulation at a time per workspace (simulate releases the GIL)
};

// gopt.Cluster: immutable, so a simulator cached for it stays valid. `key` is its JSON text, which
// identifies equal clusters loaded twice (gopt.simulate(g, "v100x8", p) in a loop hits the cache).
struct PyCluster {
  std::shared_ptr<const go::Cluster> c;
  std::string key;

  explicit PyCluster(go::Cluster cluster) {
    cluster.validate();
    key = go::cluster_to_json(cluster).dump();
    c = std::make_shared<const go::Cluster>(std::move(cluster));
  }
};

// gopt.Graph: holds the OpGraph (never copied per call) and its cached simulators.
struct PyGraph {
  std::shared_ptr<const go::OpGraph> g;
  std::mutex cache_mu;
  std::vector<std::shared_ptr<SimEntry>> cache;  // most recently used last

  explicit PyGraph(go::OpGraph graph) : g(std::make_shared<const go::OpGraph>(std::move(graph))) {}

  // The cached simulator for the cluster and options (built on first use; a few per graph).
  std::shared_ptr<SimEntry> simulator(const PyCluster& c, const go::SimOptions& o);
};

struct PyPlan {
  go::Plan p;
};

struct PySimResult {
  bool valid = true;
  std::string status, reason;
  double step_time_ms = 0;
  std::vector<double> busy_time_ms;
  std::vector<std::int64_t> peak_memory, resident_memory;
  std::int64_t transfer_bytes = 0, transfers = 0, kernel_launches = 0, units = 0;
  double memory_traffic = 0;
  std::optional<std::string> trace;
  std::optional<go::StepPath> critical_path;
};

// One step of `plan` on the graph's cached simulator for (c, options); call without the GIL.
// (gopt_sim.cpp: a translation unit of its own, as small as the CLI's simulate.cpp, so that the
// simulator's hot loop is compiled as it is there.)
PySimResult simulate(PyGraph& g, const PyCluster& c, const go::Plan& plan, bool trace, bool critical_path,
                     const go::SimOptions& options);

// A gopt.Cluster, or a preset name / go-cluster JSON path loaded on the spot.
PyCluster cluster_arg(const py::handle& h);
// A gopt.Graph, or a path / zoo spec loaded on the spot (training: expand a loaded file).
std::shared_ptr<PyGraph> graph_arg(const py::handle& h, bool training = false);
// A gopt.Plan's plan, or `empty` for None.
const go::Plan& plan_arg(const py::handle& h, const go::Plan& empty);
// A whole-number argument (a Python or numpy integer) in [lo, hi], or a gopt.Error naming `what`:
// pybind's own conversion answers -1 for an unsigned parameter, or 10**20, with its long
// "incompatible function arguments" listing.
std::int64_t int_arg(const py::handle& h, const char* what, std::int64_t lo, std::int64_t hi);
// A seed: an integer 0 to 2**64 - 1.
std::uint64_t seed_arg(const py::handle& h, const char* what);

template <class T>
py::array_t<T> to_array(std::span<const T> v) {
  py::array_t<T> a(static_cast<py::ssize_t>(v.size()));
  std::copy(v.begin(), v.end(), a.mutable_data());
  return a;
}
template <class T>
py::array_t<T> to_array(const std::vector<T>& v) {
  return to_array(std::span<const T>(v));
}

// Seconds -> milliseconds, +inf (no valid step) stays +inf.
inline double ms(double seconds) { return seconds * 1e3; }

// The library's default policy: $GO_POLICY, else the installed copy next to the module, else the
// source tree's policies/ (defined in gopt_module.cpp).
std::string default_policy_path();

void bind_optimize(py::module_& m);

}  // namespace gopt_py
