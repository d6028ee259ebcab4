// `gopt place`, `gopt eval` (and `gopt simulate --plan` to re-measure their plans): the
// subcommands from examples/gopt, linked into this test (gopt_commands) and run in-process.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval.hpp"
#include "place.hpp"
#include "simulate.hpp"
#include "cli_capture.hpp"
#include "go/baselines/place.hpp"
#include "go/core/file.hpp"
#include "go/graph/load.hpp"
#include "go/graph/training.hpp"
#include "go/rl/place_go.hpp"
#include "go/sim/plan.hpp"
#include "go/sim/simulator.hpp"

namespace test_place_cli {
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

go::test::CliResult run_gopt(const std::vector<std::string>& args) {
  return go::test::run_cli(
      [](CLI::App& app) {
        gopt::add_place_command(app);
        gopt::add_eval_command(app);
        gopt::add_simulate_command(app);
      },
      args);
}

std::string tmp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("go_place_cli_" + std::to_string(::getpid()) + "_" + name)).string();
}

std::size_t count_lines(const std::string& s) { return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n')); }

// `gopt simulate <graph> --cluster <c> --plan <plan> --json`
nlohmann::json simulate_plan(const std::string& graph, const std::string& cluster, const std::string& plan) {
  const auto r = run_gopt({"simulate", graph, "--cluster", cluster, "--plan", plan, "--json"});
  REQUIRE(r.code == 0);
  return nlohmann::json::parse(r.out);
}

}  // namespace

TEST_CASE("gopt place --json: every method, plan file re-simulates to the same step time") {
  const std::string plan = tmp_path("plan.json");
  for (const std::string m : {"default", "human", "metis", "heft", "m-topo", "m-etf", "m-sct", "random", "anneal"}) {
    if (m == "metis" && !go::metis_available()) continue;
    INFO(m);
    fs::remove(plan);
    const auto r = run_gopt({"place", "zoo:rnnlm2", "--cluster", "v100x2", "--method", m, "--budget", "20", "--json", "--out", plan});
    REQUIRE(r.code == 0);
    const auto j = nlohmann::json::parse(r.out);
    REQUIRE(j.contains("step_time_ms"));
    REQUIRE(j.contains("valid"));
    REQUIRE(j.contains("optimize_seconds"));
    CHECK(j["method"] == m);
    CHECK(j["valid"] == true);
    CHECK(j["optimize_seconds"].get<double>() >= 0.0);
    const double t = j["step_time_ms"].get<double>();
    CHECK(t > 0);
    if (m == "random" || m == "anneal") CHECK(j["simulations"].get<std::int64_t>() == 20);
    REQUIRE(fs::exists(plan));
    const auto s = simulate_plan("zoo:rnnlm2", "v100x2", plan);
    CHECK(s["valid"] == true);
    CHECK(s["step_time_ms"].get<double>() == Approx(t).epsilon(1e-12));
  }
  fs::remove(plan);
}

TEST_CASE("gopt place --fusion xla writes fusion groups that re-simulate to the same step time") {
  const std::string plan = tmp_path("xla.json");
  const auto r = run_gopt({"place", "zoo:rnnlm2", "--cluster", "v100x2", "--method", "human", "--fusion", "xla", "--json", "--out", plan});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["fusion"] == "xla");
  CHECK(j["valid"] == true);
  const go::OpGraph g = go::load_graph("zoo:rnnlm2");
  const go::Plan p = go::load_plan(plan, g);
  REQUIRE(p.fusion.size() == static_cast<std::size_t>(g.num_ops()));
  // some group has at least two members
  std::vector<std::int32_t> members(p.fusion.size() + 1, 0);
  std::int32_t largest = 0;
  for (std::int32_t f : p.fusion)
    if (f >= 0) largest = std::max(largest, ++members[static_cast<std::size_t>(f)]);
  CHECK(largest >= 2);
  // the report counts what the plan fuses: the ops of groups of two or more, and those groups
  std::int64_t fused = 0, groups = 0;
  for (std::int32_t k : members)
    if (k >= 2) fused += k, ++groups;
  CHECK(j["fused_ops"] == fused);
  CHECK(j["fusion_groups"] == groups);
  const auto s = simulate_plan("zoo:rnnlm2", "v100x2", plan);
  CHECK(s["step_time_ms"].get<double>() == Approx(j["step_time_ms"].get<double>()).epsilon(1e-12));
  // and fusion is faster than the same placement without it
  const auto plain = run_gopt({"place", "zoo:rnnlm2", "--cluster", "v100x2", "--method", "human", "--json"});
  REQUIRE(plain.code == 0);
  CHECK(j["step_time_ms"].get<double>() < nlohmann::json::parse(plain.out)["step_time_ms"].get<double>());
  fs::remove(plan);
}

TEST_CASE("gopt place: a plan that cannot fit says so") {
  const std::string cl = tmp_path("tiny.json");
  // two V100s with 64 MB each: rnnlm2's parameters alone do not fit
  go::write_file_atomic(cl, R"({"format": "go-cluster", "version": 1, "name": "tiny",
    "devices": {"count": 2, "type": "v100", "memory_bytes": 67108864},
    "links": {"bandwidth": 25e9, "latency": 2e-5}})");
  const auto r = run_gopt({"place", "zoo:rnnlm2", "--cluster", cl, "--method", "m-etf", "--json"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["valid"] == false);
  CHECK(j["status"] == "out_of_memory");
  CHECK_THAT(j["reason"].get<std::string>(), Contains("out of memory"));
  const auto text = run_gopt({"place", "zoo:rnnlm2", "--cluster", cl, "--method", "default"});
  REQUIRE(text.code == 0);
  CHECK_THAT(text.out, Contains("valid        no: out of memory"));
  fs::remove(cl);
}

