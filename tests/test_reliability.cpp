// Reliability (issue 10): the fuzz targets' regression inputs and seeds replayed under ctest, the
// real inputs through the same checks, bit-identical results with 1 and 2 threads, and files
// that stay whole when the writing process is killed.
//
// The fuzzing itself runs in scripts/fuzz (clang + libFuzzer); tests/fuzz/targets.hpp holds the
// targets, shared with this file so a crash found there becomes a test here by copying the input
// to tests/fuzz/regressions/<target>/.
#include <catch2/catch.hpp>
#include <omp.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <thread>
#include <typeinfo>
#include <vector>

#include "fuzz/targets.hpp"
#include "go/autograd/autograd.hpp"
#include "go/core/csr.hpp"
#include "go/core/file.hpp"
#include "go/core/rng.hpp"
#include "go/graph/training.hpp"
#include "go/graph/zoo.hpp"
#include "go/nn/serialize.hpp"
#include "go/optim/adam.hpp"
#include "go/policy/policy.hpp"
#include "harness.hpp"

namespace test_reliability {
namespace fs = std::filesystem;
using go::Tensor;
using go::Variable;

namespace {

const std::string kData = GO_TEST_DATA_DIR;
const std::string kFuzz = std::string(GO_TEST_DATA_DIR) + "/../fuzz";
const std::string kRepoData = GO_DATA_DIR;

std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename().string()[0] != '.') out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// Runs one input through a fuzz target: loaded or a go::Error, anything else fails the test. With
// allow_known, a bug listed in go::fuzz::known_open_issues() is a warning.
go::fuzz::Outcome replay(const go::fuzz::Target& t, const fs::path& file, bool allow_known = true) {
  INFO("fuzz target " << t.name << ", input " << file.string());
  const std::string data = go::read_file(file.string());
  try {
    std::string why;
    const go::fuzz::Outcome o = go::fuzz::run(t, data, &why, allow_known);
    if (o == go::fuzz::Outcome::known_open)
      WARN("known open bug (tests/fuzz/targets.hpp known_open_issues): " << file.string() << ": " << why);
    return o;
  } catch (const go::fuzz::InvariantBroken& e) {
    FAIL("broken invariant: " << e.what());
  } catch (const std::exception& e) {
    FAIL("the loader threw " << typeid(e).name() << " instead of go::Error: " << e.what());
  }
  return go::fuzz::Outcome::rejected;
}

using go::test::ThreadsGuard;

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// Runs op with 1 thread, then 2, and compares every output bit for bit.
void check_threads_agree(const std::function<std::vector<Tensor>()>& op) {
  omp_set_num_threads(1);
  const std::vector<Tensor> one = op();
  omp_set_num_threads(2);
  const std::vector<Tensor> two = op();
  REQUIRE(one.size() == two.size());
  for (std::size_t i = 0; i < one.size(); ++i) {
    INFO("output " << i);
    CHECK(same_bits(one[i], two[i]));
  }
}

// A fresh, empty folder under the system temp folder, removed at the end of the test.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name)
      : path(fs::temp_directory_path() / ("go_reliability_" + std::to_string(::getpid()) + "_" + name)) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& f) const { return (path / f).string(); }
};

}  // namespace

// ---- fuzzing: every input that once crashed a loader, and the hand-written seeds -------------

TEST_CASE("fuzz regressions and seeds load or throw go::Error", "[reliability][fuzz]") {
  int replayed = 0;
  for (const go::fuzz::Target& t : go::fuzz::targets()) {
    for (const char* kind : {"regressions", "seeds"})
      for (const fs::path& f : files_in(fs::path(kFuzz) / kind / t.name)) {
        (void)replay(t, f);
        ++replayed;
      }
  }
  // The committed seeds alone (tests/fuzz/seeds/checkpoint) make this nonzero.
  REQUIRE(replayed > 0);
}

