// Distributed PPO over MPI (go/rl/distributed.hpp, go/rl/mpi.hpp). Run by ctest as
// `mpirun --oversubscribe -np 2 test_mpi` (tests/CMakeLists.txt); any rank count works. Checks,
// for a single-graph run and a pre-training run (graphs_per_update, value baseline, plan ratio,
// KL early stop):
//   - after several updates every rank holds bit-identical parameters and statistics;
//   - the sampled plans equal those of one process (first update: the same rewards, bit for bit);
//   - the parameters match a one-process run of the same config (on rank 0, in this program)
//     within floating-point tolerance, and so do the statistics and the best plans;
//   - only rank 0 writes checkpoints, and a checkpoint of the distributed run resumed on every
//     rank continues exactly like the uninterrupted distributed run.
// Exit status 0 when every check passed on every rank.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "go/graph/graph.hpp"
#include "go/nn/serialize.hpp"
#include "go/rl/all.hpp"
#include "go/rl/distributed.hpp"
#include "go/rl/mpi.hpp"
#include "go/sim/sim.hpp"
#include "rl_fixtures.hpp"

using namespace go;
using namespace go::rl;

namespace {

int failures = 0;
int my_rank = 0;

void expect(bool ok, const std::string& what) {
  if (ok) return;
  ++failures;
  std::fprintf(stderr, "rank %d: FAILED: %s\n", my_rank, what.c_str());
}

// `width` chains of `len` ops with different FLOPs, a join at the end.
OpGraph chains(const std::string& name, int width, int len) {
  GraphInfo info;
  info.name = name;
  GraphBuilder b(info);
  std::int64_t id = 0;
  std::vector<std::int64_t> ends;
  for (int c = 0; c < width; ++c)
    for (int i = 0; i < len; ++i) {
      OpSpec s;
      s.name = name + "_" + std::to_string(c) + "_" + std::to_string(i);
      s.kind = c % 2 ? OpKind::conv : OpKind::matmul;
      s.flops = 1e9 * (1 + c) * (1 + i % 3);
      TensorSpec t;
      t.shape = {64, 64};
      s.outputs.push_back(t);
      if (i > 0) s.inputs.push_back(TensorRef{id - 1, 0});
      b.add_op(std::move(s));
      if (i == len - 1) ends.push_back(id);
      ++id;
    }
  OpSpec j;
  j.name = name + "_join";
  j.kind = OpKind::add;
  TensorSpec t;
  t.shape = {64, 64};
  j.outputs.push_back(t);
  for (std::int64_t e : ends) j.inputs.push_back(TensorRef{e, 0});
  b.add_op(std::move(j));
  return b.build();
}

Cluster two_devices() {
  Cluster c = Cluster::uniform("tiny2", DeviceSpec::v100(), 2, 25e9, 2e-5);
  c.devices[1].spec.peak_flops *= 4;
  return c;
}

TrainConfig tiny_config() {
  TrainConfig c;
  c.policy = go::test::tiny_policy_config(7);
  c.seed = 11;
  c.updates = 4;
  c.samples = 6;
  c.epochs = 3;
  c.minibatch = 4;  // minibatches of 4 and 2: uneven shares
  c.lr = 3e-3;
  c.threads = 1;
  return c;
}

// All parameters and Adam moments, concatenated.
std::vector<float> state_of(const PpoTrainer& t, const std::string& path_for_moments) {
  std::vector<float> out;
  for (const auto& [n, p] : t.policy()->named_parameters()) {
    const Tensor& v = p.value();
    out.insert(out.end(), v.f32(), v.f32() + v.numel());
  }
  if (!path_for_moments.empty()) {  // the moments, through a checkpoint (rank 0 writes it)
    const LoadedTensors lt = load_tensors(path_for_moments);
    for (const auto& [n, v] : lt.tensors)
      if (n.rfind("adam.", 0) == 0) out.insert(out.end(), v.f32(), v.f32() + v.numel());
  }
  return out;
}

// Every rank holds rank 0's bits.
bool same_on_all_ranks(Communicator& comm, std::vector<float> mine) {
  std::vector<float> root = mine;
  std::uint64_t n = root.size();
  comm.broadcast(&n, sizeof n, 0);
  if (n != mine.size()) return false;  // (a collective mismatch would hang; sizes come from the config)
  comm.broadcast(root.data(), root.size(), 0);
  double diff = std::memcmp(root.data(), mine.data(), mine.size() * sizeof(float)) != 0 ? 1.0 : 0.0;
  return comm.allreduce_sum(diff) == 0.0;
}

// How close R ranks must come to one process. All zero: bit-identical parameters and Adam
// moments. path: bound on |theta_R - theta_1| / |theta_1 - theta_0| (theta_0: the initial
// parameters); stats: relative bound on the gradient-phase statistics (entropy, value loss);
// first_moment: bound on |m_R - m_1| / |m_1| of Adam's first moments (after one step: the
// averaged gradient itself); 0 leaves a bound out.
struct Tolerance {
  double path = 0, stats = 0, first_moment = 0;
};

// The tensors of a checkpoint whose names start with `prefix`, concatenated.
std::vector<float> checkpoint_values(const std::string& path, const std::string& prefix) {
  std::vector<float> out;
  for (const auto& [n, v] : load_tensors(path).tensors)
    if (n.rfind(prefix, 0) == 0) out.insert(out.end(), v.f32(), v.f32() + v.numel());
  return out;
}

double relative_distance(const std::vector<float>& a, const std::vector<float>& b, const std::vector<float>& from) {
  if (a.size() != b.size() || a.size() != from.size()) return 1e30;
  double d = 0, n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    d += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    n += (static_cast<double>(b[i]) - from[i]) * (static_cast<double>(b[i]) - from[i]);
  }
  return n > 0 ? std::sqrt(d / n) : (d > 0 ? 1e30 : 0.0);
}