// --fit-memory: rnnlm2 (1.61 GB on device 0 when every op is there) on two devices of 1.2 GB.
TEST_CASE("gopt place --fit-memory: a plan that runs out of memory, fitted to it") {
  const std::string cl = tmp_path("small.json");
  go::write_file_atomic(cl, R"({"format": "go-cluster", "version": 1, "name": "small",
    "devices": {"count": 2, "type": "v100", "memory_bytes": 1200000000},
    "links": {"bandwidth": 25e9, "latency": 2e-5}})");
  const std::string plan = tmp_path("fitted.json");
  const auto plain = run_gopt({"place", "zoo:rnnlm2", "--cluster", cl, "--method", "default", "--json"});
  REQUIRE(plain.code == 0);
  CHECK(nlohmann::json::parse(plain.out)["status"] == "out_of_memory");
  const auto r = run_gopt({"place", "zoo:rnnlm2", "--cluster", cl, "--method", "default", "--fit-memory", "--json",
                           "--out", plan});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["valid"] == true);
  CHECK_THAT(j["note"].get<std::string>(), Contains("fitted to memory: 1 op set(s) moved"));
  CHECK(j["simulations"].get<int>() >= 2);
  for (const auto& peak : j["peak_memory_bytes"]) CHECK(peak.get<std::int64_t>() <= 1200000000);
  const auto again = simulate_plan("zoo:rnnlm2", cl, plan);
  CHECK(again["valid"] == true);
  CHECK(again["step_time_ms"].get<double>() == Approx(j["step_time_ms"].get<double>()).epsilon(1e-12));
  // gopt eval takes the flag too: the fitted plan's step time in its row
  const auto e = run_gopt({"eval", "--graphs", "zoo:rnnlm2", "--cluster", cl, "--methods", "default", "--fit-memory"});
  REQUIRE(e.code == 0);
  char cell[64];
  std::snprintf(cell, sizeof cell, "%.2f", j["step_time_ms"].get<double>());
  CHECK_THAT(e.out, Contains(cell));
  // gopt simulate --fit-memory fits any plan the same way (here the default one) and --out writes it
  const std::string sim_out = tmp_path("fitted_by_simulate.json");
  const auto s = run_gopt({"simulate", "zoo:rnnlm2", "--cluster", cl, "--fit-memory", "--json", "--out", sim_out});
  REQUIRE(s.code == 0);
  const auto js = nlohmann::json::parse(s.out);
  CHECK(js["valid"] == true);
  CHECK_THAT(js["fitted"].get<std::string>(), Contains("fitted to memory: 1 op set(s) moved"));
  CHECK(js["step_time_ms"].get<double>() == j["step_time_ms"].get<double>());
  CHECK(simulate_plan("zoo:rnnlm2", cl, sim_out)["step_time_ms"].get<double>() == js["step_time_ms"].get<double>());
  const auto text = run_gopt({"simulate", "zoo:rnnlm2", "--cluster", cl, "--plan", sim_out, "--fit-memory"});
  REQUIRE(text.code == 0);  // a plan that fits is simulated as it is, and nothing is said
  CHECK_THAT(text.out, !Contains("fitted to memory"));
  CHECK_THAT(text.out, Contains("valid        yes"));
  const auto fitted_text = run_gopt({"simulate", "zoo:rnnlm2", "--cluster", cl, "--fit-memory"});
  REQUIRE(fitted_text.code == 0);
  CHECK_THAT(fitted_text.out, Contains("plan         default (every op on gpu0), fitted to memory"));
  CHECK_THAT(fitted_text.out, Contains("fitted to memory: 1 op set(s) moved"));
  // where nothing fits (64 MB devices), the plan as given, out of memory, and why
  go::write_file_atomic(cl, R"({"format": "go-cluster", "version": 1, "name": "tiny",
    "devices": {"count": 2, "type": "v100", "memory_bytes": 67108864},
    "links": {"bandwidth": 25e9, "latency": 2e-5}})");
  const auto none = run_gopt({"simulate", "zoo:rnnlm2", "--cluster", cl, "--fit-memory"});
  REQUIRE(none.code == 0);
  CHECK_THAT(none.out, Contains("no plan found that fits"));
  CHECK_THAT(none.out, Contains("valid        no: out of memory"));
  fs::remove(cl);
  fs::remove(plan);
  fs::remove(sim_out);
}

