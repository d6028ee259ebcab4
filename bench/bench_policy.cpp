// Forward + backward of the GO policy network on a large op graph: time and peak memory.
//
//   bench_policy dump DIR [--graph gnmt|synthetic] [--nodes N] [--devices D] [--seed S] [--config JSON]
//       builds the graph (zoo:gnmt8 expanded into its training graph, at the zoo's sizes, or, with
//       --nodes, unrolled to >= N ops; or a synthetic op-graph-like DAG of N ops, default 80,000), its PolicyGraph, a seeded random action for every node and a
//       policy, and writes DIR/graph.params (kinds, numeric features, edges in topological order,
//       actions) and DIR/policy.params (the weights, config in the metadata): the inputs both this
//       program and bench/torch_reference.py load.
//   bench_policy run DIR [--iters K] [--profile]
//       loads them, runs one warm-up step and K timed steps of forward (teacher-forced actions) +
//       PPO-style loss + backward, and prints JSON: per-step times, peak RSS (getrusage ru_maxrss)
//       and RSS after loading, and the first step's log-probability / entropy / value (to check
//       against PyTorch). --profile adds a breakdown by kernel at the same sizes.
#include <sys/resource.h>

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "go/go.hpp"
#include "go/graph/load.hpp"
#include "go/graph/training.hpp"
#include "go/graph/zoo.hpp"
#include "go/nn/functional.hpp"
#include "go/policy/all.hpp"

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}
double cpu_seconds() {  // user + system time of the whole process (all threads)
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}
double current_rss_mb() {
  std::ifstream f("/proc/self/statm");
  long pages = 0, resident = 0;
  f >> pages >> resident;
  return static_cast<double>(resident) * 4096.0 / (1024.0 * 1024.0);
}

std::string arg(int argc, char** argv, const std::string& name, const std::string& def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == name) return argv[i + 1];
  return def;
}
bool flag(int argc, char** argv, const std::string& name) {
  for (int i = 1; i < argc; ++i)
    if (argv[i] == name) return true;
  return false;
}

// zoo:gnmt8 (8-layer GNMT) expanded into its training graph, at the zoo's default sizes; with
// --nodes other than the default, unrolled over as many steps as reach that many ops.
go::OpGraph gnmt_graph(std::int64_t target, bool exact_default) {
  go::OpGraph t = go::make_training_graph(go::load_graph("zoo:gnmt8"));
  t.mutable_info().name = "zoo:gnmt8 (training)";
  if (exact_default) return t;
  const std::int64_t default_ops = t.num_ops();
  std::int64_t seq = std::max<std::int64_t>(2, 64 * target / std::max<std::int64_t>(default_ops, 1));
  for (;; ++seq) {
    go::ZooOptions o;
    o.seq = seq;
    t = go::make_training_graph(go::make_zoo_graph("gnmt8", o));
    if (t.num_ops() >= target) {
      t.mutable_info().name = "zoo:gnmt8 seq " + std::to_string(seq) + " (training)";
      return t;
    }
  }
}

// A synthetic DAG shaped like an op graph: 1-3 predecessors among the previous 64 ops.
go::OpGraph synthetic_graph(std::int64_t n, go::Rng& rng) {
  go::GraphInfo info;
  info.name = "synthetic" + std::to_string(n);
  go::GraphBuilder b(info);
  b.reserve(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    go::OpSpec s;
    s.name = "op" + std::to_string(i);
    s.kind = static_cast<go::OpKind>(rng.uniform_int(go::kNumOpKinds));
    s.flops = std::pow(10.0, rng.uniform(3.f, 10.f));
    go::TensorSpec t;
    t.shape = {64, static_cast<std::int64_t>(1 + rng.uniform_int(1024))};
    s.outputs.push_back(t);
    if (i > 0) {
      const int k = 1 + static_cast<int>(rng.uniform_int(3));
      for (int j = 0; j < k; ++j) {
        const std::int64_t lo = std::max<std::int64_t>(0, i - 64);
        s.inputs.push_back(go::TensorRef{lo + static_cast<std::int64_t>(rng.uniform_int(static_cast<std::uint64_t>(i - lo))), 0});
      }
    }
    b.add_op(std::move(s));
  }
  return b.build();
}

