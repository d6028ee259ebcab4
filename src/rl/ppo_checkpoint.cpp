// PpoTrainer's checkpoints (go/rl/ppo.hpp): save_checkpoint, load_checkpoint and the configs and
// policies read from parameter files, compiled once into libgo.
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "go/core/error.hpp"
#include "go/core/hash.hpp"
#include "go/nn/serialize.hpp"
#include "go/rl/ppo.hpp"
#include "go/sim/plan.hpp"

namespace go::rl {

void PpoTrainer::save_checkpoint(const std::string& path) const {
  if (comm_->rank() != 0) return;
  NamedTensors t;
  const auto named = policy_->named_parameters();
  for (const auto& [n, p] : named) t.emplace_back("policy/" + n, p.value());
  for (std::size_t i = 0; i < named.size(); ++i) t.emplace_back("adam.m/" + named[i].first, adam_->first_moments()[i]);
  for (std::size_t i = 0; i < named.size(); ++i) t.emplace_back("adam.v/" + named[i].first, adam_->second_moments()[i]);
  nlohmann::json graphs = nlohmann::json::array();
  for (const auto& tp : tasks_) {
    const GraphTask& g = *tp;
    nlohmann::json best = nullptr;
    if (std::isfinite(g.best_step_time))
      best = {{"step_time", g.best_step_time},
              {"update", g.best_update},
              {"device", g.best_plan.device},
              {"priority", g.best_plan.priority},
              {"fusion", g.best_plan.fusion}};
    graphs.push_back({{"name", g.name},
                      {"num_ops", g.graph->num_ops()},
                      {"cluster", g.sim->cluster().name},
                      {"num_devices", g.sim->cluster().num_devices()},
                      {"graph_fingerprint", hex64(graph_fingerprint(*g.graph))},
                      {"cluster_fingerprint", hex64(cluster_fingerprint(g.sim->cluster()))},
                      {"reference", g.reference},
                      {"reference_kind", g.reference_kind},
                      {"ema", g.ema},
                      {"ema_init", g.ema_init},
                      {"samples", g.samples},
                      {"invalid", g.invalid},
                      {"best", best}});
    if (cfg_.reanchor && g.pg.has_anchor())  // moved by the updates: a resumed run needs it
      graphs.back()["anchor"] = actions_json({g.pg.anchor_device, g.pg.anchor_priority, g.pg.anchor_fuse});
    if (!g.starts.empty()) {
      nlohmann::json st = nlohmann::json::array();
      for (const auto& [a, time] : g.starts) {
        st.push_back(actions_json(a));
        st.back()["step_time"] = time;
      }
      graphs.back()["starts"] = std::move(st);
    }
  }
  nlohmann::json meta = {{"format", "go-ppo-checkpoint"},
                         {"version", 1},
                         {"config", cfg_.to_json()},
                         {"cluster", clusters_.front().name},
                         {"num_devices", clusters_.front().num_devices()},
                         {"updates_done", updates_done_},
                         {"adam_step", adam_->step_count()},
                         {"graphs", graphs}};
  save_tensors(path, t, meta);
}

void PpoTrainer::load_checkpoint(const std::string& path) {
  LoadedTensors lt = load_tensors(path);
  const std::optional<TrainConfig> saved_cfg = saved_config(lt, path);
  GO_CHECK(saved_cfg, path, ": not a PPO checkpoint (a policy file? resume from the checkpoint gopt train wrote)");
  const TrainConfig& saved = *saved_cfg;
  try {
    auto comparable = [](const TrainConfig& c) {
      nlohmann::json j = c.to_json();
      j.erase("updates");
      j.erase("threads");
      j.erase("checkpoint_every");
      return j;
    };
    GO_CHECK(comparable(saved) == comparable(cfg_), path,
             ": the checkpoint's config differs from this run's (resume with the checkpoint's config)");
    const auto& graphs = lt.meta.at("graphs");
    const std::int32_t levels = cfg_.policy.priority_levels;
    GO_CHECK(graphs.size() == tasks_.size(), path, ": checkpoint of ", graphs.size(), " graph(s), this run has ",
             tasks_.size());
    std::unordered_map<std::string, const Tensor*> by_name;
    for (const auto& [n, t] : lt.tensors) by_name[n] = &t;
    const auto named = policy_->named_parameters();
    auto restore = [&](const std::string& key, Tensor& dst) {
      auto it = by_name.find(key);
      GO_CHECK(it != by_name.end(), path, ": tensor '", key, "' missing");
      GO_CHECK(it->second->shape() == dst.shape(), path, ": tensor '", key, "' is ", it->second->describe(),
               ", expected ", dst.describe());
      dst.copy_from(*it->second);
    };
    for (std::size_t i = 0; i < named.size(); ++i) {
      Tensor v = named[i].second.value();
      restore("policy/" + named[i].first, v);
      restore("adam.m/" + named[i].first, adam_->first_moments()[i]);
      restore("adam.v/" + named[i].first, adam_->second_moments()[i]);
    }
    for (std::size_t i = 0; i < tasks_.size(); ++i) {
      GraphTask& g = *tasks_[i];
      const auto& j = graphs[i];
      // (checkpoints of single-cluster runs before per-graph clusters: the top-level count)
      const int nd = j.contains("num_devices") ? j.at("num_devices").get<int>() : lt.meta.at("num_devices").get<int>();
      GO_CHECK(nd == g.sim->cluster().num_devices(), path, ": graph ", i, " of the checkpoint ran on a ", nd,
               "-device cluster, this run's on ", g.sim->cluster().num_devices());
      GO_CHECK(j.at("name").get<std::string>() == g.name && j.at("num_ops").get<std::int32_t>() == g.graph->num_ops(),
               path, ": graph ", i, " of the checkpoint is '", j.at("name").get<std::string>(), "' (",
               j.at("num_ops").get<std::int32_t>(), " ops), this run's is '", g.name, "' (", g.graph->num_ops(),
               " ops)");
      // (checkpoints written before the fingerprints: name, op count and device count only)
      GO_CHECK(!j.contains("graph_fingerprint") ||
                   j.at("graph_fingerprint").get<std::string>() == hex64(graph_fingerprint(*g.graph)),
               path, ": graph ", i, " of the checkpoint is '", g.name, "' of ", g.graph->num_ops(),
               " ops too, but its sizes or costs differ from this run's (another option of the zoo spec, or an "
               "edited file?): resume with the graph the checkpoint was trained on");
      if (j.contains("cluster_fingerprint") &&
          j.at("cluster_fingerprint").get<std::string>() != hex64(cluster_fingerprint(g.sim->cluster())))
        GO_FAIL(path, ": graph ", i, " of the checkpoint ran on cluster '", j.at("cluster").get<std::string>(),
                "', this run's is '", g.sim->cluster().name, "'",
                j.at("cluster").get<std::string>() == g.sim->cluster().name ? " with other devices or links" : "",
                ": its best plans and reward reference were measured there; resume with that cluster");
      g.reference = j.at("reference").get<double>();
      g.reference_kind = j.at("reference_kind").get<std::string>();
      g.ema = j.at("ema").get<double>();
      g.ema_init = j.at("ema_init").get<bool>();
      g.samples = j.at("samples").get<std::int64_t>();
      g.invalid = j.at("invalid").get<std::int64_t>();
      const auto& b = j.at("best");
      if (b.is_null()) {
        g.best_step_time = kInf;
        g.best_plan = Plan{};
        g.best_update = -1;
      } else {
        g.best_step_time = b.at("step_time").get<double>();
        g.best_update = b.at("update").get<std::int64_t>();
        g.best_plan.device = b.at("device").get<std::vector<std::int32_t>>();
        g.best_plan.priority = b.at("priority").get<std::vector<float>>();
        g.best_plan.fusion = b.at("fusion").get<std::vector<std::int32_t>>();
        check_plan_sizes(g.best_plan, g.graph->num_ops(), path + ": best plan: ");
        const std::string bad = check_plan(*g.graph, g.best_plan, nd, /*check_colocation=*/false, /*check_fusion_rules=*/false);
        GO_CHECK(bad.empty(), path, ": graph ", i, "'s best plan: ", bad);
        GO_CHECK(std::isfinite(g.best_step_time) && g.best_step_time > 0, path, ": graph ", i, "'s best step time is ",
                 g.best_step_time);
      }
      if (j.contains("anchor") && g.pg.has_anchor()) {
        policy::Actions a = actions_from_json(j.at("anchor"), g.pg.num_nodes, path + ": graph " + std::to_string(i) + "'s anchor",
                                              nd, levels);
        g.pg.set_anchor(std::move(a.device), std::move(a.priority), std::move(a.fuse));
      }
      if (j.contains("starts")) {
        const auto& st = j.at("starts");
        GO_CHECK(st.size() == g.starts.size(), path, ": graph ", i, " has ", st.size(),
                 " other starting points in the checkpoint, this run chose ", g.starts.size());
        for (std::size_t k = 0; k < st.size(); ++k)
          g.starts[k] = {actions_from_json(st[k], g.pg.num_nodes,
                                           path + ": graph " + std::to_string(i) + "'s starting point " + std::to_string(k),
                                           nd, levels),
                         st[k].at("step_time").get<double>()};
      }
    }
    updates_done_ = lt.meta.at("updates_done").get<std::int64_t>();
    const long long adam_step = lt.meta.at("adam_step").get<long long>();
    GO_CHECK(updates_done_ >= 0 && adam_step >= 0, path, ": the checkpoint is at update ", updates_done_, ", Adam step ",
             adam_step, " (neither can be negative)");
    adam_->set_step_count(adam_step);
    cfg_.updates = saved.updates;
  } catch (const nlohmann::json::exception& e) {
    GO_FAIL(path, ": malformed checkpoint metadata: ", e.what());
  }
}

std::optional<TrainConfig> PpoTrainer::saved_config(const LoadedTensors& lt, const std::string& path) {
  const nlohmann::json& m = lt.meta;
  if (!m.is_object() || !m.contains("format") || m.at("format") != "go-ppo-checkpoint") return std::nullopt;
  GO_CHECK(m.contains("config"), path, ": a PPO checkpoint without its training config (\"config\" in its metadata)");
  return TrainConfig::from_saved_json(m.at("config"), path + ": config");
}

TrainConfig PpoTrainer::checkpoint_config(const std::string& path) {
  const std::optional<TrainConfig> c = saved_config(load_tensors(path), path);
  GO_CHECK(c, path, ": not a PPO checkpoint");
  return *c;
}

nlohmann::json PpoTrainer::actions_json(const policy::Actions& a) {
  auto ints = [](const Tensor& t) {
    return std::vector<std::int32_t>(t.data<std::int32_t>(), t.data<std::int32_t>() + t.numel());
  };
  return {{"device", ints(a.device)}, {"priority", ints(a.priority)}, {"fuse", ints(a.fuse)}};
}
policy::Actions PpoTrainer::actions_from_json(const nlohmann::json& j, std::int64_t rows, const std::string& what,
                                              std::int32_t devices, std::int32_t levels) {
  auto tensor = [&](const char* key, std::int32_t end) {
    const auto v = j.at(key).get<std::vector<std::int32_t>>();
    GO_CHECK(static_cast<std::int64_t>(v.size()) == rows, what, " has ", v.size(), " ", key, " actions for ", rows,
             " ops");
    for (std::size_t r = 0; r < v.size(); ++r)  // the checksum covers the tensors, not this metadata
      GO_CHECK(v[r] >= 0 && v[r] < end, what, " has ", key, " action ", v[r], " at row ", r, " (need 0 to ", end - 1, ")");
    Tensor t = Tensor::empty(Shape{rows}, DType::i32);
    std::copy(v.begin(), v.end(), t.data<std::int32_t>());
    return t;
  };
  return {tensor("device", devices), tensor("priority", levels), tensor("fuse", 2)};
}

std::shared_ptr<policy::GoPolicy> load_policy(const std::string& path) { return load_policy(load_tensors(path), path); }

std::shared_ptr<policy::GoPolicy> load_policy(const LoadedTensors& lt, const std::string& path) {
  const std::optional<TrainConfig> c = PpoTrainer::saved_config(lt, path);
  if (!c) return policy::GoPolicy::load_policy(lt, path);
  auto p = std::make_shared<policy::GoPolicy>(c->policy);
  std::unordered_map<std::string, const Tensor*> by_name;
  for (const auto& [n, t] : lt.tensors) by_name[n] = &t;
  for (auto& [n, v] : p->named_parameters()) {
    auto it = by_name.find("policy/" + n);
    GO_CHECK(it != by_name.end() && it->second->shape() == v.shape(), path, ": policy tensor '", n,
             "' missing or of the wrong shape");
    Tensor dst = v.value();
    dst.copy_from(*it->second);
  }
  return p;
}

}  // namespace go::rl