// The same without the list of known open bugs (which should be empty: every found bug is fixed).
TEST_CASE("fuzz regressions pass without the known-open list", "[reliability][fuzz]") {
  for (const go::fuzz::Target& t : go::fuzz::targets())
    for (const fs::path& f : files_in(fs::path(kFuzz) / "regressions" / t.name)) (void)replay(t, f, false);
}

TEST_CASE("every fuzz target is listed once and named like its folders", "[reliability][fuzz]") {
  std::vector<std::string> names;
  for (const auto& t : go::fuzz::targets()) names.emplace_back(t.name);
  std::vector<std::string> sorted = names;
  std::sort(sorted.begin(), sorted.end());
  REQUIRE(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
  for (const char* kind : {"regressions", "seeds"})
    for (const auto& e : fs::directory_iterator(fs::path(kFuzz) / kind)) {
      INFO(e.path().string());
      if (e.is_directory()) CHECK(go::fuzz::find_target(e.path().filename().string()) != nullptr);
    }
}

// The real inputs the fuzzers start from load, validate and survive the JSON round trip (the
// invariants the fuzz targets check on every input that loads).
TEST_CASE("real graphs, plans, clusters and checkpoints pass the fuzz targets' checks", "[reliability][fuzz][real]") {
  struct Set {
    const char* target;
    fs::path dir;
    std::string suffix;
  };
  const fs::path rd = fs::path(kRepoData) / "real-data";
  const std::vector<Set> sets = {
      {"onnx", fs::path(kRepoData) / "models", ".onnx"},
      {"pipedream", rd / "msr-fiddle-pipedream", "graph.txt"},
      {"dnn_partitioning", rd / "msr-fiddle-dnn-partitioning" / "throughput-inputs", ".json"},
      {"json_graph", fs::path(kData) / "graph", ".json"},
      {"any_graph", fs::path(kData) / "graph", ".json"},
      {"checkpoint", fs::path(kFuzz) / "seeds" / "checkpoint", ""},
#ifdef GO_FUZZ_HAVE_SIM
      {"plan", fs::path(kData) / "sim", "plan.json"},
      {"cluster", fs::path(kData) / "sim", "s.json"},  // mixed.json, pairs.json (not bad_cluster.json)
#endif
  };
  int loaded = 0;
  for (const Set& s : sets) {
    const go::fuzz::Target* t = go::fuzz::find_target(s.target);
    REQUIRE(t != nullptr);
    INFO("input folder " << s.dir.string());
    REQUIRE(fs::exists(s.dir));  // data/ and tests/ ship every one
    for (const fs::path& f : files_in(s.dir)) {
      const std::string name = f.string();
      if (name.size() < s.suffix.size() || name.compare(name.size() - s.suffix.size(), s.suffix.size(), s.suffix) != 0)
        continue;
      std::string why;
      INFO("fuzz target " << s.target << ", input " << name);
      go::fuzz::Outcome o = go::fuzz::Outcome::rejected;
      try {
        o = go::fuzz::run(*t, go::read_file(name), &why);
      } catch (const std::exception& e) {
        FAIL("the checks failed: " << e.what());
      }
      INFO("rejected: " << why);
      CHECK(o == go::fuzz::Outcome::loaded);
      ++loaded;
    }
  }
  REQUIRE(loaded >= 5);
}

// ---- determinism: 1 and 2 threads give the same bits ------------------------------------------

namespace {

struct RunRecord {
  std::vector<float> losses;
  std::vector<Tensor> tensors;  // outputs, gradients and final parameters, in a fixed order
};

// A small graph network trained for a few steps: every parallel kernel on a size above its
// parallel grain (1 << 15 elements): matmul (oneDNN), broadcast add, relu/gelu, the three CSR
// aggregations forward and backward, concat, layer norm forward and backward, segment attention
// forward and backward, softmax/log-softmax, sampling, reductions, gradient clipping and Adam.
// affine_ln: gamma and beta inside layer_norm (its fused parameter gradients); otherwise applied
// after it with a broadcast multiply and add.
RunRecord train_run(int threads, bool affine_ln, int steps = 4) {
  omp_set_num_threads(threads);
  go::Rng rng(2024);
  const std::int64_t n = 2048, d = 32, h = 64, heads = 2, hd = 16, actions = 8;
  std::vector<std::int32_t> src, dst;
  for (std::int64_t i = 0; i < n; ++i)
    for (int k = 0; k < 6; ++k) {
      dst.push_back(static_cast<std::int32_t>(i));
      src.push_back(static_cast<std::int32_t>(static_cast<std::int64_t>(rng.uniform() * static_cast<float>(n)) % n));
    }
  for (int k = 0; k < 400; ++k) {  // a hub: one skewed row
    dst.push_back(7);
    src.push_back(k);
  }
  const go::CsrPair g = go::CsrPair::from_edges(n, n, dst, src);
  const Tensor x = Tensor::uniform(go::Shape{n, d}, rng, -1.f, 1.f);
  auto param = [&](go::Shape s, float scale) { return Variable(Tensor::uniform(s, rng, -scale, scale), true); };
  Variable w1 = param({d, h}, 0.3f), b1 = param({1, h}, 0.1f);
  Variable gamma = param({3 * h}, 1.f), beta = param({3 * h}, 0.1f);
  Variable wq = param({3 * h, heads * hd}, 0.1f), wk = param({3 * h, heads * hd}, 0.1f),
           wv = param({3 * h, heads * hd}, 0.1f), wo = param({heads * hd, actions}, 0.2f);
  std::vector<Variable> params = {w1, b1, gamma, beta, wq, wk, wv, wo};
  go::Adam opt(params, {.lr = 1e-2f});
  go::kernels::SegAttention ap;
  ap.heads = heads;
  ap.head_dim = hd;
  ap.seg_len = 96;
  ap.mem_len = 64;
  ap.causal = true;

  RunRecord rec;
  for (int step = 0; step < steps; ++step) {
    opt.zero_grad();
    Variable hid = go::relu(go::matmul(Variable(x), w1) + b1);
    Variable agg = go::concat({go::aggregate(hid, g, go::kernels::Reduce::sum),
                               go::aggregate(hid, g, go::kernels::Reduce::mean),
                               go::aggregate(hid, g, go::kernels::Reduce::max)},
                              1);
    Variable z = affine_ln ? go::layer_norm(go::gelu(agg), gamma, beta)
                           : go::layer_norm(go::gelu(agg)) * go::reshape(gamma, go::Shape{1, 3 * h}) +
                                 go::reshape(beta, go::Shape{1, 3 * h});
    Variable att = go::seg_attention(go::matmul(z, wq), go::matmul(z, wk), go::matmul(z, wv), ap);
    Variable logits = go::matmul(att, wo);
    const Tensor act = go::sample_categorical(logits.value(), rng);
    Variable loss = go::mean(go::categorical_log_prob(logits, act)) * -1.f +
                    go::mean(go::categorical_entropy(logits)) * -0.01f + go::mean(go::square(agg)) * 1e-3f +
                    go::mean(go::sum(go::softmax(logits), 1));
    loss.backward();
    rec.losses.push_back(loss.item());
    rec.losses.push_back(go::clip_grad_norm(params, 0.5f));
    if (step == 0) {
      rec.tensors.push_back(logits.value().clone());
      rec.tensors.push_back(act.clone());
      for (const Variable& p : params) rec.tensors.push_back(p.grad().clone());
    }
    opt.step();
  }
  for (const Variable& p : params) rec.tensors.push_back(p.value().clone());
  return rec;
}

}  // namespace

void check_train_determinism(bool affine_ln) {
  const ThreadsGuard guard;
  const RunRecord one = train_run(1, affine_ln);
  const RunRecord two = train_run(2, affine_ln);
  const RunRecord again = train_run(2, affine_ln);
  REQUIRE(one.tensors.size() == two.tensors.size());
  for (std::size_t i = 0; i < one.tensors.size(); ++i) {
    INFO("tensor " << i << " (0: logits, 1: actions, 2-9: step-0 gradients of w1 b1 gamma beta wq wk wv wo, "
                      "10-17: final parameters)");
    CHECK(same_bits(two.tensors[i], again.tensors[i]));  // the same thread count repeats itself
    CHECK(same_bits(one.tensors[i], two.tensors[i]));
  }
  CHECK(two.losses == again.losses);
  CHECK(one.losses == two.losses);  // losses and gradient norms, every step
}

TEST_CASE("training is bit-identical with 1 and 2 threads", "[reliability][determinism]") {
  check_train_determinism(false);
}

// layer_norm_backward's dgamma/dbeta partials are per fixed block of rows, merged in block order.
TEST_CASE("training with layer_norm's gamma and beta is bit-identical with 1 and 2 threads",
          "[reliability][determinism]") {
  check_train_determinism(true);
}

// The same, one op at a time, so that a failure above says which kernel depends on the thread
// count.
// The whole policy network (its fused linear / mul_row ops reduce over rows for the bias and gate
// gradients) on a graph large enough for every parallel path: sampled actions, log-probabilities,
// value and every parameter gradient. PPO's results then do not depend on OMP_NUM_THREADS.
TEST_CASE("the GO policy's forward and backward are bit-identical with 1 and 2 threads", "[reliability][determinism]") {
  const ThreadsGuard guard;
  go::ZooOptions zo;
  zo.seq = 8;
  const go::OpGraph g = go::make_training_graph(go::make_zoo_graph("gnmt2", zo));
  const auto pg = go::policy::PolicyGraph::from_graph(g);
  go::policy::PolicyConfig pc;
  pc.hidden = 64;
  pc.ffn_dim = 128;
  pc.seed = 3;
  REQUIRE(g.num_ops() * pc.hidden > (1 << 16));  // above the parallel grain of the row reductions
  go::policy::GoPolicy pol(pc);
  check_threads_agree([&] {
    for (auto& p : pol.parameters()) p.zero_grad();
    go::Rng rng(11);
    auto out = pol.forward(pg, 4, go::policy::Decode::sample, nullptr, &rng);
    Variable loss = out.log_prob_sum * -1.f + out.entropy_mean * 0.01f + go::sum(out.value);
    loss.backward();
    std::vector<Tensor> r{out.actions.device.clone(), out.log_prob.value().clone(), out.value.value().clone()};
    for (const auto& [name, p] : pol.named_parameters()) r.push_back(p.grad().clone());
    return r;
  });
}

TEST_CASE("each parallel kernel is bit-identical with 1 and 2 threads", "[reliability][determinism]") {
  const ThreadsGuard guard;
  go::Rng rng(77);
  const std::int64_t rows = 1500, cols = 96;
  const Tensor x = Tensor::uniform(go::Shape{rows, cols}, rng, -2.f, 2.f);
  const Tensor dy = Tensor::uniform(go::Shape{rows, cols}, rng, -1.f, 1.f);
  const Tensor gamma0 = Tensor::uniform(go::Shape{cols}, rng, 0.5f, 1.5f);
  const Tensor beta0 = Tensor::uniform(go::Shape{cols}, rng, -0.5f, 0.5f);
  const Tensor w0 = Tensor::uniform(go::Shape{cols, 4096}, rng, -0.1f, 0.1f);
  const Tensor tall = Tensor::uniform(go::Shape{16384, 8}, rng, -1.f, 1.f);
  const Tensor chunked_a = Tensor::uniform(go::Shape{12000, 48}, rng, -1.f, 1.f);
  const Tensor chunked_b = Tensor::uniform(go::Shape{12000, 40}, rng, -1.f, 1.f);

  using Op = std::function<std::vector<Tensor>()>;
  const std::vector<std::pair<std::string, Op>> ops = {
      {"matmul [1500 x 96] x [96 x 4096] forward and backward",
       [&] {
         Variable a(x.clone(), true), w(w0.clone(), true);
         Variable y = go::matmul(a, w);
         y.backward(Tensor::full(y.shape(), 0.5f));
         return std::vector<Tensor>{y.value(), a.grad(), w.grad()};
       }},
      {"matmul with a long inner dimension ([8 x 16384] x [16384 x 8])",
       [&] {
         Variable a(tall.clone(), true);
         Variable y = go::matmul(a, a, true, false);
         y.backward(Tensor::full(y.shape(), 1.f));
         return std::vector<Tensor>{y.value(), a.grad()};
       }},
      {"matmul split into k-chunks ([48 x 12000]^T x [12000 x 40]) forward and backward",
       [&] {
         Variable a(chunked_a.clone(), true), b(chunked_b.clone(), true);
         Variable y = go::matmul(a, b, true, false);
         y.backward(Tensor::full(y.shape(), 0.5f));
         return std::vector<Tensor>{y.value(), a.grad(), b.grad()};
       }},
      {"layer_norm forward and backward (y, dx)",
       [&] {
         Variable a(x.clone(), true), g(gamma0.clone(), false), b(beta0.clone(), false);
         Variable y = go::layer_norm(a, g, b);
         y.backward(dy);
         return std::vector<Tensor>{y.value(), a.grad()};
       }},
      {"softmax, log_softmax, gelu, tanh forward and backward",
       [&] {
         Variable a(x.clone(), true);
         Variable y = go::softmax(a) + go::log_softmax(a) + go::gelu(a) * go::tanh(a);
         y.backward(dy);
         return std::vector<Tensor>{y.value(), a.grad()};
       }},
      {"sum and mean over each axis, broadcast add and its reduced gradient",
       [&] {
         Variable a(x.clone(), true), b(beta0.clone().reshape(go::Shape{1, cols}), true);
         Variable s = go::sum(a + b, 0) + go::mean(a, 0);
         Variable r = go::sum(a, 1);
         Variable loss = go::sum(s) + go::mean(r) + go::sum(a);
         loss.backward();
         return std::vector<Tensor>{s.value(), r.value(), loss.value(), a.grad(), b.grad()};
       }},
      {"clip_grad_norm and Adam on large tensors",
       [&] {
         Variable a(w0.clone(), true);
         a.add_grad(Tensor::full(w0.shape(), 0.25f));
         const float norm = go::clip_grad_norm({a}, 1.f);
         go::Adam opt({a});
         opt.step();
         return std::vector<Tensor>{Tensor::scalar(norm), a.value()};
       }},
  };
  for (const auto& [name, op] : ops) {
    INFO(name);
    check_threads_agree(op);
  }
}

TEST_CASE("layer_norm's dgamma and dbeta are bit-identical with 1 and 2 threads",
          "[reliability][determinism]") {
  const ThreadsGuard guard;
  go::Rng rng(78);
  const Tensor x = Tensor::uniform(go::Shape{1500, 96}, rng, -2.f, 2.f);
  const Tensor dy = Tensor::uniform(go::Shape{1500, 96}, rng, -1.f, 1.f);
  check_threads_agree([&] {
    Variable a(x.clone(), false), g(Tensor::ones(go::Shape{96}), true), b(Tensor::zeros(go::Shape{96}), true);
    go::layer_norm(a, g, b).backward(dy);
    return std::vector<Tensor>{g.grad(), b.grad()};
  });
}

// ---- files: atomic writes and truncated checkpoints --------------------------------------------

namespace {

// Forks a child that calls `write` in a loop, kills it with SIGKILL after a random delay, and
// returns whether a temporary file was left behind (the kill landed inside a write).
bool kill_writer_midway(const std::function<void(int)>& write, go::Rng& rng, const fs::path& dir, int max_delay_us) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    for (int i = 0;; ++i) write(i);
    ::_exit(0);
  }
  const auto delay = static_cast<int>(rng.uniform() * static_cast<float>(max_delay_us));
  std::this_thread::sleep_for(std::chrono::microseconds(delay));
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(WIFSIGNALED(status));
  bool leftover = false;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) {
      leftover = true;
      fs::remove(e.path());
    }
  return leftover;
}

}  // namespace