TEST_CASE("gopt simulate: a plan with a fusion group no compiler builds is invalid, with the reason") {
  // a matmul fused with the split that reads it: a split is no epilogue (go/graph/fusion_rules.hpp)
  const go::OpGraph g = go::load_graph("zoo:rnnlm2");
  go::Plan p = go::Plan::single_device(g.num_ops());
  p.fusion.assign(static_cast<std::size_t>(g.num_ops()), -1);
  go::OpId mm = -1;
  for (const go::Op& o : g.ops())
    if (o.kind == go::OpKind::matmul && g.op(g.succ(o.id)[0]).kind == go::OpKind::split) {
      mm = o.id;
      break;
    }
  REQUIRE(mm >= 0);
  p.fusion[static_cast<std::size_t>(mm)] = p.fusion[static_cast<std::size_t>(g.succ(mm)[0])] = mm;
  const std::string why = go::check_plan(g, p, 2);
  CHECK_THAT(why, Contains("is not a kernel a compiler builds") && Contains("cannot be an epilogue of library kernel"));
  const std::string plan = tmp_path("illegal_fusion.json");
  go::save_plan(p, g, plan);
  const auto j = simulate_plan("zoo:rnnlm2", "v100x2", plan);  // exits 0: an invalid plan is a result
  CHECK(j["valid"] == false);
  CHECK(j["status"] == "fusion_illegal");
  CHECK(j["reason"] == why);
  CHECK(j["step_time_ms"].is_null());
  const auto text = run_gopt({"simulate", "zoo:rnnlm2", "--cluster", "v100x2", "--plan", plan});
  REQUIRE(text.code == 0);
  CHECK_THAT(text.out, Contains("valid        no: " + why));
  fs::remove(plan);
}

TEST_CASE("gopt place: bad method and missing graph fail with one line") {
  const auto bad = run_gopt({"place", "zoo:rnnlm2", "--cluster", "v100x2", "--method", "nonesuch"});
  CHECK(bad.code != 0);
  CHECK(bad.out.empty());
  CHECK(count_lines(bad.err) == 1);
  CHECK_THAT(bad.err, Contains("unknown method 'nonesuch'") && Contains("m-etf"));
  const std::string missing = tmp_path("no_such_graph.json");
  const auto miss = run_gopt({"place", missing, "--cluster", "v100x2", "--method", "human"});
  CHECK(miss.code != 0);
  CHECK(count_lines(miss.err) == 1);
  CHECK_THAT(miss.err, Contains(missing));
  const auto badfusion = run_gopt({"place", "zoo:rnnlm2", "--cluster", "v100x2", "--method", "human", "--fusion", "tvm"});
  CHECK(badfusion.code != 0);
  CHECK(count_lines(badfusion.err) == 1);
  CHECK_THAT(badfusion.err, Contains("unknown fusion mode 'tvm'"));
  const auto badeval = run_gopt({"eval", "--graphs", "zoo:rnnlm2", "--cluster", "v100x2", "--methods", "human,nonesuch"});
  CHECK(badeval.code != 0);
  CHECK(count_lines(badeval.err) == 1);
  CHECK_THAT(badeval.err, Contains("unknown method 'nonesuch'"));
  // Counts and durations: one line naming the option and the value (train: tests/test_train_cli.cpp).
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"place", "zoo:rnnlm2", "--cluster", "v100x2", "--method", "anneal", "--time-limit", "-1"},
        std::vector<std::string>{"eval", "--graphs", "zoo:rnnlm2", "--cluster", "v100x2", "--methods", "anneal",
                                 "--time-limit", "nan"}}) {
    const auto r = run_gopt(args);
    INFO(args[0] << ": " << r.err);
    CHECK(r.code != 0);
    CHECK(count_lines(r.err) == 1);
    CHECK_THAT(r.err, Contains("--time-limit: must be a number of seconds >= 0, got " + args.back()));
  }
  const auto finetune = run_gopt({"place", "zoo:rnnlm2", "--cluster", "v100x2", "--method", "go", "--finetune", "-3"});
  CHECK(finetune.code != 0);
  CHECK(count_lines(finetune.err) == 1);
  CHECK_THAT(finetune.err, Contains("--finetune: must be a whole number >= 0, got -3"));
  // a budget of 0 simulations is refused by the flag, as every method that reads it would
  for (const char* cmd : {"place", "eval"}) {
    const bool place = std::string(cmd) == "place";
    std::vector<std::string> args{cmd, place ? "zoo:rnnlm2" : "--graphs=zoo:rnnlm2", "--cluster", "v100x2", "--budget", "0",
                                  place ? "--method" : "--methods", "anneal"};
    const auto r = run_gopt(args);
    INFO(cmd << ": " << r.err);
    CHECK(r.code != 0);
    CHECK(count_lines(r.err) == 1);
    CHECK_THAT(r.err, Contains("--budget: must be a whole number >= 1, got 0"));
  }
  // seeds: the whole uint64 range, as Python's seed= and a config's "seed"
  for (const char* bad : {"-1", "18446744073709551616", "1.5", "+3"}) {
    const auto r = run_gopt({"place", "zoo:rnnlm2", "--cluster", "v100x2", "--method", "random", "--seed", bad});
    INFO(bad);
    CHECK(r.code != 0);
    CHECK_THAT(r.err, Contains(std::string("--seed: must be a whole number from 0 to 18446744073709551615, got ") + bad));
  }
  const auto top = run_gopt({"place", "zoo:rnnlm2", "--cluster", "v100x2", "--method", "random", "--seed",
                             "18446744073709551615", "--budget", "3", "--json"});
  REQUIRE(top.code == 0);
  CHECK(nlohmann::json::parse(top.out)["seed"].get<std::uint64_t>() == 18446744073709551615ull);
}

