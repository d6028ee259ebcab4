// gopt.simulate's C++ side: the cached simulator per (graph, cluster, options) and one simulated
// step. Kept apart from the bindings so that this translation unit is as small as the CLI's
// simulate.cpp and listed first, so the linker keeps its copy of the simulator's inline hot loop.
#include <cmath>
#include <memory>
#include <mutex>
#include <string>

#include "go/sim/critical_path.hpp"
#include "go/sim/simulator.hpp"
#include "go/sim/trace.hpp"
#include "gopt_module.hpp"

namespace gopt_py {

std::shared_ptr<SimEntry> PyGraph::simulator(const PyCluster& c, const go::SimOptions& o) {
  constexpr std::size_t kMaxCached = 4;
  std::lock_guard<std::mutex> lock(cache_mu);
  for (std::size_t i = 0; i < cache.size(); ++i) {
    const auto& e = cache[i];
    if (e->cluster_key == c.key && e->options.check_colocation == o.check_colocation &&
        e->options.check_fusion_rules == o.check_fusion_rules && e->options.stop_on_oom == o.stop_on_oom &&
        e->options.cost == o.cost) {
      auto hit = e;
      cache.erase(cache.begin() + static_cast<std::ptrdiff_t>(i));
      cache.push_back(hit);
      return hit;
    }
  }
  auto e = std::make_shared<SimEntry>();
  e->graph = g;
  e->cluster = c.c;
  e->cluster_key = c.key;
  e->options = o;
  e->sim = std::make_unique<go::Simulator>(*g, *c.c, o);
  e->ws = e->sim->make_workspace();
  if (cache.size() == kMaxCached) cache.erase(cache.begin());
  cache.push_back(e);
  return e;
}

PySimResult simulate(PyGraph& g, const PyCluster& c, const go::Plan& plan, bool trace, bool critical_path,
                     const go::SimOptions& o) {
  auto e = g.simulator(c, o);
  std::lock_guard<std::mutex> lock(e->mu);
  e->ws.set_record_memory(trace);
  const go::SimResult& r = e->sim->simulate(plan, e->ws);
  PySimResult out;
  out.valid = r.valid;
  out.status = std::string(go::sim_status_name(r.status));
  if (!r.valid) out.reason = go::sim_reason(r, *g.g, *c.c);
  out.step_time_ms = ms(r.step_time);
  out.busy_time_ms.reserve(r.busy_time.size());
  for (double b : r.busy_time) out.busy_time_ms.push_back(ms(b));
  out.peak_memory = r.peak_memory;
  out.resident_memory = r.resident_memory;
  out.transfer_bytes = r.transfer_bytes;
  out.transfers = r.transfers;
  out.kernel_launches = r.kernel_launches;
  out.units = r.units;
  out.memory_traffic = r.memory_traffic;
  if (critical_path && std::isfinite(r.step_time)) out.critical_path = go::step_critical_path(*e->sim, plan, e->ws);
  if (trace) {
    out.trace = go::chrome_trace(*e->sim, plan, e->ws).dump();
    e->ws.set_record_memory(false);
  }
  return out;
}

}  // namespace gopt_py