void run_case(const std::string& label, const TrainConfig& cfg, const std::vector<OpGraph>& graphs,
              const std::shared_ptr<Communicator>& comm, Tolerance tol) {
  const int rank = comm->rank();
  const std::string dir = std::filesystem::temp_directory_path().string();
  std::uint64_t tag = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  comm->broadcast(&tag, sizeof tag, 0);
  const std::string ckpt = dir + "/go_test_mpi_" + label + "_" + std::to_string(tag) + ".ckpt";
  const std::string other = ckpt + ".rank" + std::to_string(rank);

  // distributed: updates - 1, a checkpoint, one more
  PpoTrainer dist(cfg, graphs, two_devices());
  dist.set_communicator(comm);
  std::vector<UpdateStats> ds;
  while (dist.updates_done() + 1 < cfg.updates) ds.push_back(dist.update());
  dist.save_checkpoint(ckpt);
  dist.save_checkpoint(other);
  comm->barrier();
  expect(std::filesystem::exists(ckpt), label + ": rank 0 wrote the checkpoint");
  expect(std::filesystem::exists(other) == (rank == 0), label + ": only rank 0 writes checkpoints");
  ds.push_back(dist.update());
  dist.save_checkpoint(other);
  comm->barrier();
  const std::vector<float> mine = state_of(dist, {});
  expect(same_on_all_ranks(*comm, mine), label + ": parameters bit-identical on every rank");
  expect(same_on_all_ranks(*comm, std::vector<float>{static_cast<float>(ds.back().mean_reward),
                                                     static_cast<float>(ds.back().entropy),
                                                     static_cast<float>(ds.back().approx_kl),
                                                     static_cast<float>(dist.task(0).best_step_time)}),
         label + ": statistics and best plans identical on every rank");

  // resumed on every rank from rank 0's checkpoint: the same last update, bit for bit
  {
    PpoTrainer res(cfg, graphs, two_devices());
    res.load_checkpoint(ckpt);
    res.set_communicator(comm);
    res.update();
    expect(state_of(res, {}) == mine, label + ": a resumed distributed run continues bit-identically");
    for (std::size_t i = 0; i < res.num_graphs(); ++i)
      expect(res.task(i).best_plan.device == dist.task(i).best_plan.device &&
                 res.task(i).best_step_time == dist.task(i).best_step_time,
             label + ": resumed best plans");
  }

  // one process, same config (rank 0 only; the other ranks wait)
  if (rank == 0) {
    PpoTrainer one(cfg, graphs, two_devices());
    const std::vector<float> init = state_of(one, {});
    std::vector<UpdateStats> os;
    while (one.updates_done() < cfg.updates) os.push_back(one.update());
    expect(os[0].mean_reward == ds[0].mean_reward && os[0].max_reward == ds[0].max_reward &&
               os[0].invalid_fraction == ds[0].invalid_fraction,
           label + ": the first update samples the same plans as one process");
    for (std::size_t u = 0; u < os.size(); ++u) {
      auto near = [&](double a, double b) { return std::abs(a - b) <= tol.stats * (std::abs(a) + 1e-3); };
      // the same sampled plans in every update: the same rewards, up to the last bit
      const bool close = os[u].mean_reward == ds[u].mean_reward && os[u].max_reward == ds[u].max_reward &&
                         near(os[u].entropy, ds[u].entropy) && near(os[u].value_loss, ds[u].value_loss) &&
                         os[u].epochs_run == ds[u].epochs_run && os[u].samples == ds[u].samples;
      expect(close, label + ": update " + std::to_string(u + 1) + " statistics match one process (reward " +
                        std::to_string(os[u].mean_reward) + " vs " + std::to_string(ds[u].mean_reward) + ", entropy " +
                        std::to_string(os[u].entropy) + " vs " + std::to_string(ds[u].entropy) + ", epochs " +
                        std::to_string(os[u].epochs_run) + " vs " + std::to_string(ds[u].epochs_run) + ")");
    }
    for (std::size_t i = 0; i < one.num_graphs(); ++i)
      expect(one.task(i).best_step_time == dist.task(i).best_step_time &&
                 one.task(i).best_plan.device == dist.task(i).best_plan.device,
             label + ": best plans match one process");
    const std::string one_ckpt = ckpt + ".one";
    one.save_checkpoint(one_ckpt);
    const std::vector<float> a = state_of(dist, other), b = state_of(one, one_ckpt);
    const double path = relative_distance(mine, state_of(one, {}), init);
    const std::vector<float> m1 = checkpoint_values(one_ckpt, "adam.m/");
    const double moment = relative_distance(checkpoint_values(other, "adam.m/"), m1, std::vector<float>(m1.size(), 0.f));
    std::printf("%s: %d ranks vs 1 process after %lld update(s): %s; |theta_R - theta_1| / |theta_1 - theta_0| = %.3g, "
                "|m_R - m_1| / |m_1| = %.3g\n",
                label.c_str(), comm->size(), static_cast<long long>(cfg.updates),
                a == b ? "bit-identical parameters and Adam moments" : "not bit-identical", path, moment);
    if (tol.path == 0 && tol.first_moment == 0) expect(a == b, label + ": bit-identical to one process");
    if (tol.path > 0) expect(path < tol.path, label + ": parameters within " + std::to_string(tol.path) + " of one process");
    if (tol.first_moment > 0)
      expect(moment < tol.first_moment, label + ": Adam moments within " + std::to_string(tol.first_moment) + " of one process");
    std::filesystem::remove(one_ckpt);
    std::filesystem::remove(ckpt);
    std::filesystem::remove(other);
  }
  comm->barrier();
}

}  // namespace

