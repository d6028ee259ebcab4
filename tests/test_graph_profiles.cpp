// The measured profiles in data/real-data: every PipeDream graph.txt and dnn-partitioning JSON
// loads with its measured times, sizes, colocation classes and cluster limits, checked against an
// independent reading of the files.
#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "go/graph/cost.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/load.hpp"
#include "go/graph/pipedream.hpp"

namespace test_graph_profiles {
namespace fs = std::filesystem;

namespace {

const fs::path kRealData = fs::path(GO_DATA_DIR) / "real-data";

std::vector<fs::path> files_named(const fs::path& root, const std::string& ext) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(root))
    if (e.is_regular_file() && e.path().extension() == ext) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

double field(const std::string& line, const std::string& key) {
  auto p = line.find(key + "=");
  REQUIRE(p != std::string::npos);
  return std::stod(line.substr(p + key.size() + 1));
}

}  // namespace

TEST_CASE("pipedream: every graph.txt loads with its measured times", "[graph][pipedream]") {
  std::vector<fs::path> files;
  for (const auto& f : files_named(kRealData / "msr-fiddle-pipedream", ".txt"))
    if (f.filename() == "graph.txt") files.push_back(f);
  REQUIRE(files.size() == 12);
  for (const auto& f : files) {
    INFO(f.string());
    const go::OpGraph g = go::load_graph(f.string());
    CHECK(g.info().format == "pipedream");
    CHECK_NOTHROW(g.validate());
    // independent reading: node lines, edge lines, time sums (Input nodes are zero-cost)
    std::ifstream in(f);
    std::string line;
    int nodes = 0, edges = 0;
    double fwd = 0, bwd = 0, params = 0;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      if (line[0] == '\t') {
        ++edges;
        continue;
      }
      ++nodes;
      if (line.find(" -- Input") != std::string::npos) continue;
      fwd += field(line, "forward_compute_time");
      bwd += field(line, "backward_compute_time");
      params += field(line, "parameter_size");
    }
    CHECK(g.num_ops() == nodes);
    CHECK(g.num_edges() == edges);
    double gf = 0, gb = 0;
    for (const go::Op& o : g.ops()) {
      REQUIRE(o.has_time());
      REQUIRE(o.has_backward_time());
      gf += o.time;
      gb += o.backward_time;
    }
    CHECK(gf * 1e3 == Approx(fwd).epsilon(1e-9));
    CHECK(gb * 1e3 == Approx(bwd).epsilon(1e-9));
    CHECK(static_cast<double>(go::graph_stats(g).param_bytes) == Approx(params).epsilon(1e-9));
    // the cost model uses the measured time
    const go::DeviceSpec dev;
    for (const go::Op& o : g.ops()) CHECK(go::op_time(o, dev) == o.time);
  }
}

TEST_CASE("pipedream: layer details", "[graph][pipedream]") {
  const go::OpGraph alex = go::load_graph((kRealData / "msr-fiddle-pipedream/alexnet/graph.txt").string());
  const auto conv = *alex.find("node5");
  CHECK(alex.op(conv).kind == go::OpKind::conv);
  CHECK(alex.op(conv).time == Approx(3.128e-3));
  CHECK(alex.op(conv).backward_time == Approx(5.612e-3));
  CHECK(alex.op(conv).output_bytes == 143327232);
  CHECK(alex.op(conv).param_bytes == 1229568);
  CHECK(alex.op(conv).source_id == 5);
  CHECK(alex.op(conv).flops > 0);
  // the Input node's data-loading time (636 ms) is not kept: inputs are zero-cost
  for (const go::Op& o : alex.ops())
    if (o.kind == go::OpKind::input) CHECK(o.time == 0.0);
  // multi-output LSTM: three output tensors; __getitem__(k) reads output k
  const go::OpGraph gnmt = go::load_graph((kRealData / "msr-fiddle-pipedream/gnmt/graph.txt").string());
  const auto lstm = *gnmt.find("node7");
  CHECK(gnmt.op(lstm).kind == go::OpKind::rnn);
  REQUIRE(gnmt.op(lstm).num_outputs == 3);
  CHECK(gnmt.outputs(lstm)[1].bytes == 131072);
  const auto get1 = *gnmt.find("node9");  // __getitem__(1)
  REQUIRE(gnmt.inputs(get1).size() == 1);
  CHECK(gnmt.tensor(gnmt.inputs(get1)[0]).output_index == 1);
  CHECK(gnmt.tensor(gnmt.inputs(get1)[0]).producer == lstm);
  // A conv's FLOP estimate is 2 x outputs (activation_size / 4) x input channels x kernel area. The
  // area is a product of two int64 sizes from the file: past int64's range it stays a finite
  // estimate (it overflowed, undefined behaviour, before), and a negative size is an error.
  auto one_conv = [](const std::string& kernel) {
    return "node1 -- Input0 -- forward_compute_time=0.000, backward_compute_time=0.000, activation_size=400.0, "
           "parameter_size=0.000\n"
           "node2 -- Conv2d(3, 8, kernel_size=" + kernel + ", stride=(1, 1)) -- forward_compute_time=1.0, "
           "backward_compute_time=1.0, activation_size=400.0, parameter_size=864.000\n"
           "\tnode1 -- node2\n";
  };
  const go::OpGraph small = go::parse_pipedream(one_conv("(3, 3)"), "small");
  CHECK(small.op(*small.find("node2")).flops == Approx(2.0 * 100 * 3 * 9));
  const go::OpGraph huge = go::parse_pipedream(one_conv("(3, 6191423887051208931)"), "huge");
  CHECK(huge.op(*huge.find("node2")).flops == Approx(2.0 * 100 * 3 * 3 * 6191423887051208931.0));
  CHECK_THROWS_WITH(go::parse_pipedream(one_conv("(-3, 3)"), "neg"),
                    Catch::Contains("node2") && Catch::Contains("negative or invalid flops"));
  // a time past a day per op (graph.hpp's kMaxOpSeconds) would make sums over the graph infinite
  std::string slow = one_conv("(3, 3)");
  slow.replace(slow.find("forward_compute_time=1.0"), 24, "forward_compute_time=1e308");
  CHECK_THROWS_WITH(go::parse_pipedream(slow, "slow"),
                    Catch::StartsWith("slow:2: op 'node2' (id 2) has a compute time of more than a day (at most "
                                      "86400000 ms)"));
}

