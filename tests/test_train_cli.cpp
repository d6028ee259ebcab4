// `gopt train` (examples/gopt/train.cpp), linked into this test (gopt_commands) and run in-process as one process
// (the MPI path is tested by tests/mpi_gopt_train.sh): a run from scratch, a new run that starts from
// a pre-trained policy (--init-policy), and the errors of that option.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "train.hpp"
#include "cli_capture.hpp"
#include "rl_fixtures.hpp"
#include "go/core/file.hpp"
#include "go/nn/serialize.hpp"
#include "go/rl/ppo.hpp"

namespace test_train_cli {
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

go::test::CliResult run_gopt(const std::vector<std::string>& args) {
  return go::test::run_cli([](CLI::App& app) { gopt::add_train_command(app); }, args);
}

std::string tmp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("go_train_cli_" + std::to_string(::getpid()) + "_" + name)).string();
}

std::size_t count_lines(const std::string& s) { return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n')); }

const std::string kGraph = std::string(GO_TEST_DATA_DIR) + "/graph/example.json";

// A tiny policy (fast); `hidden` sets the network's width.
std::string tiny_config(int hidden, bool with_policy = true) {
  std::string s = R"({ "type": "go_ppo", "samples": 4, "epochs": 1, "minibatch": 2, "updates": 2, "seed": 3, "threads": 1)";
  if (with_policy)
    s += R"(, "policy": { "hidden": )" + std::to_string(hidden) +
         R"(, "heads": 2, "sage_layers": 1, "segment_length": 8, "memory_length": 8, "ffn_dim": 32, "value_hidden": 16 })";
  return s + " }";
}

// The policy parameters of two files, compared exactly.
bool same_weights(const std::string& a, const std::string& b) {
  return go::test::same_parameters(*go::rl::load_policy(a), *go::rl::load_policy(b));
}

}  // namespace

