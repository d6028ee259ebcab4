// gopt.place / gopt.methods (go::place and its registry, GO's methods included) and gopt.train
// (go::rl::PpoTrainer, driven update by update as `gopt train` drives it, with a Python callback).
#include <pybind11/stl.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "go/baselines/place.hpp"
#include "go/core/file.hpp"
#include "go/rl/place_go.hpp"
#include "go/rl/ppo.hpp"
#include "gopt_module.hpp"

namespace gopt_py {

namespace {

// ---- place ----------------------------------------------------------------------------------------

struct PyPlaceResult {
  std::string method, status, reason, note;
  bool valid = false;
  double step_time_ms = 0, optimize_seconds = 0;
  std::int64_t simulations = 0;
  std::vector<std::int64_t> peak_memory;
  PyPlan plan;
};

PyPlaceResult py_place_result(go::PlaceResult r) {
  PyPlaceResult out;
  out.method = r.method;
  out.valid = r.valid;
  out.status = std::string(go::sim_status_name(r.status));
  out.reason = r.reason;
  out.note = r.note;
  out.step_time_ms = ms(r.step_time);
  out.optimize_seconds = r.optimize_seconds;
  out.simulations = r.simulations;
  out.peak_memory = r.peak_memory;
  out.plan.p = std::move(r.plan);
  return out;
}

py::dict place_result_dict(const PyPlaceResult& r) {
  py::dict d;
  d["method"] = r.method;
  d["step_time_ms"] = r.step_time_ms;
  d["valid"] = r.valid;
  d["status"] = r.status;
  d["reason"] = r.reason;
  d["note"] = r.note;
  d["optimize_seconds"] = r.optimize_seconds;
  d["simulations"] = r.simulations;
  d["peak_memory_bytes"] = r.peak_memory;
  return d;
}

// ---- train ----------------------------------------------------------------------------------------

py::dict stats_dict(const go::rl::UpdateStats& s) {
  py::dict d;
  d["update"] = s.update;
  d["lr"] = s.lr;
  d["mean_reward"] = s.mean_reward;
  d["max_reward"] = s.max_reward;
  d["best_step_time_ms"] = ms(s.best_step_time);
  d["best_speedup"] = s.best_speedup;
  d["mean_step_time_ms"] = ms(s.mean_step_time);
  d["invalid_fraction"] = s.invalid_fraction;
  d["entropy"] = s.entropy;
  d["approx_kl"] = s.approx_kl;
  d["clip_fraction"] = s.clip_fraction;
  d["policy_loss"] = s.policy_loss;
  d["value_loss"] = s.value_loss;
  d["explained_variance"] = s.explained_variance;
  d["grad_norm"] = s.grad_norm;
  d["epochs_run"] = s.epochs_run;
  d["samples"] = s.samples;
  d["seconds"] = s.seconds;
  d["samples_per_second"] = s.samples_per_second;
  d["sample_seconds"] = s.sample_seconds;
  d["simulate_seconds"] = s.simulate_seconds;
  d["train_seconds"] = s.train_seconds;
  return d;
}

struct PyTaskResult {
  std::string name, cluster, reference_kind, anchor;
  std::shared_ptr<PyGraph> graph;
  std::optional<PyPlan> best_plan;
  double best_step_time_ms = 0, reference_ms = 0, anchor_step_time_ms = 0;
  std::int64_t best_update = -1, samples = 0, invalid = 0;
};

struct PyTrainResult {
  std::int64_t updates_done = 0;
  py::list history;
  std::vector<PyTaskResult> tasks;
  std::optional<std::string> checkpoint;
};

// Each item of a Python list (or the one object) through `f`.
template <class T, class F>
std::vector<T> one_or_many(const py::handle& h, F&& f) {
  std::vector<T> out;
  if (py::isinstance<py::list>(h) || py::isinstance<py::tuple>(h)) {
    for (const py::handle& x : h) out.push_back(f(x));
  } else {
    out.push_back(f(h));
  }
  return out;
}

go::rl::TrainConfig config_arg(const py::handle& h) {
  if (h.is_none()) return {};
  if (py::isinstance<py::dict>(h)) {
    // allow_nan=False: json.dumps writes NaN, which is no JSON, and the parser's message would not name the key
    std::string text;
    try {
      text = py::module_::import("json").attr("dumps")(h, py::arg("allow_nan") = false).cast<std::string>();
    } catch (py::error_already_set& e) {
      GO_FAIL("config: the dict cannot be written as JSON (", std::string(py::str(e.value())),
              "): its values must be numbers (finite), strings, bools, lists or dicts");
    }
    return go::rl::TrainConfig::from_json(nlohmann::json::parse(text), "config");
  }
  GO_CHECK(py::isinstance<py::str>(h), "config must be a dict, a JSON file path or None, got ",
           std::string(py::str(h.get_type())));
  return go::rl::TrainConfig::load(h.cast<std::string>());
}

PyTrainResult train(const py::object& graphs_arg, const py::object& clusters_arg, const py::object& config,
                    const py::object& updates_a, const py::object& seed_a, bool training,
                    const py::object& callback, std::optional<std::string> checkpoint, bool resume,
                    std::optional<std::string> init_policy, const py::object& threads_a,
                    std::optional<std::string> metrics) {
  GO_CHECK(callback.is_none() || PyCallable_Check(callback.ptr()), "callback must be callable or None");
  std::optional<std::int64_t> updates;
  std::optional<std::uint64_t> seed;
  std::optional<int> threads;
  if (!updates_a.is_none())
    updates = int_arg(updates_a, "gopt.train: updates", 0, std::numeric_limits<std::int64_t>::max());
  if (!seed_a.is_none()) seed = seed_arg(seed_a, "gopt.train: seed");
  if (!threads_a.is_none())
    threads = static_cast<int>(int_arg(threads_a, "gopt.train: threads", 0, std::numeric_limits<int>::max()));
  GO_CHECK(!resume || checkpoint, "resume=True needs checkpoint=<path>");
  const bool resuming = resume && std::filesystem::exists(*checkpoint);
  GO_CHECK(!resuming || config.is_none(), "resume: the run continues with the config of ", *checkpoint,
           "; pass config=None");
  GO_CHECK(!resuming || !init_policy, "resume: the run continues from ", *checkpoint, "; pass init_policy=None");

  // graphs and clusters: copies for the trainer (it owns its graphs)
  std::vector<go::OpGraph> graphs = one_or_many<go::OpGraph>(graphs_arg, [](const py::handle& x) {
    return go::OpGraph(*graph_arg(x)->g);
  });
  GO_CHECK(!graphs.empty(), "train: no graphs");
  std::vector<go::Cluster> clusters =
      one_or_many<go::Cluster>(clusters_arg, [](const py::handle& x) { return *cluster_arg(x).c; });

  go::rl::TrainConfig cfg = config_arg(config);
  PyTrainResult res;
  std::vector<go::rl::UpdateStats> history;
  bool stopped_by_error = false;
  {
    py::gil_scoped_release nogil;
    if (resuming) {
      cfg = go::rl::PpoTrainer::checkpoint_config(*checkpoint);
      GO_CHECK(!training || cfg.training, "resume: training=True differs from the checkpoint being resumed");
      GO_CHECK(!seed || *seed == cfg.seed, "resume: seed ", *seed, " differs from the seed ", cfg.seed,
               " of the checkpoint being resumed");
    } else {
      if (training) cfg.training = true;
      if (seed) cfg.seed = *seed;
    }
    if (updates) cfg.updates = *updates;
    if (threads) cfg.threads = *threads;
    cfg.validate();
    std::shared_ptr<go::policy::GoPolicy> init;
    if (init_policy) {
      std::error_code ec;
      GO_CHECK(std::filesystem::is_regular_file(*init_policy, ec), *init_policy,
               ": init_policy file not found (a policy file or a gopt train checkpoint)");
      init = go::rl::load_policy(*init_policy);
    }
    go::rl::PpoTrainer trainer(cfg, std::move(graphs), std::move(clusters), init);
    if (resuming) {
      trainer.load_checkpoint(*checkpoint);
      if (updates) trainer.set_updates(*updates);
    }
    if (metrics) go::rl::truncate_metrics_csv(*metrics, trainer.updates_done());
    const go::rl::TrainConfig& c = trainer.config();
    while (trainer.updates_done() < c.updates) {
      const go::rl::UpdateStats s = trainer.update();
      history.push_back(s);
      if (metrics) go::rl::append_metrics_csv(*metrics, s);
      if (checkpoint && c.checkpoint_every > 0 && s.update % c.checkpoint_every == 0 && s.update < c.updates)
        trainer.save_checkpoint(*checkpoint);
      // The callback (and Ctrl-C) with the GIL; a Python error stays set and ends the run.
      py::gil_scoped_acquire gil;
      if (PyErr_CheckSignals() != 0) {
        stopped_by_error = true;
        break;
      }
      if (!callback.is_none()) {
        try {
          const py::object r = callback(stats_dict(s));
          // numpy's bool (a comparison of numpy values) answers as True and False do
          const bool np_bool = py::isinstance(r, py::module_::import("numpy").attr("bool_"));
          if (r.ptr() == Py_False || (np_bool && !r.cast<bool>())) break;  // False (not a falsy None): stop early
          if (!r.is_none() && r.ptr() != Py_True && !np_bool) {
            // 0 or "stop" would otherwise read as "go on" (or as "stop" to someone else)
            const std::string msg = "gopt.train: callback must return None, True (go on) or False (stop), got " +
                                    std::string(py::repr(r)) + " (" + std::string(py::str(r.get_type().attr("__name__"))) + ")";
            PyErr_SetString(PyExc_TypeError, msg.c_str());
            stopped_by_error = true;
            break;
          }
        } catch (py::error_already_set& e) {
          e.restore();
          stopped_by_error = true;
          break;
        }
      }
    }
    if (checkpoint) trainer.save_checkpoint(*checkpoint);
    res.updates_done = trainer.updates_done();
    res.checkpoint = checkpoint;
    for (std::size_t i = 0; i < trainer.num_graphs(); ++i) {
      const go::rl::GraphTask& t = trainer.task(i);
      PyTaskResult r;
      r.name = t.name;
      r.cluster = t.sim->cluster().name;
      r.graph = std::make_shared<PyGraph>(go::OpGraph(*t.graph));
      if (std::isfinite(t.best_step_time)) r.best_plan = PyPlan{t.best_plan};
      r.best_step_time_ms = ms(t.best_step_time);
      r.reference_ms = ms(t.reference);
      r.reference_kind = t.reference_kind;
      r.anchor = t.anchor;
      r.anchor_step_time_ms = ms(t.anchor_step_time);
      r.best_update = t.best_update;
      r.samples = t.samples;
      r.invalid = t.invalid;
      res.tasks.push_back(std::move(r));
    }
  }
  if (stopped_by_error) throw py::error_already_set();
  for (const auto& s : history) res.history.append(stats_dict(s));
  return res;
}

}  // namespace

void bind_optimize(py::module_& m) {
  // GO's methods join the registry as in gopt (GO_POLICY overrides the shipped policy).
  go::rl::register_go_methods(default_policy_path());
  m.def("default_policy", &default_policy_path,
        "the policy go and go-zero-shot use without policy=: $GO_POLICY, the installed one, or the source tree's");
  py::class_<PyPlaceResult>(m, "PlaceResult", "An optimizer's plan and its simulated step.")
      .def_readonly("method", &PyPlaceResult::method)
      .def_readonly("plan", &PyPlaceResult::plan)
      .def_readonly("valid", &PyPlaceResult::valid, "False when the plan does not fit device memory")
      .def_readonly("status", &PyPlaceResult::status)
      .def_readonly("reason", &PyPlaceResult::reason)
      .def_readonly("step_time_ms", &PyPlaceResult::step_time_ms)
      .def_readonly("note", &PyPlaceResult::note, "what the method did (GO: the anchor, zero-shot and fine-tuned times)")
      .def_readonly("optimize_seconds", &PyPlaceResult::optimize_seconds)
      .def_readonly("simulations", &PyPlaceResult::simulations)
      .def_property_readonly("peak_memory_bytes", [](const PyPlaceResult& r) { return to_array(r.peak_memory); })
      .def("to_dict", &place_result_dict, "the fields of gopt place --json")
      .def("__repr__", [](const PyPlaceResult& r) {
        char b[64];
        std::snprintf(b, sizeof b, "%.3f ms", r.step_time_ms);
        return "<gopt.PlaceResult " + r.method + ": " + b + (r.valid ? "" : ", invalid: " + r.reason) + ">";
      });

  m.def("methods", &go::place_method_names, "the names gopt.place accepts");
  m.def("describe_methods", [] {
    py::dict d;
    for (const auto& x : go::place_methods()) d[py::str(x.name)] = x.help;
    return d;
  }, "{method name: one-line description}");

  m.def("place", [](const py::object& graph, const py::object& cluster, const std::string& method, const py::object& seed_a,
                    const py::object& budget_a, const std::string& fusion, const py::object& expert_a,
                    const std::string& policy, const py::object& finetune_a, bool check_colocation, const std::string& cost, double time_limit,
                    const std::string& anchor_ties, const std::string& anchor_placements, bool fit_memory,
                    const py::object& patience_a, const py::object& on_update) {
    constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
    const std::uint64_t seed = seed_arg(seed_a, "gopt.place: seed");
    const std::int64_t budget = int_arg(budget_a, "gopt.place: budget", 0, kMax);
    // -1 is the default (budget / 193, the most simulations of one update); the go methods say what else is wrong with a negative count
    const std::int64_t finetune = int_arg(finetune_a, "gopt.place: finetune", std::numeric_limits<std::int64_t>::min(), kMax);
    const std::int64_t patience = int_arg(patience_a, "gopt.place: patience", 0, kMax);
    GO_CHECK(expert_a.is_none() || py::isinstance<py::str>(expert_a),
             "gopt.place: expert takes the path of a go-plan file or a dnn-partitioning expert split, got ",
             std::string(py::str(expert_a.get_type().attr("__name__"))),
             py::isinstance<PyPlan>(expert_a) ? "; write the plan first: plan.save(path, graph)" : "");
    const std::string expert = expert_a.is_none() ? std::string() : expert_a.cast<std::string>();
    std::shared_ptr<PyGraph> g = graph_arg(graph);
    const PyCluster c = cluster_arg(cluster);
    go::PlaceOptions o;
    o.seed = seed;
    o.budget = budget;
    o.fusion = go::parse_fusion_mode(fusion);
    o.expert_split = expert;
    o.policy = policy;
    o.finetune = finetune;
    o.sim.check_colocation = check_colocation;
    o.sim.cost = go::parse_cost_source(cost);
    GO_CHECK(time_limit >= 0, "gopt.place: time_limit must be >= 0 seconds, got ", time_limit);
    o.time_limit = time_limit;
    o.patience = patience;
    // "" keeps the default; anything else must be a list of known names, each once
    auto anchor_list = [](const char* arg, const std::string& list, const std::string& known) {
      if (list.empty()) return list;
      const std::string problem = go::rl::list_problem(list, known);
      GO_CHECK(problem.empty(), "gopt.place: ", arg, " ", problem);
      return list;
    };
    o.anchor_ties = anchor_list("anchor_ties", anchor_ties, go::rl::kAnchorTieOrders);
    o.anchor_placements = anchor_list("anchor_placements", anchor_placements, go::rl::kAnchorPlacements);
    o.fit_memory = fit_memory;
    GO_CHECK(on_update.is_none() || PyCallable_Check(on_update.ptr()),
             "gopt.place: on_update takes a callable (one argument, a dict), got ",
             std::string(py::str(on_update.get_type().attr("__name__"))));
    // borrowed: the argument outlives the call, so copies of the options, which may be made without
    // the GIL, touch no reference count
    if (PyObject* fn = on_update.is_none() ? nullptr : on_update.ptr())
      o.on_update = [fn](const go::UpdateProgress& p) {
        py::gil_scoped_acquire gil;  // place runs without the GIL; an exception the callable raises ends it
        py::dict d;
        d["update"] = p.update;
        d["updates"] = p.updates;
        d["best_step_time_ms"] = std::isfinite(p.best_step_time) ? py::object(py::float_(p.best_step_time * 1e3)) : py::none();
        d["seconds"] = p.seconds;
        d["time_limit"] = p.time_limit;
        py::reinterpret_borrow<py::object>(fn)(d);  // (as a statement, `py::handle(fn)(d);` declares a variable)
      };
    // an argument away from its default that the method does not read: a UserWarning, as gopt place's note
    using go::PlaceOption;
    const std::pair<bool, std::pair<PlaceOption, const char*>> given[] = {
        {budget != 1000, {PlaceOption::budget, "budget"}},
        {time_limit != 0, {PlaceOption::time_limit, "time_limit"}},
        {fusion != "none", {PlaceOption::fusion, "fusion"}},
        {!expert.empty(), {PlaceOption::expert, "expert"}},
        {!policy.empty(), {PlaceOption::policy, "policy"}},
        {finetune != -1, {PlaceOption::finetune, "finetune"}},
        {!anchor_ties.empty(), {PlaceOption::anchor, "anchor_ties"}},
        {!anchor_placements.empty(), {PlaceOption::anchor, "anchor_placements"}},
        {patience != 0, {PlaceOption::patience, "patience"}},
        {!on_update.is_none(), {PlaceOption::progress, "on_update"}}};
    for (const auto& [set, what] : given) {
      const std::string note = set ? go::unused_option_note({method}, what.first, what.second) : std::string();
      if (!note.empty() && PyErr_WarnEx(PyExc_UserWarning, ("gopt.place: " + note).c_str(), 1) < 0)
        throw py::error_already_set();  // warnings turned into errors
    }
    PyPlaceResult out;
    {
      py::gil_scoped_release nogil;
      out = py_place_result(go::place(method, *g->g, *c.c, o));
    }
    return out;
  }, py::arg("graph"), py::arg("cluster"), py::arg("method"), py::kw_only(), py::arg("seed") = 0,
     py::arg("budget") = 1000, py::arg("fusion") = "none", py::arg("expert") = "", py::arg("policy") = "",
     py::arg("finetune") = -1, py::arg("check_colocation") = true, py::arg("cost") = "measured",
     py::arg("time_limit") = 0.0, py::arg("anchor_ties") = "", py::arg("anchor_placements") = "",
     py::arg("fit_memory") = false, py::arg("patience") = 0, py::arg("on_update") = py::none(), R"doc(
Optimizes the graph on the cluster with one method of gopt.methods() and simulates the plan, as
gopt place does (same options, same numbers for the same seed). seed: every random choice;
budget: simulations of random/anneal; fusion: "none" or "xla" (not for anneal and go, which choose fusion); expert: the path of human's expert split or go-plan file (a gopt.Plan: plan.save(path, graph) first; also random's and anneal's human start, and the human placement of GO's anchor);
policy: go/go-zero-shot's policy file (default gopt.default_policy()); finetune: go's PPO updates
of 128 samples, each followed by 2 x 32 critical-path moves (the first also by gather moves), and anchor-search's rounds (-1: budget / 193, the most simulations of one update); cost: "measured" or "roofline" (measured op times ignored, as gopt place --cost);
time_limit: seconds of anneal, anneal-anchor, anchor-search, hdp, hdp-tuned, go, go-one and exact (0: none; exact then 60 s;
exact's is CBC's limit, checked between its search steps, so a solve can end a step late);
anchor_ties: best-heuristic, anneal-anchor, anchor-search and the go methods: the orders of one priority level's ops GO's
anchor is chosen from, of "program,first-ready,latest,depth-first" ("": "program,first-ready"; latest and
first-ready when not listed are tried on the anchor's best four candidates as answers only; the
pipelined candidates are in depth-first order whatever is listed), as gopt place --anchor-ties;
anchor_placements: the same methods: the placements GO's anchor starts from, of
"default,human,pipeline,metis,m-etf,m-sct,heft,fit,spread,depth-first,relabel" ("": all; fit: the fastest
candidate that runs out of memory fitted to it; depth-first: the two best pipelined, and the spread one;
relabel: the best with its devices relabelled for the links), as gopt place --anchor-placements;
fit_memory: every method: a plan that runs out of memory has op sets moved off the devices that
overflow until it fits (the note says how many; off by default), as gopt place --fit-memory;
patience: go, go-one and anchor-search stop fine-tuning after this many updates (rounds) in a row
that found no faster plan (0: never), as gopt place --patience;
on_update: a callable that anchor-search, go and go-one call after each update (round) with a dict
{"update": done, "updates": asked (0 where the time limit alone ends them), "best_step_time_ms":
the best valid plan so far (None: none yet), "seconds": since the start, "time_limit"}, for
progress (gopt place --progress); the other methods never call it; an exception it raises ends the
call and comes back from gopt.place.
An argument away from its default that the method does not read (policy for "human", fusion for a
method that chooses fusion itself, ...) gives a UserWarning naming the methods that read it, as
gopt place's note on stderr. A plan that does not fit memory comes back with valid False.)doc");

  m.def("fit_memory", [](const py::object& graph, const py::object& cluster, const py::object& plan,
                         bool check_colocation, const std::string& cost) {
    std::shared_ptr<PyGraph> g = graph_arg(graph);
    const PyCluster c = cluster_arg(cluster);
    static const go::Plan empty;
    go::PlaceResult r;
    r.method = "fit-memory";
    r.plan = plan_arg(plan, empty);
    go::SimOptions so;
    so.check_colocation = check_colocation;
    so.cost = go::parse_cost_source(cost);
    {
      py::gil_scoped_release nogil;
      if (r.plan.device.empty()) r.plan = go::default_plan(*g->g);
      go::evaluate_plan(*g->g, *c.c, r.plan, r, so);
      go::fit_result_to_memory(*g->g, *c.c, so, r);
    }
    return py_place_result(std::move(r));
  }, py::arg("graph"), py::arg("cluster"), py::arg("plan") = py::none(), py::kw_only(),
     py::arg("check_colocation") = true, py::arg("cost") = "measured", R"doc(
Fits a plan (None: every op on device 0) that runs out of memory to it, as gopt place --fit-memory
fits a method's plan (include/go/baselines/memory_fit.hpp): op sets (forward ops with their training
ops) moved off the device that overflows most onto those with the most room, each trial simulated,
until it fits; priorities are kept, fusion groups a move splits run unfused. Returns a
gopt.PlaceResult (method "fit-memory"): the fitted plan and its simulation where one fits, else the
plan as it was (valid False); its note says how many op sets moved and simulations were made. A plan
that fits, or a one-device cluster, comes back as it is, simulated once; so does a plan invalid for
another reason (a device the cluster lacks), with valid False, its reason, and a note saying so.)doc");

