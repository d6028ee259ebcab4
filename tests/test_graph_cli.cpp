// `gopt info`: the subcommand from examples/gopt/info.cpp, linked into this test (gopt_commands) and run
// in-process with stdout/stderr captured.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_capture.hpp"
#include "go/graph/cost.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/load.hpp"
#include "info.hpp"

namespace test_graph_cli {
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

using Result = go::test::CliResult;

// Runs `gopt <args...>` with the info subcommand registered; returns the exit code and output.
Result run_gopt(const std::vector<std::string>& args) {
  return go::test::run_cli([](CLI::App& app) { add_info_command(app); }, args);
}

const std::string kModels = std::string(GO_DATA_DIR) + "/models/";

}  // namespace

TEST_CASE("gopt info: JSON summary", "[graph][cli]") {
  const Result r = run_gopt({"info", kModels + "resnet18.onnx", "--json"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  const go::OpGraph g = go::load_graph(kModels + "resnet18.onnx");
  CHECK(j["nodes"] == g.num_ops());
  CHECK(j["edges"] == g.num_edges());
  CHECK(j["flops"].get<double>() == Approx(go::graph_stats(g).flops));
  CHECK(j["flops"].get<double>() / 2 / 32 == Approx(1.81e9).epsilon(0.1));
  CHECK(j["param_bytes"] == go::graph_stats(g).param_bytes);
  CHECK(j["activation_bytes"].get<std::int64_t>() > 0);
  CHECK(j["op_kinds"]["conv"] == 20);
  CHECK(j["critical_path"]["time_s"].get<double>() > 0);
  CHECK(j["training"] == false);
}

TEST_CASE("gopt info: --training and the text summary", "[graph][cli]") {
  const Result fwd = run_gopt({"info", kModels + "resnet18.onnx", "--json"});
  const Result tr = run_gopt({"info", kModels + "resnet18.onnx", "--json", "--training"});
  REQUIRE(fwd.code == 0);
  REQUIRE(tr.code == 0);
  const auto jf = nlohmann::json::parse(fwd.out), jt = nlohmann::json::parse(tr.out);
  CHECK(jt["training"] == true);
  CHECK(jt["nodes"].get<int>() > 2 * jf["nodes"].get<int>());
  CHECK(jt["flops"].get<double>() > 2.5 * jf["flops"].get<double>());
  CHECK(jt["roles"]["update"] == go::load_graph(kModels + "resnet18.onnx").num_params());
  // momentum: one state tensor per weight, so the training graph's parameters are the weights twice,
  // and the report says which part is which
  CHECK(jf["optimizer_state_bytes"] == 0);
  CHECK(jt["optimizer_state_bytes"] == jf["param_bytes"]);
  CHECK(jt["param_bytes"] == 2 * jf["param_bytes"].get<std::int64_t>());
  const Result tt = run_gopt({"info", kModels + "resnet18.onnx", "--training"});
  REQUIRE(tt.code == 0);
  CHECK_THAT(tt.out, Contains("(weights ") && Contains(", optimizer state "));
  const Result text = run_gopt({"info", std::string(GO_DATA_DIR) + "/real-data/msr-fiddle-pipedream/gnmt/graph.txt"});
  REQUIRE(text.code == 0);
  CHECK_THAT(text.out, Contains("nodes") && Contains("critical path") && Contains("op kinds") && Contains("rnn"));
}

TEST_CASE("gopt info: bad input exits non-zero with one line naming the file", "[graph][cli][errors]") {
  const fs::path dir = fs::temp_directory_path() / ("go_cli_" + std::to_string(std::random_device{}()));
  fs::create_directories(dir);
  const std::string bad = (dir / "broken.json").string();
  std::ofstream(bad) << "{\"format\": \"go-graph\", \"ops\": [";
  for (const std::string& path : {bad, (dir / "missing.onnx").string(), std::string("zoo:nothing")}) {
    const Result r = run_gopt({"info", path});
    INFO(path << " -> " << r.err);
    CHECK(r.code != 0);
    CHECK(r.out.empty());
    CHECK(r.err.rfind("gopt info: " + path + ": ", 0) == 0);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  fs::remove_all(dir);
}

}  // namespace test_graph_cli