TEST_CASE("a write killed at a random moment leaves the old file or the new one, never a mix",
          "[reliability][io]") {
  TempDir dir("atomic");
  const std::string path = dir / "data.bin";
  // Two versions that differ everywhere, with a different length and a marker at the end.
  const std::string v0 = std::string(1 << 20, 'a') + "#end-of-v0", v1 = std::string(3 << 20, 'b') + "#end-of-v1";
  go::write_file_atomic(path, v0);
  go::Rng rng(42);
  int midway = 0;
  for (int trial = 0; trial < 16; ++trial) {
    midway += kill_writer_midway([&](int i) { go::write_file_atomic(path, i % 2 ? v0 : v1); }, rng, dir.path, 40000);
    const std::string now = go::read_file(path);
    INFO("trial " << trial << ": " << now.size() << " bytes");
    REQUIRE((now == v0 || now == v1));
  }
  // The kills did land inside writes (a temporary file was left), so the test saw the hard case.
  CHECK(midway > 0);
}

TEST_CASE("a write follows a symlink and writes into a FIFO in place, and refuses a folder", "[reliability][io]") {
  TempDir dir("targets");
  // a symlink: its target gets the data, the link stays a link
  const std::string real = dir / "real.json", link = dir / "link.json";
  go::write_file_atomic(real, "old");
  fs::create_symlink(real, link);
  go::write_file_atomic(link, "new");
  CHECK(fs::is_symlink(link));
  CHECK(go::read_file(real) == "new");
  // a chain of two links, then a loop of two: the second is one clear error, and writes nothing
  const std::string link2 = dir / "link2.json";
  fs::create_symlink(link, link2);
  go::write_file_atomic(link2, "newer");
  CHECK(go::read_file(real) == "newer");
  const std::string a = dir / "loopA", b = dir / "loopB";
  fs::create_symlink(b, a);
  fs::create_symlink(a, b);
  REQUIRE_THROWS_WITH(go::write_file_atomic(a, "x"), Catch::Contains(a) && Catch::Contains("symlink cannot be followed"));
  CHECK(fs::is_symlink(a));
  // a FIFO is written to (a reader gets the data), not replaced by a regular file
  const std::string fifo = dir / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // what a reader of the FIFO gets while `path` is written (a FIFO's open waits for the other end)
  auto read_while_writing = [&](const std::string& path, const std::string& data) {
    std::string got;
    std::thread reader([&] {
      std::ifstream in(fifo, std::ios::binary);
      got.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    });
    go::write_file_atomic(path, data);
    reader.join();
    return got;
  };
  CHECK(read_while_writing(fifo, "through the pipe") == "through the pipe");
  CHECK(fs::is_fifo(fifo));
  // and through a symlink to it, as /dev/stdout is one to a pipe
  const std::string to_fifo = dir / "to_fifo";
  fs::create_symlink(fifo, to_fifo);
  CHECK(read_while_writing(to_fifo, "through the link") == "through the link");
  CHECK(fs::is_symlink(to_fifo));
  // a folder
  REQUIRE_THROWS_WITH(go::write_file_atomic(dir.path.string(), "x"), Catch::Contains("it is a folder"));
  // no temporary file is left anywhere
  for (const auto& e : fs::directory_iterator(dir.path)) CHECK(e.path().filename().string().find(".tmp.") == std::string::npos);
}