int dump(const std::string& dir, int argc, char** argv) {
  const std::string kind = arg(argc, argv, "--graph", "gnmt");
  const std::string nodes_arg = arg(argc, argv, "--nodes", "");
  const std::int64_t nodes = nodes_arg.empty() ? 80000 : std::stoll(nodes_arg);
  const int devices = std::stoi(arg(argc, argv, "--devices", "4"));
  const std::uint64_t seed = std::stoull(arg(argc, argv, "--seed", "1"));
  go::policy::PolicyConfig cfg;
  const std::string cfg_text = arg(argc, argv, "--config", "");
  if (!cfg_text.empty()) cfg = go::policy::PolicyConfig::parse(cfg_text, "--config");
  go::Rng rng(seed);
  const auto t0 = Clock::now();
  const go::OpGraph g = kind == "synthetic" ? synthetic_graph(nodes, rng) : gnmt_graph(nodes, nodes_arg.empty());
  const go::policy::PolicyGraph pg = go::policy::PolicyGraph::from_graph(g);
  const std::int64_t n = pg.num_nodes;
  go::policy::GoPolicy net(cfg);
  // Random actions: the benchmark re-evaluates stored actions as PPO does.
  go::policy::Actions a;
  a.device = go::Tensor::empty(go::Shape{n}, go::DType::i32);
  a.priority = go::Tensor::empty(go::Shape{n}, go::DType::i32);
  a.fuse = go::Tensor::empty(go::Shape{n}, go::DType::i32);
  for (std::int64_t r = 0; r < n; ++r) {
    a.device.data<std::int32_t>()[r] = static_cast<std::int32_t>(rng.uniform_int(static_cast<std::uint64_t>(devices)));
    a.priority.data<std::int32_t>()[r] = static_cast<std::int32_t>(rng.uniform_int(static_cast<std::uint64_t>(cfg.priority_levels)));
    // fusion only where the policy's mask allows it (the policy refuses any other given action)
    a.fuse.data<std::int32_t>()[r] = pg.fusion_mask.f32()[r * 2 + 1] == 0.f && rng.uniform() < 0.5f ? 1 : 0;
  }
  // Decoding the actions into a plan (fusion repair), timed on the full graph.
  const auto td = Clock::now();
  const go::policy::Decision dec = go::policy::decode(g, pg, a, devices);
  const double decode_s = seconds_since(td);
  // Edges dst <- src in row numbering (the CSR's order).
  go::Tensor edst = go::Tensor::empty(go::Shape{pg.preds.nnz()}, go::DType::i32);
  const auto* rp = pg.preds.fwd.row_ptr.data<std::int64_t>();
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t e = rp[r]; e < rp[r + 1]; ++e) edst.data<std::int32_t>()[e] = static_cast<std::int32_t>(r);
  std::filesystem::create_directories(dir);
  go::save_tensors(dir + "/graph.params",
                   {{"kinds", pg.kinds},
                    {"numeric", pg.numeric},
                    {"fusion_mask", pg.fusion_mask},
                    {"edge_dst", edst},
                    {"edge_src", pg.preds.fwd.col_idx},
                    {"act_device", a.device},
                    {"act_priority", a.priority},
                    {"act_fuse", a.fuse}},
                   {{"name", pg.name}, {"num_nodes", n}, {"num_edges", pg.preds.nnz()}, {"num_devices", devices}});
  net.save_policy(dir + "/policy.params");
  std::printf("{\"graph\": \"%s\", \"nodes\": %lld, \"edges\": %lld, \"devices\": %d, \"parameters\": %lld, "
              "\"config\": %s, \"decode_s\": %.3f, \"fuse_requested\": %lld, \"fused\": %lld, "
              "\"refused_device\": %lld, \"refused_cycle\": %lld, \"seconds\": %.2f}\n",
              pg.name.c_str(), static_cast<long long>(n), static_cast<long long>(pg.preds.nnz()), devices,
              static_cast<long long>(net.num_parameters()), cfg.to_json().dump().c_str(), decode_s,
              static_cast<long long>(dec.fuse_requested), static_cast<long long>(dec.fused),
              static_cast<long long>(dec.refused_device), static_cast<long long>(dec.refused_cycle), seconds_since(t0));
  return 0;
}

struct Loaded {
  go::policy::PolicyGraph pg;
  go::policy::Actions actions;
  int devices = 0;
};

