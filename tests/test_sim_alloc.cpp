// The simulator allocates nothing once a workspace has warmed up: counts every operator new in
// this test program while simulate() runs, on a training graph with transfers, priorities, fusion
// and out-of-memory and invalid plans, from two threads with their own workspaces.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <random>
#include <thread>
#include <vector>

#include "go/graph/training.hpp"
#include "go/sim/sim.hpp"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<std::int64_t> g_allocs{0};
}  // namespace

void* operator new(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocs.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
// The nothrow forms too, so that every allocation and its delete meet the same allocator.
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  if (g_counting.load(std::memory_order_relaxed)) g_allocs.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n == 0 ? 1 : n);
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace {

go::OpGraph layered_training_graph(int layers, int width) {
  go::GraphBuilder b;
  go::OpSpec x;
  x.name = "x";
  x.kind = go::OpKind::input;
  go::TensorSpec ts;
  ts.shape = {64, 512};
  x.outputs.push_back(ts);
  b.add_op(x);
  std::int64_t prev_begin = 0, prev_end = 1, next = 1;
  for (int l = 0; l < layers; ++l) {
    const std::int64_t begin = next;
    for (int w = 0; w < width; ++w) {
      go::OpSpec s;
      s.name = "l" + std::to_string(l) + "_" + std::to_string(w);
      s.kind = w % 2 ? go::OpKind::matmul : go::OpKind::relu;
      s.flops = 2.0 * 64 * 512 * 512;
      if (s.kind == go::OpKind::matmul) s.param_bytes = 512 * 512 * 4;
      s.outputs.push_back(ts);
      s.inputs.push_back({prev_begin + (w % (prev_end - prev_begin)), 0});
      if (w > 0) s.inputs.push_back({prev_begin + ((w + 1) % (prev_end - prev_begin)), 0});
      b.add_op(s);
      ++next;
    }
    prev_begin = begin;
    prev_end = next;
  }
  return go::make_training_graph(b.build());
}

std::vector<go::Plan> plans(const go::OpGraph& g, int nd) {
  std::mt19937 rng(5);
  std::vector<go::Plan> out;
  const auto n = static_cast<std::size_t>(g.num_ops());
  for (int k = 0; k < 6; ++k) {
    go::Plan p;
    p.device.resize(n);
    for (std::size_t i = 0; i < n; ++i) p.device[i] = static_cast<std::int32_t>((i / 7 + static_cast<std::size_t>(rng() % 2)) % static_cast<std::size_t>(nd));
    go::colocate(g, p);
    if (k % 2) {
      p.priority.resize(n);
      for (auto& x : p.priority) x = static_cast<float>(rng() % 100);
    }
    if (k >= 3) {  // fuse consecutive pairs of the topological order on one device (convex) that the
                   // fusion rules allow
      p.fusion.assign(n, -1);
      auto topo = g.topo_order();
      const auto traits = go::fusion_traits(g);
      for (std::size_t i = 0; i + 1 < n; i += 3) {
        const std::vector<go::OpId> pair = {topo[i], topo[i + 1]};
        const bool legal =
            !go::check_fusion_group(go::fusion_view(g, traits), pair, [&](go::OpId u) { return u == pair[0] || u == pair[1]; });
        if (legal && p.device[static_cast<std::size_t>(topo[i])] == p.device[static_cast<std::size_t>(topo[i + 1])] &&
            g.op(topo[i]).colocation < 0 && g.op(topo[i + 1]).colocation < 0) {
          p.fusion[static_cast<std::size_t>(topo[i])] = static_cast<std::int32_t>(i);
          p.fusion[static_cast<std::size_t>(topo[i + 1])] = static_cast<std::int32_t>(i);
        }
      }
    }
    out.push_back(std::move(p));
  }
  go::Plan bad = out[0];
  bad.device[3] = 99;  // invalid device
  out.push_back(bad);
  out.push_back(go::Plan::single_device(g.num_ops(), 2));
  return out;
}

}  // namespace

TEST_CASE("simulate() allocates nothing once the workspace is warm", "[sim][alloc]") {
  const go::OpGraph g = layered_training_graph(30, 8);
  go::Cluster c = go::cluster_preset("v100x4");
  c.devices[2].spec.memory_bytes = 120000000;  // 240 MB of weights + momentum only fit when spread
  go::Simulator sim(g, c);
  const std::vector<go::Plan> ps = plans(g, 4);
  go::SimWorkspace ws = sim.make_workspace();
  int valid = 0, oom = 0, fused = 0;
  for (int warm = 0; warm < 2; ++warm)
    for (const go::Plan& p : ps) sim.simulate(p, ws);
  g_allocs = 0;
  g_counting = true;
  for (int rep = 0; rep < 5; ++rep)
    for (const go::Plan& p : ps) {
      const go::SimResult& r = sim.simulate(p, ws);
      valid += r.valid;
      oom += r.status == go::SimStatus::out_of_memory;
      fused += p.has_fusion() && r.valid;
    }
  g_counting = false;
  CHECK(g_allocs.load() == 0);
  CHECK(valid > 0);
  CHECK(oom > 0);
  CHECK(fused > 0);
}

TEST_CASE("threads with their own workspaces get the same results", "[sim][alloc]") {
  const go::OpGraph g = layered_training_graph(20, 6);
  go::Simulator sim(g, go::cluster_preset("v100x4"));
  const std::vector<go::Plan> ps = plans(g, 4);
  std::vector<double> expect;
  for (const go::Plan& p : ps) expect.push_back(sim.simulate(p).step_time);
  std::vector<std::vector<double>> got(2);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      go::SimWorkspace ws = sim.make_workspace();
      for (int rep = 0; rep < 50; ++rep)
        for (const go::Plan& p : ps) got[static_cast<std::size_t>(t)].push_back(sim.simulate(p, ws).step_time);
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 2; ++t)
    for (std::size_t k = 0; k < got[static_cast<std::size_t>(t)].size(); ++k)
      CHECK(got[static_cast<std::size_t>(t)][k] == expect[k % expect.size()]);
}
