// gopt train: PPO on one graph or a set of graphs (include/go/rl/ppo.hpp). Under an MPI launcher
// (`mpirun -np N gopt train ...`, builds with MPI) the N processes train together
// (go/rl/distributed.hpp): same options, same checkpoints; rank 0 alone writes the checkpoint, the
// metrics, the plan and the progress lines. Without a launcher MPI is not initialized at all.
#include "train.hpp"

#include "format.hpp"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <new>
#include <vector>

#include <nlohmann/json.hpp>

#include "go/core/error.hpp"
#include "go/core/file.hpp"
#include "go/core/json_field.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/load.hpp"
#include "go/rl/all.hpp"
#include "go/rl/distributed.hpp"
#include "go/sim/sim.hpp"
#if defined(GO_HAVE_MPI)
#include "go/rl/mpi.hpp"
#endif

namespace gopt {
namespace {

struct TrainOptions {
  std::string graphs;    // comma-separated
  std::string clusters;
  std::string config;
  std::string out = "gopt-train.ckpt";
  std::string metrics;
  std::string plan_out;
  std::string init_policy;
  std::int64_t updates = -1;
  std::optional<std::uint64_t> seed;  // the config's unless given
  int threads = -1;
  std::int64_t stop_after = -1;
  double time_limit = -1;
  bool training = false;
  bool resume = false;
  bool quiet = false;
};

void run_train(const TrainOptions& o, go::rl::Communicator& comm) {
  const std::vector<std::string> graph_specs = split_list(o.graphs), cluster_names = split_list(o.clusters);
  GO_CHECK(!graph_specs.empty(), "--graphs names no graph (got '", o.graphs, "')");
  GO_CHECK(!cluster_names.empty(), "--cluster names no cluster (got '", o.clusters, "')");
  GO_CHECK(!o.out.empty(), "--out must not be empty");
  const bool root = comm.rank() == 0;
  // 1: the checkpoint is there, 0: it is not, -1: the path cannot be looked at (a symlink loop, a
  // name too long); rank 0 decides and tells every rank before any of them fails, so none waits
  auto look = [&](std::string* why) -> std::int32_t {
    std::error_code ec;
    const bool there = std::filesystem::exists(o.out, ec);
    if (ec && why) *why = ec.message();
    return ec ? -1 : there ? 1 : 0;
  };
  std::string why;
  std::int32_t resume_flag = o.resume && root ? look(&why) : 0;
  comm.broadcast(&resume_flag, sizeof resume_flag, 0);  // every rank loads the checkpoint
  GO_CHECK(resume_flag >= 0, o.out, ": cannot look for the checkpoint to resume: ",
           why.empty() ? std::string("rank 0 could not") : why);
  const bool resuming = resume_flag != 0;
  GO_CHECK(!resuming || look(nullptr) == 1, "rank ", comm.rank(), ": the checkpoint ", o.out,
           " being resumed is missing here (every machine needs it at the same path)");
  // with --init-policy the network comes from the policy file unless the config names one
  const bool config_policy = !o.init_policy.empty() && !o.config.empty() &&
                             go::parse_json_config(go::read_file(o.config), o.config, /*comments=*/true).contains("policy");
  go::rl::TrainConfig cfg;
  if (resuming) {
    cfg = go::rl::PpoTrainer::checkpoint_config(o.out);
    if (!o.config.empty()) {
      go::rl::TrainConfig given = go::rl::TrainConfig::load(o.config);
      if (!o.init_policy.empty() && !config_policy) given.policy = cfg.policy;  // the checkpoint's network
      given.updates = cfg.updates;
      given.threads = cfg.threads;
      given.checkpoint_every = cfg.checkpoint_every;
      GO_CHECK(given.to_json() == cfg.to_json(), o.config, ": differs from the config of the checkpoint ", o.out,
               " being resumed (drop --config to resume with the checkpoint's)");
    }
  } else if (!o.config.empty()) {
    cfg = go::rl::TrainConfig::load(o.config);
  }
  if (!resuming) {
    if (o.training) cfg.training = true;
    if (o.seed) cfg.seed = *o.seed;
  } else {
    GO_CHECK(!o.training || cfg.training, "--training differs from the checkpoint being resumed");
    GO_CHECK(!o.seed || *o.seed == cfg.seed, "--seed ", o.seed.value_or(0),
             " differs from the seed ", cfg.seed, " of the checkpoint being resumed");
  }
  if (o.updates >= 0) cfg.updates = o.updates;
  if (o.threads >= 0) cfg.threads = o.threads;
  cfg.validate();

  // A new run may start from a pre-trained policy; its network replaces the config's "policy". A
  // resumed run continues from its checkpoint (which already holds those weights), so the same
  // command line can be re-run with --resume.
  std::shared_ptr<go::policy::GoPolicy> init;
  if (!o.init_policy.empty() && !resuming) {
    std::error_code ec;
    GO_CHECK(std::filesystem::is_regular_file(o.init_policy, ec), o.init_policy,
             ": --init-policy file not found (a policy file or a gopt train checkpoint, e.g. policies/go-zoo-v100x248.ckpt)");
    init = go::rl::load_policy(o.init_policy);
    GO_CHECK(!config_policy || cfg.policy.to_json() == init->config().to_json(), o.config,
             ": its \"policy\" section differs from the network of --init-policy ", o.init_policy,
             " (drop the section: the network comes from the policy file)");
  }

  std::vector<go::Cluster> clusters;
  for (const auto& name : cluster_names) clusters.push_back(go::load_cluster(name));
  std::vector<go::OpGraph> graphs;
  for (const auto& g : graph_specs) graphs.push_back(go::load_graph(g));
  go::rl::PpoTrainer trainer(cfg, std::move(graphs), std::move(clusters), init);
  const std::string metrics = o.metrics.empty() ? o.out + ".csv" : o.metrics;
  if (resuming) {
    trainer.load_checkpoint(o.out);
    if (o.updates >= 0) trainer.set_updates(o.updates);
  }
  trainer.set_communicator(std::shared_ptr<go::rl::Communicator>(&comm, [](go::rl::Communicator*) {}));
  if (root) go::rl::truncate_metrics_csv(metrics, trainer.updates_done());

  const go::rl::TrainConfig& c = trainer.config();
  const bool quiet = o.quiet || !root;
  if (!quiet) {
    char procs[32] = "1 process";
    if (comm.size() > 1) std::snprintf(procs, sizeof procs, "%d ranks", comm.size());
    std::string on;  // "v100x4 (4 devices), ..."
    for (const auto& cl : trainer.clusters())
      on += (on.empty() ? "" : ", ") + cl.name + " (" + std::to_string(cl.num_devices()) + " devices)";
    std::fprintf(stderr, "gopt train: %zu graph(s) on %s, policy %lld parameters%s%s, %s%lld updates of %d samples, %s\n",
                 trainer.num_graphs() / trainer.clusters().size(), on.c_str(),
                 static_cast<long long>(trainer.policy()->num_parameters()), init ? " from " : "",
                 init ? o.init_policy.c_str() : "", resuming ? "resuming at " : "",
                 static_cast<long long>(resuming ? trainer.updates_done() : c.updates), c.samples, procs);
    for (std::size_t i = 0; i < trainer.num_graphs(); ++i) {
      const auto& t = trainer.task(i);
      std::fprintf(stderr, "  %s: %d ops, reference %.3f ms (%s)\n", t.name.c_str(), t.graph->num_ops(),
                   t.reference * 1e3, t.reference_kind.c_str());
    }
  }
  const bool tty = isatty(2);
  const std::int64_t start_update = trainer.updates_done();
  const auto t0 = std::chrono::steady_clock::now();
  std::int64_t total_samples = 0;
  auto on_update = [&](const go::rl::UpdateStats& s) {
    if (!root) return;
    go::rl::append_metrics_csv(metrics, s);
    total_samples += s.samples;
    if (c.checkpoint_every > 0 && s.update % c.checkpoint_every == 0 && s.update < c.updates)
      trainer.save_checkpoint(o.out);
    if (quiet) return;
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double per = el / static_cast<double>(s.update - start_update);
    char best[96] = "none valid";
    // with several graphs one step time would be one graph's (the update's first): their mean speedup
    if (trainer.num_graphs() > 1)
      std::snprintf(best, sizeof best, "speedup %.2fx (mean over the update's graphs)", s.best_speedup);
    else if (std::isfinite(s.best_step_time))
      std::snprintf(best, sizeof best, "%.3f ms (%.2fx)", s.best_step_time * 1e3, s.best_speedup);
    std::fprintf(stderr, "%supdate %lld/%lld  best %s  reward %.3f  entropy %.3f  kl %.4f  invalid %.0f%%  %.0f samples/s  ETA %s%s",
                 tty ? "\r\033[K" : "", static_cast<long long>(s.update), static_cast<long long>(c.updates), best,
                 s.mean_reward, s.entropy, s.approx_kl, 100 * s.invalid_fraction,
                 el > 0 ? static_cast<double>(total_samples) / el : 0.0,
                 duration_text(per * static_cast<double>(c.updates - s.update)).c_str(), tty ? "" : "\n");
    std::fflush(stderr);
  };
  // rank 0's clock decides, so that every rank stops after the same update; the first update of an
  // invocation always runs (the limit ends the update that reaches it), and 0 is no limit, as in place
  auto within_time = [&] {
    std::int32_t ok = o.time_limit <= 0 || trainer.updates_done() == start_update ||
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < o.time_limit;
    comm.broadcast(&ok, sizeof ok, 0);
    return ok != 0;
  };
  while (trainer.updates_done() < c.updates &&
         (o.stop_after < 0 || trainer.updates_done() - start_update < o.stop_after) && within_time())
    on_update(trainer.update());
  if (!quiet && tty) std::fputc('\n', stderr);
  trainer.save_checkpoint(o.out);
  if (!root) return;
  for (std::size_t i = 0; i < trainer.num_graphs(); ++i) {
    const auto& t = trainer.task(i);
    if (std::isfinite(t.best_step_time))
      std::printf("%s: best %.3f ms (%.2fx the %s reference %.3f ms), found at update %lld\n", t.name.c_str(),
                  t.best_step_time * 1e3, t.reference / t.best_step_time, t.reference_kind.c_str(), t.reference * 1e3,
                  static_cast<long long>(t.best_update));
    else
      std::printf("%s: no valid plan found in %lld samples\n", t.name.c_str(), static_cast<long long>(t.samples));
  }
  if (!o.plan_out.empty()) {
    const auto& t = trainer.task(0);
    GO_CHECK(std::isfinite(t.best_step_time), "no valid plan of ", t.name, " to write to ", o.plan_out);
    go::save_plan(t.best_plan, *t.graph, o.plan_out);
  }
  std::printf("checkpoint %s, metrics %s\n", o.out.c_str(), metrics.c_str());
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto o = std::make_shared<TrainOptions>();
  CLI::App* cmd = app.add_subcommand("train", "Train the GO policy with PPO on one graph or a set of graphs "
                                   "(under `mpirun -np N`: N processes train together; builds with MPI)");
  cmd->add_option("--graphs", o->graphs, "Graph files or zoo:<name>, comma-separated")->required();
  cmd->add_option("--cluster", o->clusters,
                  "Cluster preset (v100x4, ...) or go-cluster JSON file; several, comma-separated, train one policy on "
                  "each graph on each cluster")
      ->required();
  cmd->add_option("--config", o->config, "Training config JSON (go/rl/config.hpp; defaults otherwise)")->check(path_given());
  cmd->add_option("--updates", o->updates, "PPO updates (overrides the config)")->check(count_at_least());
  cmd->add_option("--out", o->out, "Checkpoint file (default gopt-train.ckpt)")->check(path_given());
  cmd->add_flag("--resume", o->resume, "Continue from the checkpoint at --out when it exists (the same graphs and clusters: a checkpoint keeps a checksum of each)");
  cmd->add_option("--init-policy", o->init_policy,
                  "Start a new run from this policy's weights (a policy file or a gopt train checkpoint, e.g. "
                  "policies/go-zoo-v100x248.ckpt); its network replaces the config's \"policy\"; a run that "
                  "--resume continues keeps its checkpoint's weights")->check(path_given());
  cmd->add_option("--metrics", o->metrics, "Metrics CSV (default <out>.csv)")->check(path_given());
  cmd->add_option("--plan-out", o->plan_out, "Write the best plan of the first graph as a go-plan JSON")->check(path_given());
  cmd->add_flag("--training", o->training, "Expand the graphs into training graphs (forward + backward + update)");
  cmd->add_option_function<std::uint64_t>(
         "--seed", [o](const std::uint64_t& v) { o->seed = v; }, "Sampling seed (overrides the config's \"seed\")")
      ->check(seed_value());
  cmd->add_option("--threads", o->threads, "Simulation threads (0: all cores; results do not depend on it)")
      ->check(count_at_least());
  cmd->add_option("--time-limit", o->time_limit,
                  "Stop (checkpointing) after the update that reaches this many seconds of training in this "
                  "invocation (the graphs and anchors are built before the clock starts; at least one update runs; 0: no "
                  "limit); --resume continues")
      ->check(seconds_at_least_zero());
  cmd->add_flag("--quiet", o->quiet, "No progress lines");
  cmd->add_option("--stop-after", o->stop_after,
                  "Stop (checkpointing) after this many updates of this invocation, as an interrupted run would")
      ->check(count_at_least());
  cmd->callback([o]() {
#if defined(GO_HAVE_MPI)
    go::rl::MpiSession mpi(nullptr, nullptr);  // MPI only under mpirun/mpiexec/srun
    // An error on one rank would leave the others waiting in a collective: end the whole job.
    auto fail = [&mpi](const char* what) {
      if (mpi.communicator()->size() > 1) {
        std::fprintf(stderr, "gopt train (rank %d): %s\n", mpi.communicator()->rank(), what);
        std::fflush(stderr);
        mpi.abort(1);
      }
      std::fprintf(stderr, "gopt train: %s\n", what);
      throw CLI::RuntimeError(1);
    };
    const auto comm = mpi.communicator();
#else
    auto fail = [](const char* what) {
      std::fprintf(stderr, "gopt train: %s\n", what);
      throw CLI::RuntimeError(1);
    };
    const auto comm = go::rl::local_communicator();
#endif
    try {
      run_train(*o, *comm);
    } catch (const go::Error& e) {
      fail(e.what());
    } catch (const std::bad_alloc&) {
      fail("out of host memory");
    } catch (const nlohmann::json::exception& e) {
      fail(e.what());
    }
  });
}

}  // namespace gopt