Loaded load(const std::string& dir) {
  go::LoadedTensors t = go::load_tensors(dir + "/graph.params");
  auto get = [&](const std::string& name) {
    for (auto& [k, v] : t.tensors)
      if (k == name) return v;
    GO_FAIL(dir, "/graph.params: no tensor '", name, "'");
  };
  Loaded l;
  const go::Tensor dst = get("edge_dst"), src = get("edge_src");
  l.pg = go::policy::PolicyGraph::from_arrays(
      t.meta.value("name", std::string("graph")), get("kinds"), get("numeric"),
      std::span<const std::int32_t>(dst.data<std::int32_t>(), static_cast<std::size_t>(dst.numel())),
      std::span<const std::int32_t>(src.data<std::int32_t>(), static_cast<std::size_t>(src.numel())));
  // the mask as dump computed it from the op graph (the fusion rules need kinds and roles, which
  // from_arrays does not have): both implementations read this one
  l.pg.fusion_mask = get("fusion_mask");
  l.actions = {get("act_device"), get("act_priority"), get("act_fuse")};
  l.devices = t.meta.at("num_devices").get<int>();
  return l;
}

// The PPO-shaped loss both implementations compute: policy term, entropy bonus, value loss.
go::Variable step_loss(const go::policy::PolicyOutput& out, std::int64_t n) {
  go::Variable policy = go::scale(out.log_prob_sum, -1.f / static_cast<float>(n));
  go::Variable value = go::square(go::add_scalar(out.value, -1.f));
  return policy + go::scale(out.entropy_mean, -0.01f) + go::scale(go::sum(value), 0.5f);
}

template <class F>
double time_it(F f, int reps = 3) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const auto t = Clock::now();
    f();
    best = std::min(best, seconds_since(t));
  }
  return best;
}

// Forward + backward of each kernel-level op at the network's sizes, times how often the network
// runs it: where a step's time goes (the remainder is the small ops: heads, gates, sampling).
void profile(const go::policy::PolicyConfig& cfg, const go::policy::PolicyGraph& pg, double step_s) {
  using namespace go;
  const std::int64_t n = pg.num_nodes, d = cfg.hidden;
  Rng rng(3);
  const int L = 3 * cfg.layers_per_task, S = cfg.sage_layers;
  auto randv = [&](std::int64_t r, std::int64_t c, float sd = 1.f) { return Variable(Tensor::randn(Shape{r, c}, rng, sd), true); };
  std::vector<std::pair<std::string, double>> parts;
  {
    Variable q = randv(n, d), k = randv(n, d), v = randv(n, d);
    kernels::SegAttention p;
    p.heads = cfg.heads;
    p.head_dim = static_cast<std::int32_t>(d / cfg.heads);
    p.seg_len = cfg.segment_length;
    p.mem_len = cfg.memory_length;
    p.causal = cfg.causal;
    const Tensor seed = Tensor::randn(Shape{n, d}, rng);
    parts.emplace_back("seg_attention", L * time_it([&] { seg_attention(q, k, v, p).backward(seed); }));
  }
  {
    Variable x = randv(n, d);
    const Tensor seed = Tensor::randn(Shape{n, d}, rng);
    parts.emplace_back("aggregate_max", 2 * S * time_it([&] { aggregate(x, pg.preds, kernels::Reduce::max).backward(seed); }));
  }
  {
    Variable x = randv(n, d), W = randv(d, d, 0.05f), b = randv(1, d);
    const Tensor seed = Tensor::randn(Shape{n, d}, rng);
    parts.emplace_back("linear_dxd (q k v o, sage pool, heads)",
                       (4 * L + S + 2) * time_it([&] { nn::linear(x, W, b).backward(seed); }));
    Variable u = randv(n, d), dn = randv(n, d), Wc = randv(3 * d, d, 0.05f);
    parts.emplace_back("linear_3dxd_relu (sage combine)",
                       S * time_it([&] { nn::linear({x, u, dn}, Wc, b, nn::Activation::relu).backward(seed); }));
    Variable W1 = randv(d, cfg.ffn_dim, 0.05f), b1 = randv(1, cfg.ffn_dim), W2 = randv(cfg.ffn_dim, d, 0.05f);
    parts.emplace_back("mlp_gelu (feed-forward)", L * time_it([&] { nn::mlp_gelu(x, W1, b1, W2, b, u).backward(seed); }));
    Variable gm(Tensor::ones(Shape{d}), true), bt(Tensor::zeros(Shape{d}), true);
    parts.emplace_back("layer_norm", (2 * L + 3) * time_it([&] { layer_norm(x, gm, bt).backward(seed); }));
    Variable gate = randv(1, d);
    parts.emplace_back("gate mul_row", L * time_it([&] { nn::mul_row(x, gate).backward(seed); }));
  }
  double sum = 0;
  std::printf("\"profile_s\": {");
  for (const auto& [name, t] : parts) {
    std::printf("\"%s\": %.3f, ", name.c_str(), t);
    sum += t;
  }
  std::printf("\"rest\": %.3f}, ", step_s - sum);
}

