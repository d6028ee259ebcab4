// `gopt info`: the subcommand from examples/gopt/info.cpp, compiled into this test and run
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

#include "../examples/gopt/info.cpp"

using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

struct Result {
  int code = 0;
  std::string out, err;
};

// Runs `gopt <args...>` with the info subcommand registered; returns the exit code and output.
Result run_gopt(std::vector<std::string> args) {
  const fs::path dir = fs::temp_directory_path();
  const std::string tag = std::to_string(std::random_device{}());
  const fs::path out_path = dir / ("go_cli_out_" + tag), err_path = dir / ("go_cli_err_" + tag);
  std::fflush(stdout);
  std::fflush(stderr);
  std::cout.flush();
  const int saved_out = dup(1), saved_err = dup(2);
  FILE* fo = std::fopen(out_path.c_str(), "w");
  FILE* fe = std::fopen(err_path.c_str(), "w");
  dup2(fileno(fo), 1);
  dup2(fileno(fe), 2);
  Result r;
  {
    CLI::App app{"gopt"};
    app.require_subcommand(0, 1);
    add_info_command(app);
    std::vector<std::string> argv_s{"gopt"};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<const char*> argv;
    for (auto& s : argv_s) argv.push_back(s.c_str());
    try {
      app.parse(static_cast<int>(argv.size()), argv.data());
    } catch (const CLI::ParseError& e) {
      r.code = app.exit(e);
    }
  }
  std::cout.flush();
  std::fflush(stdout);
  std::fflush(stderr);
  dup2(saved_out, 1);
  dup2(saved_err, 2);
  close(saved_out);
  close(saved_err);
  std::fclose(fo);
  std::fclose(fe);
  auto slurp = [](const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  fs::remove(out_path);
  fs::remove(err_path);
  return r;
}

const std::string kModels = std::string(GO_SHARED_DIR) + "/models/";

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
  const Result text = run_gopt({"info", std::string(GO_SHARED_DIR) + "/real-data/msr-fiddle-pipedream/gnmt/graph.txt"});
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