int main(int argc, char** argv) {
  MpiSession mpi(&argc, &argv, /*force=*/true);
  const auto comm = mpi.communicator();
  my_rank = comm->rank();
  try {
    const OpGraph g0 = chains("g0", 3, 4);
    // Minibatches of one sample: each gradient comes from one rank plus zeros from the others, so
    // the whole run must be bit-identical to one process.
    {
      TrainConfig c = tiny_config();
      c.minibatch = 1;
      c.updates = 3;
      c.epochs = 2;
      run_case("exact", c, {g0}, comm, {});
    }
    // One Adam step from a minibatch of all 6 samples, split 3 + 3: only the order of the gradient
    // sum differs, which the first moment (0.1 x the gradient) shows.
    {
      TrainConfig c = tiny_config();
      c.updates = 1;
      c.epochs = 1;
      c.minibatch = 6;
      run_case("one_step", c, {g0}, comm, {.path = 1e-4, .stats = 1e-6, .first_moment = 1e-5});
    }
    // Several updates of minibatches of 4 and 2 (measured: 1e-6 relative after 4 updates).
    {
      TrainConfig c = tiny_config();
      run_case("single", c, {g0}, comm, {.path = 1e-4, .stats = 1e-5, .first_moment = 1e-4});
    }
    // Pre-training: 2 of 3 graphs per update (each rank samples one graph), the value baseline,
    // KL early stopping.
    {
      TrainConfig c = tiny_config();
      c.samples = 3;
      c.graphs_per_update = 2;
      c.minibatch = 5;
      c.epochs = 4;
      c.baseline = "value";
      c.target_kl = 0.002;
      run_case("pretrain", c, {g0, chains("g1", 2, 6), chains("g2", 4, 2)}, comm,
               {.path = 1e-4, .stats = 1e-5, .first_moment = 1e-4});
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: error: %s\n", my_rank, e.what());
    std::fflush(stderr);
    mpi.abort(2);
    return 2;
  }
  const double total = comm->allreduce_sum(static_cast<double>(failures));
  if (my_rank == 0) std::printf("test_mpi: %d ranks, %s\n", comm->size(), total == 0 ? "all checks passed" : "FAILED");
  return total == 0 ? 0 : 1;
}