// A bad list for an anchor flag: exit non-zero, one line naming the flag and what it expects.
static void check_bad_anchor_list(const std::string& flag, const std::string& bad, const std::string& known) {
  INFO(flag << " " << bad);
  const auto r = run_gopt({"place", "zoo:rnnlm2", "--cluster", "v100x2", "--method", "best-heuristic", flag, bad});
  CHECK(r.code != 0);
  CHECK(r.out.empty());
  CHECK(count_lines(r.err) == 1);
  CHECK_THAT(r.err, Contains(flag + ": ") && (Contains("expected a comma-separated list of " + known) || Contains("twice")));
}

// A flag the method does not read is named on stderr, with the methods that read it; the run goes
// on. gopt eval says so only for a flag that none of its methods reads.
TEST_CASE("gopt place and eval: a flag no method given reads gets a note, the run goes on") {
  go::rl::register_go_methods("");  // the go methods, as gopt's main registers them
  const auto human = run_gopt({"place", "zoo:rnnlm2", "--cluster", "v100x2", "--method", "human", "--policy", "x.ckpt",
                               "--anchor-ties", "latest", "--json"});
  REQUIRE(human.code == 0);
  CHECK(nlohmann::json::parse(human.out)["valid"] == true);
  CHECK_THAT(human.err, Contains("gopt place: note: --policy is not used by human (it is read by go, go-zero-shot, "
                                 "go-one); ignored"));
  CHECK_THAT(human.err, Contains("--anchor-ties is not used by human"));
  const auto fused = run_gopt({"place", "zoo:rnnlm2", "--cluster", "v100x2", "--method", "best-heuristic", "--fusion",
                               "xla"});
  REQUIRE(fused.code == 0);
  CHECK_THAT(fused.err, Contains("--fusion is not used by best-heuristic"));
  const auto read = run_gopt({"place", "zoo:rnnlm2", "--cluster", "v100x2", "--method", "anneal", "--budget", "5",
                              "--time-limit", "10"});
  REQUIRE(read.code == 0);
  CHECK_THAT(read.err, !Contains("note:"));
  const auto eval = run_gopt({"eval", "--graphs", "zoo:rnnlm2", "--cluster", "v100x2", "--methods", "human,anneal",
                              "--budget", "5", "--finetune", "3"});
  REQUIRE(eval.code == 0);
  CHECK_THAT(eval.err, Contains("gopt eval: note: --finetune is not used by any of human, anneal (it is read by go, "
                                "go-one, anchor-search); ignored"));
  CHECK_THAT(eval.err, !Contains("--budget is not used"));
  // an unknown method is place()'s error, not a note
  const auto unknown = run_gopt({"place", "zoo:rnnlm2", "--cluster", "v100x2", "--method", "humane", "--policy", "x"});
  CHECK(unknown.code != 0);
  CHECK_THAT(unknown.err, !Contains("note:"));
  CHECK_THAT(unknown.err, Contains("unknown method 'humane'"));
}

// --patience: fine-tuning (here anchor-search's rounds, which need no policy) stops after that many
// rounds in a row found no faster plan. Against the same search without it: it stops where that
// search had gone P rounds without improving and answers what that search had then; 0, or a
// patience longer than the run, changes nothing. A negative count is a one-line error, and a
// method that does not fine-tune notes the flag.
TEST_CASE("gopt place --patience: fine-tuning stops after that many updates without a faster plan") {
  go::rl::register_go_methods("");
  const go::OpGraph g = go::make_training_graph(go::load_graph("zoo:rnnlm2:seq=4"));
  const go::Cluster cl = go::cluster_preset("v100x2");
  auto rounds = [](const go::PlaceResult& r) {
    const auto at = r.note.find("searched ");
    REQUIRE(at != std::string::npos);
    return std::stoll(r.note.substr(at + 9));
  };
  go::PlaceOptions o;
  o.finetune = 30;
  const go::PlaceResult full = go::place("anchor-search", g, cl, o);
  REQUIRE(full.valid);
  CHECK(rounds(full) == 30);
  for (const std::int64_t patience : {1, 2, 3}) {
    INFO("patience " << patience);
    o.patience = patience;
    o.finetune = 30;
    const go::PlaceResult p = go::place("anchor-search", g, cl, o);
    REQUIRE(p.valid);
    const std::int64_t n = rounds(p);
    REQUIRE(n < 30);  // this search stops improving long before 30 rounds (full: improvements at rounds 1 and about 18)
    CHECK_THAT(p.note, Contains("(stopped: " + std::to_string(patience) + " updates in a row found no faster plan)"));
    CHECK(p.step_time >= full.step_time);
    o.patience = 0;
    o.finetune = n;  // the search without patience, cut at the same round: the same plan and simulations
    const go::PlaceResult cut = go::place("anchor-search", g, cl, o);
    CHECK(cut.step_time == p.step_time);
    CHECK(cut.simulations == p.simulations);
    CHECK(cut.plan.device == p.plan.device);
    CHECK_THAT(cut.note, !Contains("(stopped"));
    o.finetune = n - patience;  // its last `patience` rounds found nothing ...
    CHECK(go::place("anchor-search", g, cl, o).step_time == p.step_time);
    o.finetune = n - patience - 1;  // ... and the round before them did
    CHECK(go::place("anchor-search", g, cl, o).step_time > p.step_time);
  }
  o.finetune = 30;
  o.patience = 100;  // longer than the run: no stop
  const go::PlaceResult patient = go::place("anchor-search", g, cl, o);
  CHECK(patient.step_time == full.step_time);
  CHECK(patient.simulations == full.simulations);
  CHECK_THAT(patient.note, !Contains("(stopped"));
  const auto bad = run_gopt({"place", "zoo:rnnlm2", "--cluster", "v100x2", "--method", "anchor-search", "--patience", "-1"});
  CHECK(bad.code != 0);
  CHECK(count_lines(bad.err) == 1);
  CHECK_THAT(bad.err, Contains("--patience: must be a whole number >= 0, got -1"));
  const auto human = run_gopt({"place", "zoo:rnnlm2", "--cluster", "v100x2", "--method", "human", "--patience", "2"});
  REQUIRE(human.code == 0);
  CHECK_THAT(human.err, Contains("gopt place: note: --patience is not used by human (it is read by go, go-one, "
                                 "anchor-search); ignored"));
  const auto json = run_gopt({"place", "zoo:rnnlm2:seq=4", "--training", "--cluster", "v100x2", "--method",
                              "anchor-search", "--finetune", "30", "--patience", "2", "--json"});
  REQUIRE(json.code == 0);
  CHECK_THAT(nlohmann::json::parse(json.out)["note"].get<std::string>(), Contains("(stopped: 2 updates"));
}