TEST_CASE("a checkpoint save killed at a random moment leaves a loadable checkpoint", "[reliability][io]") {
  TempDir dir("ckpt");
  const std::string path = dir / "model.params";
  go::Rng rng(7);
  const go::NamedTensors a = {{"w", Tensor::uniform(go::Shape{512, 512}, rng)}, {"b", Tensor::zeros(go::Shape{512})}};
  const go::NamedTensors b = {{"w", Tensor::uniform(go::Shape{512, 512}, rng)}, {"b", Tensor::ones(go::Shape{512})}};
  go::save_tensors(path, a, {{"version", 0}});
  for (int trial = 0; trial < 12; ++trial) {
    (void)kill_writer_midway([&](int i) { go::save_tensors(path, i % 2 ? a : b, {{"version", i % 2 ? 0 : 1}}); },
                             rng, dir.path, 30000);
    const go::LoadedTensors in = go::load_tensors(path);  // never throws: the file is whole
    const go::NamedTensors& want = in.meta.at("version") == 0 ? a : b;
    REQUIRE(in.tensors.size() == 2);
    REQUIRE(same_bits(in.tensors[0].second, want[0].second));
    REQUIRE(same_bits(in.tensors[1].second, want[1].second));
  }
}

#ifdef GO_FUZZ_HAVE_SIM
TEST_CASE("a plan save killed at a random moment leaves a loadable plan", "[reliability][io]") {
  TempDir dir("plan");
  const std::string path = dir / "plan.json";
  const go::OpGraph& g = go::fuzz::plan_graphs().back();  // the largest graph available
  const auto n = static_cast<std::size_t>(g.num_ops());
  go::Plan p0 = go::Plan::single_device(g.num_ops(), 0), p1 = go::Plan::single_device(g.num_ops(), 1);
  p1.priority.assign(n, 0.5f);
  go::save_plan(p0, g, path);
  go::Rng rng(3);
  for (int trial = 0; trial < 8; ++trial) {
    (void)kill_writer_midway([&](int i) { go::save_plan(i % 2 ? p0 : p1, g, path); }, rng, dir.path, 20000);
    const go::Plan in = go::load_plan(path, g);
    REQUIRE((in.device == p0.device || in.device == p1.device));
  }
  // A truncated plan file is an error naming the file (every cut but the trailing newline).
  const std::string bytes = go::read_file(path);
  const std::string cut_path = dir / "cut.json";
  for (std::size_t cut = 0; cut + 1 < bytes.size(); cut += std::max<std::size_t>(1, bytes.size() / 97)) {
    std::ofstream(cut_path, std::ios::binary | std::ios::trunc) << bytes.substr(0, cut);
    INFO("cut at " << cut << " of " << bytes.size());
    REQUIRE_THROWS_WITH(go::load_plan(cut_path, g), Catch::Contains(cut_path));
  }
}
#endif