TEST_CASE("dnn-partitioning: every graph loads with times, sizes, colocation and limits", "[graph][dnn]") {
  std::vector<fs::path> files;
  for (const char* sub : {"latency-inputs", "throughput-inputs"})
    for (auto& f : files_named(kRealData / "msr-fiddle-dnn-partitioning" / sub, ".json")) files.push_back(f);
  REQUIRE(files.size() == 22);
  for (const auto& f : files) {
    INFO(f.string());
    const go::OpGraph g = go::load_graph(f.string());
    CHECK(g.info().format == "dnn-partitioning");
    CHECK_NOTHROW(g.validate());
    std::ifstream in(f);
    const nlohmann::json j = nlohmann::json::parse(in);
    CHECK(g.info().num_devices == j["maxFPGAs"].get<int>());
    CHECK(g.info().device_memory == static_cast<std::int64_t>(j["maxSizePerFPGA"].get<double>()));
    CHECK(g.info().num_cpus == j["maxCPUs"].get<int>());
    REQUIRE(g.num_ops() == static_cast<std::int32_t>(j["nodes"].size()));
    CHECK(g.num_edges() == static_cast<std::int64_t>(j["edges"].size()));
    int backward = 0;
    for (std::size_t i = 0; i < j["nodes"].size(); ++i) {
      const auto& n = j["nodes"][i];
      const go::Op& o = g.op(static_cast<go::OpId>(i));
      REQUIRE(o.source_id == n["id"].get<std::int64_t>());
      CHECK(g.name(o.id) == n["name"].get<std::string>());
      CHECK(o.time == Approx(n["fpgaLatency"].get<double>() * 1e-3).margin(1e-15));
      CHECK(o.param_bytes == static_cast<std::int64_t>(n["size"].get<double>()));
      const bool has_color = n.contains("colorClass") && !n["colorClass"].is_null();
      CHECK(o.colocation == (has_color ? n["colorClass"].get<int>() : -1));
      const auto& bwj = n["isBackwardNode"];
      const bool bw = bwj.is_boolean() ? bwj.get<bool>() : bwj.get<double>() != 0;
      if (bw) ++backward;
      CHECK((o.role != go::OpRole::forward) == bw);
    }
    // edges keep their sizes: the tensor on each edge has the edge's bytes
    std::map<std::pair<std::int64_t, std::int64_t>, std::int64_t> size_of;
    for (const auto& e : j["edges"])
      size_of[{e["sourceId"].get<std::int64_t>(), e["destId"].get<std::int64_t>()}] =
          static_cast<std::int64_t>(e["size"].get<double>());
    for (go::OpId v = 0; v < g.num_ops(); ++v) {
      auto preds = g.pred(v);
      auto tens = g.pred_tensors(v);
      for (std::size_t k = 0; k < preds.size(); ++k) {
        auto it = size_of.find({g.op(preds[k]).source_id, g.op(v).source_id});
        REQUIRE(it != size_of.end());
        CHECK(g.tensor(tens[k]).bytes == it->second);
      }
    }
    const bool training = f.string().find("training") != std::string::npos;
    CHECK((backward > 0) == training);
    CHECK(g.info().training == training);
  }
  // operator names give kinds
  const go::OpGraph r50 = go::load_graph(
      (kRealData / "msr-fiddle-dnn-partitioning/throughput-inputs/OperatorGraphs/resnet50_training.json").string());
  const auto st = go::graph_stats(r50);
  CHECK(st.kind_counts[go::op_kind_index(go::OpKind::conv)] == 53 * 2);  // Conv + ConvGrad
  CHECK(r50.op(0).colocation == 37);
}

}  // namespace test_graph_profiles