// Progress of the methods that run in updates: PlaceOptions::on_update after each update (round),
// with the count, the best plan so far (never rising, and the answer's at the end but for the
// final relabelling) and the seconds; never for the other methods; go-one under a time limit has
// no count. gopt place --progress prints a line per update on stderr when it is not a terminal
// (here), --no-progress none, and the two together are refused.
TEST_CASE("gopt place --progress: a line per update of the methods that run in updates") {
  go::rl::register_go_methods("");
  const go::OpGraph g = go::make_training_graph(go::load_graph("zoo:rnnlm2:seq=4"));
  const go::Cluster cl = go::cluster_preset("v100x2");
  std::vector<go::UpdateProgress> seen;
  go::PlaceOptions o;
  o.finetune = 4;
  o.on_update = [&](const go::UpdateProgress& p) { seen.push_back(p); };
  const go::PlaceResult r = go::place("anchor-search", g, cl, o);
  REQUIRE(seen.size() == 4u);
  double last = std::numeric_limits<double>::infinity(), seconds = 0;
  for (std::size_t k = 0; k < seen.size(); ++k) {
    CHECK(seen[k].update == static_cast<std::int64_t>(k) + 1);
    CHECK(seen[k].updates == 4);
    CHECK(seen[k].best_step_time <= last);
    CHECK(seen[k].seconds >= seconds);
    CHECK(seen[k].time_limit == 0);
    last = seen[k].best_step_time;
    seconds = seen[k].seconds;
  }
  CHECK(r.step_time <= last);
  CHECK(seconds <= r.optimize_seconds);
  seen.clear();
  (void)go::place("human", g, cl, o);
  (void)go::place("anneal", g, cl, o);
  CHECK(seen.empty());
  o.finetune = -1;
  o.time_limit = 0.5;
  o.policy = std::string(GO_TEST_DATA_DIR) + "/../../policies/go-zoo-v100x248.ckpt";  // go-one takes its architecture
  (void)go::place("go-one", g, cl, o);
  REQUIRE(!seen.empty());
  CHECK(seen.back().updates == 0);
  CHECK(seen.back().time_limit == 0.5);

  const std::vector<std::string> args{"place", "zoo:rnnlm2:seq=4", "--training", "--cluster", "v100x2", "--method",
                                      "anchor-search", "--finetune", "3", "--json"};
  auto with = [&](const std::vector<std::string>& more) {
    std::vector<std::string> a = args;
    a.insert(a.end(), more.begin(), more.end());
    return run_gopt(a);
  };
  const auto on = with({"--progress"});
  REQUIRE(on.code == 0);
  CHECK(count_lines(on.err) == 3);
  CHECK_THAT(on.err, Contains("gopt place: anchor-search update 1/3  best "));
  CHECK_THAT(on.err, Contains("gopt place: anchor-search update 3/3  best "));
  CHECK_THAT(on.err, Contains(" ETA "));
  CHECK(nlohmann::json::parse(on.out)["valid"].get<bool>());  // stdout is the JSON alone
  const auto off = with({"--no-progress"});
  REQUIRE(off.code == 0);
  CHECK(off.err.empty());
  CHECK(with({}).err.empty());  // stderr is not a terminal: off by default
  const auto human = run_gopt({"place", "zoo:rnnlm2", "--cluster", "v100x2", "--method", "human", "--progress"});
  REQUIRE(human.code == 0);
  CHECK_THAT(human.err, Contains("gopt place: note: --progress is not used by human (it is read by go, go-one, "
                                 "anchor-search); ignored"));
  const auto both = with({"--progress", "--no-progress"});
  CHECK(both.code != 0);
  CHECK(count_lines(both.err) == 1);
  CHECK_THAT(both.err, Contains("--progress excludes --no-progress"));
  const auto eval = run_gopt({"eval", "--graphs", "zoo:rnnlm2:seq=4", "--training", "--cluster", "v100x2", "--methods",
                              "human,anchor-search", "--finetune", "2", "--progress"});
  REQUIRE(eval.code == 0);
  CHECK_THAT(eval.err, Contains("gopt eval: zoo:rnnlm2:seq=4 anchor-search update 1/2  best "));
  CHECK_THAT(eval.err, Contains("gopt eval: zoo:rnnlm2:seq=4 anchor-search update 2/2  best "));
  CHECK_THAT(eval.err, !Contains("human update"));
}