// test_optim checks a few cuts; this checks every one, and that the message names the file and
// says what is wrong.
TEST_CASE("a checkpoint cut at any byte is a clear error", "[reliability][io]") {
  TempDir dir("cut");
  const std::string path = dir / "full.params", cut_path = dir / "cut.params";
  go::Rng rng(11);
  go::save_tensors(path, {{"w", Tensor::uniform(go::Shape{7, 5}, rng)}, {"i", Tensor::zeros(go::Shape{3}, go::DType::i64)}},
                   {{"step", 12}});
  const std::string bytes = go::read_file(path);
  for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
    std::ofstream(cut_path, std::ios::binary | std::ios::trunc) << bytes.substr(0, cut);
    INFO("cut at " << cut << " of " << bytes.size());
    REQUIRE_THROWS_MATCHES(go::load_tensors(cut_path), go::Error,
                           Catch::Matchers::Predicate<go::Error>(
                               [&](const go::Error& e) {
                                 const std::string m = e.what();
                                 return m.find(cut_path) != std::string::npos &&
                                        (m.find("truncated") != std::string::npos ||
                                         m.find("not a go parameter file") != std::string::npos ||
                                         m.find("corrupt header") != std::string::npos);
                               },
                               "names the file and says truncated / not a parameter file / corrupt header"));
  }
  // Extra bytes after the data are an error too.
  std::ofstream(cut_path, std::ios::binary | std::ios::trunc) << bytes << "x";
  REQUIRE_THROWS_WITH(go::load_tensors(cut_path), Catch::Contains("truncated or padded"));
}

}  // namespace test_reliability