int run(const std::string& dir, int argc, char** argv) {
  const int iters = std::stoi(arg(argc, argv, "--iters", "3"));
  const auto t0 = Clock::now();
  Loaded l = load(dir);
  auto net = go::policy::GoPolicy::load_policy(dir + "/policy.params");
  const double load_s = seconds_since(t0);
  const double rss_loaded = current_rss_mb();
  const std::int64_t n = l.pg.num_nodes;
  std::vector<double> fwd, total, cpu;
  double lp = 0, ent = 0, val = 0, loss0 = 0, rss_forward = 0;
  for (int it = 0; it <= iters; ++it) {
    net->zero_grad();
    const auto s = Clock::now();
    const double c0 = cpu_seconds();
    go::policy::PolicyOutput out = net->forward(l.pg, l.devices, go::policy::Decode::given, &l.actions);
    go::Variable loss = step_loss(out, n);
    const double f = seconds_since(s);
    if (it == 0) rss_forward = current_rss_mb();
    loss.backward();
    const double t = seconds_since(s);
    const double c = cpu_seconds() - c0;
    if (it == 0) {
      lp = out.log_prob_sum.item();
      ent = out.entropy_mean.item();
      val = out.value.item();
      loss0 = loss.item();
    } else {
      fwd.push_back(f);
      total.push_back(t);
      cpu.push_back(c);
    }
  }
  double grad_norm2 = 0;
  for (auto& [name, p] : net->named_parameters())
    for (std::int64_t i = 0; i < p.numel(); ++i) grad_norm2 += static_cast<double>(p.grad().f32()[i]) * p.grad().f32()[i];
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  std::printf("{\"impl\": \"go\", \"threads\": %d, \"nodes\": %lld, \"edges\": %lld, \"parameters\": %lld, "
              "\"load_s\": %.2f, \"rss_after_load_mb\": %.1f, ",
              omp_get_max_threads(), static_cast<long long>(n), static_cast<long long>(l.pg.num_edges()),
              static_cast<long long>(net->num_parameters()), load_s, rss_loaded);
  if (flag(argc, argv, "--profile")) profile(net->config(), l.pg, median(total));
  std::printf("\"forward_s\": %.4f, \"step_s\": %.4f, \"step_min_s\": %.4f, \"step_cpu_s\": %.4f, \"steps\": [",
              median(fwd), median(total), *std::min_element(total.begin(), total.end()), median(cpu));
  for (std::size_t i = 0; i < total.size(); ++i) std::printf("%s%.4f", i ? ", " : "", total[i]);
  std::printf("], \"rss_after_first_forward_mb\": %.1f, \"peak_rss_mb\": %.1f, \"log_prob_sum\": %.6g, \"entropy_mean\": %.6g, \"value\": %.6g, "
              "\"loss\": %.6g, \"grad_norm\": %.6g}\n",
              rss_forward, peak_rss_mb(), lp, ent, val, loss0, std::sqrt(grad_norm2));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc >= 3 && std::string(argv[1]) == "dump") return dump(argv[2], argc, argv);
    if (argc >= 3 && std::string(argv[1]) == "run") return run(argv[2], argc, argv);
    std::fprintf(stderr,
                 "usage: bench_policy dump DIR [--graph gnmt|synthetic] [--nodes N] [--devices D] [--seed S] "
                 "[--config JSON]\n       bench_policy run DIR [--iters K] [--profile]\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_policy: %s\n", e.what());
    return 1;
  }
}