// --anchor-ties: the orders GO's anchor is chosen from; best-heuristic tries the others too, as
// answers. On the RNNLM training graph latest-first is the fastest (tests/test_rl.cpp rebuilds that
// plan by hand), found either way, and the plan written re-simulates to the step time reported. A
// bad list fails with one line naming the flag.
TEST_CASE("gopt place --anchor-ties: latest-first order on request, bad lists refused") {
  go::rl::register_go_methods("");  // best-heuristic (gopt's main registers it; it needs no policy)
  const std::string plan = tmp_path("latest.json");
  auto place = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> args{"place", "zoo:rnnlm2", "--training", "--cluster", "v100x2", "--method",
                                  "best-heuristic", "--json", "--out", plan};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_gopt(args);
    REQUIRE(r.code == 0);
    return nlohmann::json::parse(r.out);
  };
  const auto program = place({"--anchor-ties", "program"});
  const auto latest = place({"--anchor-ties", "program,first-ready,latest"});
  const auto plain = place({});
  for (const auto* r : {&program, &latest, &plain}) {
    CHECK_THAT((*r)["note"].get<std::string>(), Contains("latest-first order"));
    CHECK((*r)["simulations"].get<int>() == latest["simulations"].get<int>());  // 4 more per other order
    CHECK((*r)["step_time_ms"].get<double>() == latest["step_time_ms"].get<double>());
  }
  const auto sim = run_gopt({"simulate", "zoo:rnnlm2", "--training", "--cluster", "v100x2", "--plan", plan, "--json"});
  REQUIRE(sim.code == 0);
  CHECK(nlohmann::json::parse(sim.out)["step_time_ms"].get<double>() ==
        Approx(latest["step_time_ms"].get<double>()).epsilon(1e-9));
  fs::remove(plan);
  for (const std::string bad : {"program,last", "latest,latest", ""})
    check_bad_anchor_list("--anchor-ties", bad, "program,first-ready,latest");
}

// --anchor-placements: the placements GO's anchor starts from; without `spread` the anchor is not
// the one with its fan-out ops spread, one simulation fewer. A bad list fails with one line.
TEST_CASE("gopt place --anchor-placements: a subset on request, bad lists refused") {
  go::rl::register_go_methods("");
  auto place = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> args{"place", "zoo:transformer_xl4:segments=8", "--training", "--cluster", "v100x4",
                                  "--method", "best-heuristic", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_gopt(args);
    REQUIRE(r.code == 0);
    return nlohmann::json::parse(r.out);
  };
  const auto all = place({});
  const auto human = place({"--anchor-placements", "human"});
  const auto spread = place({"--anchor-placements", "human,spread"});
  CHECK(human["note"].get<std::string>().rfind("human", 0) == 0);
  CHECK_THAT(spread["note"].get<std::string>(), Contains("human + fan-out spread"));
  CHECK(spread["simulations"].get<int>() == human["simulations"].get<int>() + 1);
  CHECK(spread["step_time_ms"].get<double>() < human["step_time_ms"].get<double>());
  CHECK(all["step_time_ms"].get<double>() <= spread["step_time_ms"].get<double>());
  for (const std::string bad : {"human,fanout", "human,human", ""})
    check_bad_anchor_list("--anchor-placements", bad, go::rl::kAnchorPlacements);
}

TEST_CASE("gopt eval: table rows, geo-mean row, CSV") {
  const std::string csv = tmp_path("eval.csv");
  const auto r = run_gopt({"eval", "--graphs", "zoo:rnnlm2,zoo:inception_v3", "--cluster", "v100x2", "--methods",
                       "default,human,m-etf", "--csv", csv});
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("| graph | ops | default | human | m-etf |"));
  std::vector<std::string> rows;
  std::stringstream ss(r.out);
  for (std::string line; std::getline(ss, line);)
    if (line.rfind("| zoo:", 0) == 0 || line.rfind("| geo-mean", 0) == 0) rows.push_back(line);
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].rfind("| zoo:rnnlm2 |", 0) == 0);
  CHECK(rows[1].rfind("| zoo:inception_v3 |", 0) == 0);
  // the ratio of human to itself is 1; every cell is a step time with its optimize time
  CHECK_THAT(rows[2], Contains("| geo-mean / human | |") && Contains(" 1.000 |"));
  CHECK(std::count(rows[0].begin(), rows[0].end(), '(') == 3);
  // CSV: a header and one line per (graph, method), the step times of the table
  const std::string text = go::test::slurp_file(csv);
  REQUIRE(count_lines(text) == 1 + 2 * 3);
  CHECK(text.rfind("graph,num_ops,method,step_time_ms,valid,status,optimize_seconds,simulations,note\n", 0) == 0);
  std::stringstream cs(text);
  std::string line;
  std::getline(cs, line);
  int human_lines = 0;
  while (std::getline(cs, line)) {
    std::vector<std::string> f;
    std::stringstream ls(line);
    for (std::string x; std::getline(ls, x, ',');) f.push_back(x);
    REQUIRE(f.size() >= 8);
    if (f[2] != "human") continue;
    ++human_lines;
    CHECK(f[4] == "1");
    char cell[64];
    std::snprintf(cell, sizeof cell, "| %s | %s |", f[0].c_str(), f[1].c_str());
    const std::string& row = f[0] == "zoo:rnnlm2" ? rows[0] : rows[1];
    CHECK(row.rfind(cell, 0) == 0);
    std::snprintf(cell, sizeof cell, "%.2f (", std::stod(f[3]));
    CHECK_THAT(row, Contains(cell));
  }
  CHECK(human_lines == 2);
  fs::remove(csv);
}