TEST_CASE("gopt train: --init-policy starts a new run from a pre-trained policy", "[rl][cli]") {
  const std::string cfg = tmp_path("cfg.json"), pre = tmp_path("pre.ckpt"), fine = tmp_path("fine.ckpt"),
                    zero = tmp_path("zero.ckpt"), fresh_cfg = tmp_path("fresh.json");
  go::write_file_atomic(cfg, tiny_config(16));
  // pre-training from scratch: 2 updates, a checkpoint and 2 metrics rows
  const auto a = run_gopt({"train", "--graphs", kGraph, "--cluster", "v100x2", "--config", cfg, "--out", pre, "--quiet"});
  INFO(a.err);
  REQUIRE(a.code == 0);
  CHECK_THAT(a.out, Contains("checkpoint " + pre));
  CHECK(count_lines(go::read_file(pre + ".csv")) == 3);

  // a new run of 0 updates from it holds exactly its weights, on another cluster, with a config
  // that leaves the network out
  go::write_file_atomic(fresh_cfg, tiny_config(0, false));
  const auto z = run_gopt({"train", "--graphs", kGraph, "--cluster", "v100x4", "--config", fresh_cfg, "--init-policy",
                           pre, "--updates", "0", "--out", zero});
  INFO(z.err);
  REQUIRE(z.code == 0);
  CHECK_THAT(z.err, Contains("from " + pre));
  CHECK(same_weights(pre, zero));
  CHECK(go::rl::PpoTrainer::checkpoint_config(zero).policy.hidden == 16);
  CHECK(go::rl::PpoTrainer::checkpoint_config(zero).updates == 0);

  // 2 updates from it change the weights; a fresh network of the default width would not even load
  // the same tensors
  const auto f = run_gopt({"train", "--graphs", kGraph, "--cluster", "v100x2", "--config", fresh_cfg, "--init-policy",
                           pre, "--out", fine, "--quiet"});
  INFO(f.err);
  REQUIRE(f.code == 0);
  CHECK_FALSE(same_weights(pre, fine));
  CHECK(go::rl::load_policy(fine)->num_parameters() == go::rl::load_policy(pre)->num_parameters());

  // re-running the same command with --resume continues the checkpoint (the option is not reapplied)
  const auto r = run_gopt({"train", "--graphs", kGraph, "--cluster", "v100x2", "--config", fresh_cfg, "--init-policy",
                           pre, "--out", fine, "--resume", "--updates", "3"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.err, Contains("resuming at 2"));
  CHECK_THAT(r.err, !Contains("from " + pre));
  for (const auto& p : {cfg, pre, pre + ".csv", fine, fine + ".csv", zero, zero + ".csv", fresh_cfg}) fs::remove(p);
}

TEST_CASE("gopt train: a checkpoint whose metadata was edited, configs out of range and paths that cannot be looked at fail with one line",
          "[rl][cli]") {
  const std::string cfg = tmp_path("h_cfg.json"), ck = tmp_path("h.ckpt"), edited = tmp_path("h_edited.ckpt");
  nlohmann::json cj = nlohmann::json::parse(tiny_config(16));
  cj["reanchor"] = true;  // the checkpoint then holds the anchor's actions
  go::write_file_atomic(cfg, cj.dump());
  REQUIRE(run_gopt({"train", "--graphs", kGraph, "--cluster", "v100x2", "--config", cfg, "--updates", "1", "--out", ck,
                    "--quiet"})
              .code == 0);
  // the checksum covers the tensors; the metadata is checked value by value
  auto resume_edited = [&](const std::function<void(nlohmann::json&)>& edit) {
    go::LoadedTensors lt = go::load_tensors(ck);
    edit(lt.meta);
    go::save_tensors(edited, lt.tensors, lt.meta);
    return run_gopt({"train", "--graphs", kGraph, "--cluster", "v100x2", "--config", cfg, "--updates", "2", "--out",
                     edited, "--resume", "--quiet"});
  };
  struct Edit {
    const char* what;
    std::function<void(nlohmann::json&)> edit;
    const char* says;
  };
  const std::vector<Edit> edits{
      {"updates_done", [](nlohmann::json& m) { m["updates_done"] = -3; }, "neither can be negative"},
      {"adam_step", [](nlohmann::json& m) { m["adam_step"] = -5; }, "neither can be negative"},
      {"best plan", [](nlohmann::json& m) {
         for (auto& d : m["graphs"][0]["best"]["device"]) d = 7;
       }, "best plan: "},
      {"anchor", [](nlohmann::json& m) {
         REQUIRE(m["graphs"][0].contains("anchor"));
         m["graphs"][0]["anchor"]["device"][0] = 9;
       }, "has device action 9 at row 0 (need 0 to 1)"}};
  for (const Edit& e : edits) {
    INFO(e.what);
    const auto r = resume_edited(e.edit);
    INFO(r.err);
    CHECK(r.code == 1);
    CHECK(count_lines(r.err) == 1);
    CHECK_THAT(r.err, Contains(edited) && Contains(e.says));
  }
  // the checkpoint as written resumes
  const auto ok = resume_edited([](nlohmann::json&) {});
  INFO(ok.err);
  CHECK(ok.code == 0);

  // a config value out of range names the config file; a count past the integer's range is no wrap
  const std::string bad = tmp_path("h_bad.json");
  for (const auto& [text, says] : std::vector<std::pair<std::string, std::string>>{
           {R"({"samples": 1})", "\"samples\" is 1, must be >= 2"},
           {R"({"samples": 4294967300})", "\"samples\" is 4294967300, out of range"},
           {R"({"epochs": -4294967295})", "\"epochs\" is -4294967295, out of range"},
           {R"({"policy": {"hidden": 0}})", "policy"}}) {
    go::write_file_atomic(bad, text);
    const auto r = run_gopt({"train", "--graphs", kGraph, "--cluster", "v100x2", "--config", bad, "--out", tmp_path("h_never.ckpt")});
    INFO(text << ": " << r.err);
    CHECK(r.code == 1);
    CHECK(count_lines(r.err) == 1);
    CHECK_THAT(r.err, Contains(bad + ": ") && Contains(says));
  }
  CHECK_FALSE(fs::exists(tmp_path("h_never.ckpt")));

  // --resume where --out cannot be looked at (a loop of two symlinks)
  const std::string la = tmp_path("h_loopA"), lb = tmp_path("h_loopB");
  fs::remove(la);
  fs::remove(lb);
  fs::create_symlink(lb, la);
  fs::create_symlink(la, lb);
  const auto loop = run_gopt({"train", "--graphs", kGraph, "--cluster", "v100x2", "--config", cfg, "--out", la, "--resume"});
  CHECK(loop.code == 1);
  CHECK(count_lines(loop.err) == 1);
  CHECK_THAT(loop.err, Contains(la) && Contains("cannot look for the checkpoint"));

  // --stop-after is a documented option (policies/README.md)
  CHECK_THAT(run_gopt({"train", "--help"}).out, Contains("--stop-after"));
  const auto neg = run_gopt({"train", "--graphs", kGraph, "--cluster", "v100x2", "--stop-after", "-5", "--out", ck});
  CHECK(neg.code != 0);
  CHECK_THAT(neg.err, Contains("--stop-after: must be a whole number >= 0, got -5"));
  // a list of nothing is an error of its own option, not of the next one's value
  const auto commas = run_gopt({"train", "--cluster", "v100x2", "--graphs", ",", "--updates", "0", "--out", ck});
  CHECK(commas.code != 0);
  CHECK_THAT(commas.err, Contains("--graphs names no graph (got ',')"));
  const auto no_cluster = run_gopt({"train", "--graphs", kGraph, "--cluster", ",", "--updates", "0", "--out", ck});
  CHECK_THAT(no_cluster.err, Contains("--cluster names no cluster (got ',')"));
  // an empty --plan-out is refused, not read as "no plan wanted"
  const auto empty = run_gopt({"train", "--graphs", kGraph, "--cluster", "v100x2", "--plan-out", "", "--out", ck});
  CHECK(empty.code != 0);
  CHECK_THAT(empty.err, Contains("--plan-out: must name a file, got an empty string"));
  for (const auto& p : {cfg, ck, ck + ".csv", edited, edited + ".csv", bad, la, lb}) fs::remove(p);
}

TEST_CASE("gopt train --resume: another cluster or another graph of the same name and size is refused", "[rl][cli]") {
  const std::string cfg = tmp_path("f_cfg.json"), ck = tmp_path("f.ckpt"), other = tmp_path("f_graph.json");
  go::write_file_atomic(cfg, tiny_config(16));
  REQUIRE(run_gopt({"train", "--graphs", kGraph, "--cluster", "v100x2", "--config", cfg, "--updates", "1", "--out", ck,
                    "--quiet"})
              .code == 0);
  // the same device count on slower GPUs: the checkpoint's best times and reference are v100 times
  const auto p100 = run_gopt({"train", "--graphs", kGraph, "--cluster", "p100x2", "--updates", "2", "--out", ck, "--resume"});
  CHECK(p100.code != 0);
  CHECK(count_lines(p100.err) == 1);
  CHECK_THAT(p100.err, Contains(ck + ": graph 0 of the checkpoint ran on cluster 'v100x2', this run's is 'p100x2'"));
  // one op's FLOPs changed: same name, same op count, another graph
  nlohmann::json g = nlohmann::json::parse(go::read_file(kGraph), nullptr, true, /*ignore_comments=*/true);
  g["ops"][2]["flops"] = g["ops"][2].value("flops", 0.0) * 2 + 1;
  go::write_file_atomic(other, g.dump());
  const auto edited = run_gopt({"train", "--graphs", other, "--cluster", "v100x2", "--updates", "2", "--out", ck, "--resume"});
  CHECK(edited.code != 0);
  CHECK(count_lines(edited.err) == 1);
  CHECK_THAT(edited.err, Contains("sizes or costs differ from this run's"));
  // the same graph and cluster resume
  const auto same = run_gopt({"train", "--graphs", kGraph, "--cluster", "v100x2", "--updates", "2", "--out", ck, "--resume",
                              "--quiet"});
  INFO(same.err);
  CHECK(same.code == 0);
  for (const auto& p : {cfg, ck, ck + ".csv", other}) fs::remove(p);
}

TEST_CASE("gopt train: a run that diverges stops at the step whose gradient is not finite, naming lr", "[rl][cli]") {
  const std::string cfg = tmp_path("d_cfg.json"), ck = tmp_path("d.ckpt");
  nlohmann::json cj = nlohmann::json::parse(tiny_config(16));
  cj["lr"] = 1e30;
  go::write_file_atomic(cfg, cj.dump());
  const auto r = run_gopt({"train", "--graphs", kGraph, "--cluster", "v100x2", "--config", cfg, "--updates", "3",
                           "--out", ck, "--quiet"});
  CHECK(r.code != 0);
  CHECK(count_lines(r.err) == 1);
  CHECK_THAT(r.err, Contains("the gradient is not finite") && Contains("is \"lr\" 1e+30 too high?"));
  for (const auto& p : {cfg, ck, ck + ".csv"}) fs::remove(p);
}

TEST_CASE("gopt train: graphs that share a name are told apart by their files, and the progress line of several is their mean speedup",
          "[rl][cli]") {
  const std::string cfg = tmp_path("n_cfg.json"), ck = tmp_path("n.ckpt"), a = tmp_path("n_a.json"), b = tmp_path("n_b.json");
  go::write_file_atomic(cfg, tiny_config(16));
  go::write_file_atomic(a, go::read_file(kGraph));
  go::write_file_atomic(b, go::read_file(kGraph));
  const auto r = run_gopt({"train", "--graphs", a + "," + b, "--cluster", "v100x2", "--config", cfg, "--updates", "1",
                           "--out", ck});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains(a + ": best") && Contains(b + ": best"));
  CHECK_THAT(r.err, Contains("best speedup ") && Contains("x (mean over the update's graphs)"));
  for (const auto& p : {cfg, ck, ck + ".csv", a, b}) fs::remove(p);
}