  py::class_<PyTaskResult>(m, "TrainTask", "One graph (on one cluster) of a training run.")
      .def_readonly("name", &PyTaskResult::name)
      .def_readonly("cluster", &PyTaskResult::cluster)
      .def_readonly("graph", &PyTaskResult::graph, "the graph trained on (the training graph with training=True)")
      .def_readonly("best_plan", &PyTaskResult::best_plan, "the best valid plan sampled, None if none was valid")
      .def_readonly("best_step_time_ms", &PyTaskResult::best_step_time_ms)
      .def_readonly("best_update", &PyTaskResult::best_update)
      .def_readonly("reference_ms", &PyTaskResult::reference_ms)
      .def_readonly("reference_kind", &PyTaskResult::reference_kind)
      .def_readonly("anchor", &PyTaskResult::anchor)
      .def_readonly("anchor_step_time_ms", &PyTaskResult::anchor_step_time_ms)
      .def_readonly("samples", &PyTaskResult::samples)
      .def_readonly("invalid", &PyTaskResult::invalid);
  py::class_<PyTrainResult>(m, "TrainResult", "What gopt.train did.")
      .def_readonly("updates_done", &PyTrainResult::updates_done)
      .def_readonly("history", &PyTrainResult::history, "one dict per update of this call (the metrics CSV's columns)")
      .def_readonly("tasks", &PyTrainResult::tasks)
      .def_readonly("checkpoint", &PyTrainResult::checkpoint);

  m.def("train", &train, py::arg("graphs"), py::arg("cluster"), py::arg("config") = py::none(), py::kw_only(),
        py::arg("updates") = py::none(), py::arg("seed") = py::none(), py::arg("training") = false,
        py::arg("callback") = py::none(), py::arg("checkpoint") = py::none(), py::arg("resume") = false,
        py::arg("init_policy") = py::none(), py::arg("threads") = py::none(), py::arg("metrics") = py::none(), R"doc(
Trains the GO policy with PPO, as gopt train does. graphs: a gopt.Graph, path or zoo spec, or a list;
cluster: a gopt.Cluster or preset / JSON path, or a list (one task per graph and cluster). config: a
dict or a JSON file of go/rl/config.hpp's TrainConfig (defaults when None); updates, seed and
threads override it; training=True expands the graphs into training graphs. callback(stats) runs
after every update with that update's stats (a dict); returning False stops early, None or True
goes on, anything else is a TypeError; raising stops and re-raises. checkpoint: file written at the end (and every config checkpoint_every updates);
resume=True continues from it when it exists. init_policy: start from a pre-trained policy's
weights. metrics: a CSV of every update. The GIL is released while training.)doc");
}

}  // namespace gopt_py