TEST_CASE("gopt eval: a method that fails on one graph fails its cell only, and the table, the CSV and exit 1 say so") {
  const std::string csv = tmp_path("eval_failed.csv");
  const std::string empty = tmp_path("empty.json");
  go::write_file_atomic(empty, R"({"format": "go-graph", "ops": []})");
  // exact takes at most 200 ops (and needs CBC): it fails on rnnlm2, whatever this build has
  const auto r = run_gopt({"eval", "--graphs", "zoo:rnnlm2," + empty, "--cluster", "v100x2", "--methods",
                           "human,exact,m-etf", "--csv", csv});
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Contains("gopt eval: zoo:rnnlm2 exact: failed: "));
  CHECK_THAT(r.err, Contains("gopt eval: 1 of 6 cells failed; the first: zoo:rnnlm2 exact: "));
  std::vector<std::string> rows;
  std::stringstream ss(r.out);
  for (std::string line; std::getline(ss, line);)
    if (line.rfind("| zoo:", 0) == 0 || line.rfind("| /", 0) == 0 || line.rfind("| geo-mean", 0) == 0)
      rows.push_back(line);
  REQUIRE(rows.size() == 3);
  // the other cells of the row stand
  CHECK_THAT(rows[0], Contains(" failed |"));
  CHECK(std::count(rows[0].begin(), rows[0].end(), '(') == 2);
  // the empty graph's step takes 0 s: no ratio, no NaN; the failed cell is counted apart
  CHECK_THAT(rows[1], Contains("| 0 |"));
  CHECK_THAT(rows[2], Contains("| geo-mean / human | | 1.000 | - (1 failed) |"));
  CHECK_THAT(r.out, !Contains("nan"));
  const std::string text = go::test::slurp_file(csv);
  CHECK(count_lines(text) == 1 + 2 * 3);
  CHECK_THAT(text, Contains("zoo:rnnlm2,") && Contains(",exact,,0,error,"));
  fs::remove(csv);
  fs::remove(empty);
  // a graph that cannot load fails the run before any cell is computed
  const auto missing = run_gopt({"eval", "--graphs", "zoo:rnnlm2,/no/such/graph.onnx", "--cluster", "v100x2",
                                 "--methods", "human"});
  CHECK(missing.code == 1);
  CHECK(count_lines(missing.err) == 1);
  CHECK_THAT(missing.err, Contains("/no/such/graph.onnx"));
}

TEST_CASE("gopt place, simulate, eval: an empty file name is refused, not read as not given") {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"place", "zoo:rnnlm2", "--cluster", "v100x2", "--method", "human", "--out", ""},
        std::vector<std::string>{"simulate", "zoo:rnnlm2", "--cluster", "v100x2", "--trace", ""},
        std::vector<std::string>{"eval", "--graphs", "zoo:rnnlm2", "--cluster", "v100x2", "--methods", "human",
                                 "--csv", ""}}) {
    INFO(args[0]);
    const auto r = run_gopt(args);
    CHECK(r.code != 0);
    CHECK_THAT(r.err, Contains("must name a file, got an empty string"));
    CHECK(count_lines(r.err) == 1);
  }
}

TEST_CASE("gopt eval --trace-dir: one file per graph even where two share a name, and a folder that cannot be made fails first") {
  const fs::path pd = fs::path(GO_DATA_DIR) / "real-data" / "msr-fiddle-pipedream";
  const std::string a = (pd / "alexnet" / "graph.txt").string(), b = (pd / "resnet18" / "graph.txt").string();
  const std::string dir = tmp_path("traces");
  fs::remove_all(dir);
  const auto r = run_gopt({"eval", "--graphs", a + "," + b + ",zoo:rnnlm2", "--cluster", "v100x2", "--methods", "human",
                           "--trace-dir", dir});
  REQUIRE(r.code == 0);
  for (const char* stem : {"alexnet_graph.txt", "resnet18_graph.txt", "zoo_rnnlm2"}) {
    INFO(stem);
    CHECK(fs::is_regular_file(fs::path(dir) / (std::string(stem) + ".plan.json")));
    CHECK(fs::is_regular_file(fs::path(dir) / (std::string(stem) + ".trace.json")));
  }
  // each plan is its own graph's: it loads against that graph and re-simulates to its table cell
  const go::OpGraph ga = go::load_graph(a), gb = go::load_graph(b);
  CHECK(go::load_plan((fs::path(dir) / "alexnet_graph.txt.plan.json").string(), ga).device.size() ==
        static_cast<std::size_t>(ga.num_ops()));
  CHECK(go::load_plan((fs::path(dir) / "resnet18_graph.txt.plan.json").string(), gb).device.size() ==
        static_cast<std::size_t>(gb.num_ops()));
  // the same path twice: the position tells them apart
  const auto twice = run_gopt({"eval", "--graphs", "zoo:rnnlm2,zoo:rnnlm2", "--cluster", "v100x2", "--methods",
                               "human", "--trace-dir", dir});
  REQUIRE(twice.code == 0);
  CHECK(fs::is_regular_file(fs::path(dir) / "1-zoo_rnnlm2.plan.json"));
  CHECK(fs::is_regular_file(fs::path(dir) / "2-zoo_rnnlm2.plan.json"));
  // a file where the folder should be: one line, before any cell is computed
  const std::string file = (fs::path(dir) / "zoo_rnnlm2.plan.json").string();
  const auto bad = run_gopt({"eval", "--graphs", "zoo:rnnlm2", "--cluster", "v100x2", "--methods", "human",
                             "--trace-dir", file});
  CHECK(bad.code == 1);
  CHECK(count_lines(bad.err) == 1);
  CHECK_THAT(bad.err, Contains(file) && Contains("--trace-dir cannot be made a folder"));
  CHECK_THAT(bad.err, !Contains("gopt eval: zoo:rnnlm2 human"));
  fs::remove_all(dir);
}