TEST_CASE("gopt train --time-limit: 0 is no limit, and a limit reached at once still ends after one update", "[rl][cli]") {
  const std::string cfg = tmp_path("t_cfg.json"), ck = tmp_path("t.ckpt");
  go::write_file_atomic(cfg, tiny_config(16));
  auto updates_of = [&](const char* limit) {
    const auto r = run_gopt({"train", "--graphs", kGraph, "--cluster", "v100x2", "--config", cfg, "--updates", "3",
                             "--time-limit", limit, "--out", ck, "--quiet"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    return count_lines(go::read_file(ck + ".csv")) - 1;  // the metrics CSV: a header and one row per update
  };
  CHECK(updates_of("0") == 3);
  CHECK(updates_of("1e-9") == 1);
  for (const auto& p : {cfg, ck, ck + ".csv"}) fs::remove(p);
}

TEST_CASE("gopt train: several clusters train one policy on every graph on each", "[rl][cli]") {
  const std::string cfg = tmp_path("m_cfg.json"), out = tmp_path("m_out.ckpt");
  go::write_file_atomic(cfg, tiny_config(16));
  const auto r = run_gopt({"train", "--graphs", kGraph, "--cluster", "v100x2,v100x4", "--config", cfg, "--out", out});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.err, Contains("1 graph(s) on v100x2 (2 devices), v100x4 (4 devices)"));
  CHECK_THAT(r.out, Contains("two-layer-mlp@v100x2: best") && Contains("two-layer-mlp@v100x4: best"));
  // resuming needs the same clusters in the same order
  const auto swapped = run_gopt({"train", "--graphs", kGraph, "--cluster", "v100x4,v100x2", "--out", out, "--resume",
                                 "--updates", "3"});
  CHECK(swapped.code != 0);
  CHECK(count_lines(swapped.err) == 1);
  CHECK_THAT(swapped.err, Contains(out) && Contains("2-device cluster, this run's on 4"));
  const auto bad = run_gopt({"train", "--graphs", kGraph, "--cluster", "v100x2,nonesuch", "--out", tmp_path("m_bad.ckpt")});
  CHECK(bad.code != 0);
  CHECK(count_lines(bad.err) == 1);
  CHECK_THAT(bad.err, Contains("nonesuch"));
  for (const auto& p : {cfg, out, out + ".csv"}) fs::remove(p);
  for (const std::string& option : {"--time-limit", "--updates"}) {
    const auto neg = run_gopt({"train", "--graphs", kGraph, "--cluster", "v100x2", option, "-1", "--out", tmp_path("m_neg.ckpt")});
    CHECK(neg.code != 0);
    CHECK(count_lines(neg.err) == 1);
    CHECK_THAT(neg.err, Contains(option + ": must be a") && Contains(">= 0, got -1"));
  }
}

TEST_CASE("gopt train: --init-policy errors name the file and the problem", "[rl][cli]") {
  const std::string cfg = tmp_path("e_cfg.json"), pre = tmp_path("e_pre.ckpt"), other = tmp_path("e_other.json"),
                    out = tmp_path("e_out.ckpt");
  go::write_file_atomic(cfg, tiny_config(16));
  REQUIRE(run_gopt({"train", "--graphs", kGraph, "--cluster", "v100x2", "--config", cfg, "--updates", "0", "--out", pre})
              .code == 0);

  const auto missing = run_gopt({"train", "--graphs", kGraph, "--cluster", "v100x2", "--init-policy", "/nonexistent/p.ckpt",
                                 "--out", out});
  CHECK(missing.code != 0);
  CHECK(count_lines(missing.err) == 1);
  CHECK_THAT(missing.err, Contains("/nonexistent/p.ckpt") && Contains("not found"));

  // a config whose network differs from the policy's
  go::write_file_atomic(other, tiny_config(32));
  const auto differs = run_gopt({"train", "--graphs", kGraph, "--cluster", "v100x2", "--config", other, "--init-policy", pre,
                                 "--out", out});
  CHECK(differs.code != 0);
  CHECK(count_lines(differs.err) == 1);
  CHECK_THAT(differs.err, Contains(other) && Contains("\"policy\" section differs") && Contains(pre));

  // not a policy file
  const auto bad = run_gopt({"train", "--graphs", kGraph, "--cluster", "v100x2", "--init-policy", other, "--out", out});
  CHECK(bad.code != 0);
  CHECK(count_lines(bad.err) == 1);
  CHECK_THAT(bad.err, Contains(other));

  // a cluster larger than the policy's device embeddings (max_devices 8)
  const auto big = run_gopt({"train", "--graphs", kGraph, "--cluster", "v100x16", "--config", cfg, "--init-policy", pre,
                             "--out", out});
  CHECK(big.code != 0);
  CHECK(count_lines(big.err) == 1);
  CHECK_THAT(big.err, Contains("16 devices") && Contains("at most 8"));
  CHECK_FALSE(fs::exists(out));

  // a PPO checkpoint whose metadata lost its training config: an error naming the file, from
  // --init-policy and from the library's readers alike; the same tensors saved as a policy file
  // alone are not a checkpoint (no config), and the intact checkpoint's config is the one it ran
  go::LoadedTensors lt = go::load_tensors(pre);
  REQUIRE(go::rl::PpoTrainer::saved_config(lt, pre));
  CHECK(go::rl::PpoTrainer::saved_config(lt, pre)->to_json() == go::rl::PpoTrainer::checkpoint_config(pre).to_json());
  CHECK(go::rl::PpoTrainer::saved_config(lt, pre)->policy.hidden == 16);
  const std::string nocfg = tmp_path("e_nocfg.ckpt"), alone = tmp_path("e_alone.bin");
  lt.meta.erase("config");
  go::save_tensors(nocfg, lt.tensors, lt.meta);
  const auto lost = run_gopt({"train", "--graphs", kGraph, "--cluster", "v100x2", "--init-policy", nocfg, "--out", out});
  CHECK(lost.code != 0);
  CHECK(count_lines(lost.err) == 1);
  CHECK_THAT(lost.err, Contains(nocfg) && Contains("without its training config"));
  CHECK_THROWS_WITH(go::rl::load_policy(nocfg), Contains(nocfg) && Contains("without its training config"));
  CHECK_THROWS_WITH(go::rl::PpoTrainer::checkpoint_config(nocfg), Contains(nocfg) && Contains("without its training config"));
  go::rl::load_policy(pre)->save_policy(alone);
  CHECK_FALSE(go::rl::PpoTrainer::saved_config(go::load_tensors(alone), alone));
  CHECK_THROWS_WITH(go::rl::PpoTrainer::checkpoint_config(alone), Contains(alone) && Contains("not a PPO checkpoint"));
  CHECK(same_weights(pre, alone));
  for (const auto& p : {cfg, pre, pre + ".csv", other, nocfg, alone}) fs::remove(p);
}

}  // namespace test_train_cli
