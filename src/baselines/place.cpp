// The built-in place() methods (go/baselines/place.hpp), compiled once into libgo.
#include <string>
#include <vector>

#include "go/baselines/best_trace.hpp"
#include "go/baselines/place.hpp"

namespace go::detail::base {

std::vector<PlaceMethod> builtin_methods() {
  std::vector<PlaceMethod> m;
  m.push_back({"default", "every op on device 0, first-ready scheduling, no fusion (TensorFlow's default)",
               [](const OpGraph& g, const Cluster&, const PlaceOptions&, PlaceResult&) { return default_plan(g); }});
  m.push_back({"human", "human-expert placement (zoo rules, dnn-partitioning expert splits, else contiguous blocks by depth)",
               [](const OpGraph& g, const Cluster& c, const PlaceOptions& o, PlaceResult& r) {
                 return human_plan(g, c, o.expert_split, &r.note, nullptr, o.sim);
               }, false, false, {PlaceOption::expert}});
  m.push_back({"pipeline", "pipeline stages: forward ops in depth-first topological order cut into one block of equal compute per device (of compute and memory where those do not fit), training ops with their forward op",
               [](const OpGraph& g, const Cluster& c, const PlaceOptions& o, PlaceResult& r) {
                 return pipeline_plan(g, c, o.sim, &r.note);
               }});
  m.push_back({"metis", "METIS k-way partition weighted by compute and edge bytes, balancing compute and memory",
               [](const OpGraph& g, const Cluster& c, const PlaceOptions& o, PlaceResult& r) {
                 return metis_plan(g, c, o.seed, &r.note);
               }});
  m.push_back({"heft", "HEFT list scheduling with communication costs (priorities follow the schedule)",
               [](const OpGraph& g, const Cluster& c, const PlaceOptions&, PlaceResult& r) { return heft_plan(g, c, &r.note); }, true});
  m.push_back({"m-topo", "Baechi m-TOPO: topological fill of devices under a memory cap",
               [](const OpGraph& g, const Cluster& c, const PlaceOptions&, PlaceResult& r) { return m_topo_plan(g, c, &r.note); }, true});
  m.push_back({"m-etf", "Baechi m-ETF: earliest-time-first list scheduling under memory",
               [](const OpGraph& g, const Cluster& c, const PlaceOptions&, PlaceResult& r) { return m_etf_plan(g, c, &r.note); }, true});
  m.push_back({"m-sct", "Baechi m-SCT: m-ETF with favourite children (greedy approximation of the LP)",
               [](const OpGraph& g, const Cluster& c, const PlaceOptions&, PlaceResult& r) { return m_sct_plan(g, c, &r.note); }, true});
  m.push_back({"random", "random search over contiguous-block placements and priorities, from the default and human plans (budget: simulations)",
               [](const OpGraph& g, const Cluster& c, const PlaceOptions& o, PlaceResult& r) {
                 return random_search_plan(g, c, o.budget, o.seed, o.sim, &r.simulations, search_starts(g, c, o));
               }, false, false, {PlaceOption::budget, PlaceOption::expert}});
  m.push_back({"anneal", "simulated annealing over placement, priority and fusion from the best of the default and human plans, with and without XLA-like fusion (budget: simulations; --time-limit: seconds)",
               [](const OpGraph& g, const Cluster& c, const PlaceOptions& o, PlaceResult& r) {
                 BestTrace trace;
                 Plan p = anneal_plan(g, c, o.budget, o.seed, o.sim, &r.simulations, anneal_starts(g, c, o), o.time_limit, &trace);
                 r.note = trace.text();
                 return p;
               }, false, true, {PlaceOption::budget, PlaceOption::time_limit, PlaceOption::expert}});
  m.push_back({"exact", "optimal placement + schedule by mixed-integer programming with CBC, graphs of <= 200 ops (--time-limit: seconds, default 60; the note says proven optimal or the gap)",
               [](const OpGraph& g, const Cluster& c, const PlaceOptions& o, PlaceResult& r) { return exact_plan(g, c, o, &r.note); },
               false, false, {PlaceOption::time_limit}});
  return m;
}

}  // namespace go::detail::base