TEST_CASE("gopt simulate: a plan placed on a device the cluster lacks is an error naming the plan file") {
  const go::OpGraph g = go::load_graph("zoo:rnnlm2");
  go::Plan p = go::Plan::single_device(g.num_ops());
  p.device[3] = 7;
  const std::string plan = tmp_path("device7.json");
  go::save_plan(p, g, plan);
  const auto r = run_gopt({"simulate", "zoo:rnnlm2", "--cluster", "v100x2", "--plan", plan});
  CHECK(r.code == 1);
  CHECK(count_lines(r.err) == 1);
  CHECK_THAT(r.err, Contains(plan + ": ") && Contains("is placed on device 7 but the cluster v100x2 has 2 device(s)"));
  // on a cluster that has the device, the same plan runs
  CHECK(run_gopt({"simulate", "zoo:rnnlm2", "--cluster", "v100x8", "--plan", plan}).code == 0);
  // as --expert, the error names the expert file
  const auto ex = run_gopt({"place", "zoo:rnnlm2", "--cluster", "v100x2", "--method", "human", "--expert", plan});
  CHECK(ex.code == 1);
  CHECK_THAT(ex.err, Contains(plan + ": human placement uses device 7"));
  fs::remove(plan);
}

TEST_CASE("gopt simulate / place / eval --cost roofline: measured times ignored, and a bad value fails with one line") {
  const fs::path file = fs::path(GO_DATA_DIR) / "real-data" / "msr-fiddle-pipedream" / "resnet18" / "graph.txt";
  if (!fs::exists(file)) {
    WARN("no " << file << ": skipped");
    return;
  }
  const std::string graph = file.string();
  const go::OpGraph g = go::make_training_graph(go::load_graph(graph));
  const go::Cluster c = go::cluster_preset("v100x4");
  auto step = [&](go::CostSource cost) {
    go::SimOptions so;
    so.cost = cost;
    go::Simulator sim(g, c, so);
    return sim.simulate(go::Plan{}).step_time;
  };
  auto sim_json = [&](const std::string& cost) {
    const auto r = run_gopt({"simulate", graph, "--training", "--cluster", "v100x4", "--cost", cost, "--json"});
    REQUIRE(r.code == 0);
    return nlohmann::json::parse(r.out);
  };
  const auto measured = sim_json("measured"), roof = sim_json("roofline");
  CHECK(roof["cost"] == "roofline");
  CHECK(measured["step_time_ms"].get<double>() == Approx(step(go::CostSource::measured) * 1e3).epsilon(1e-12));
  CHECK(roof["step_time_ms"].get<double>() == Approx(step(go::CostSource::roofline) * 1e3).epsilon(1e-12));
  CHECK(roof["step_time_ms"].get<double>() != Approx(measured["step_time_ms"].get<double>()).epsilon(0.01));
  const auto text = run_gopt({"simulate", graph, "--cluster", "t4x2", "--cost", "roofline"});
  REQUIRE(text.code == 0);
  CHECK_THAT(text.out, Contains("cost         roofline"));

  const auto place = run_gopt({"place", graph, "--training", "--cluster", "v100x4", "--method", "m-etf", "--cost",
                               "roofline", "--json"});
  REQUIRE(place.code == 0);
  const auto pj = nlohmann::json::parse(place.out);
  CHECK(pj["cost"] == "roofline");
  CHECK(pj["step_time_ms"].get<double>() == Approx(go::place("m-etf", go::without_measured_times(g), c).step_time * 1e3).epsilon(1e-12));

  const auto eval = run_gopt({"eval", "--graphs", graph, "--training", "--cluster", "v100x4", "--methods",
                              "default,m-etf", "--cost", "roofline"});
  REQUIRE(eval.code == 0);
  CHECK_THAT(eval.out, Contains("roofline costs (measured times ignored)"));

  for (const std::string cmd : {"simulate", "place", "eval"}) {
    INFO(cmd);
    std::vector<std::string> args{cmd};
    if (cmd == "eval") args.insert(args.end(), {"--graphs", graph, "--methods", "default"});
    else args.push_back(graph);
    if (cmd == "place") args.insert(args.end(), {"--method", "default"});
    args.insert(args.end(), {"--cluster", "v100x2", "--cost", "flops"});
    const auto bad = run_gopt(args);
    CHECK(bad.code != 0);
    CHECK(bad.out.empty());
    CHECK(count_lines(bad.err) == 1);
    CHECK_THAT(bad.err, Contains("gopt " + cmd + ": unknown cost source 'flops' (known: measured, roofline)"));
  }
}

}  // namespace test_place_cli
