// load_graph and parse_graph (go/graph/load.hpp), compiled once into libgo with every importer.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "go/core/error.hpp"
#include "go/graph/dnn_partitioning.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/io.hpp"
#include "go/graph/json.hpp"
#include "go/graph/load.hpp"
#include "go/graph/neusight.hpp"
#include "go/graph/onnx.hpp"
#include "go/graph/pipedream.hpp"
#include "go/graph/zoo.hpp"

namespace go {

namespace {

bool looks_like_json(std::string_view data) {
  for (char c : data) {
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') continue;
    return c == '{' || c == '[' || c == '/';  // '/' : a leading comment
  }
  return false;
}
bool looks_like_pipedream(std::string_view data) {
  data = detail::without_bom(data);
  std::string_view first = detail::trim(data.substr(0, data.find('\n')));
  return first.substr(0, 4) == "node" && first.find(" -- ") != std::string_view::npos;
}

}  // namespace

OpGraph parse_graph(std::string_view data, const std::string& source, GraphFormat format) {
  GO_CHECK(!data.empty(), source, ": empty file");
  if (format == GraphFormat::auto_detect) {
    const std::string ext = detail::file_extension(source);
    if (ext == ".onnx" || ext == ".pb") format = GraphFormat::onnx;
    else if (ext == ".txt") format = GraphFormat::pipedream;
    else if (ext == ".csv" || looks_like_neusight(data)) format = GraphFormat::neusight;
    else if (ext == ".json" || looks_like_json(data)) format = GraphFormat::json;
    else if (looks_like_pipedream(data)) format = GraphFormat::pipedream;
    else format = GraphFormat::onnx;
  }
  switch (format) {
    case GraphFormat::onnx: return parse_onnx(data, source);
    case GraphFormat::pipedream: return parse_pipedream(data, source);
    case GraphFormat::neusight: return parse_neusight(data, source);
    case GraphFormat::json:
    case GraphFormat::dnn_partitioning: {
      nlohmann::json j = detail::parse_json_text(data, source);
      if (format == GraphFormat::dnn_partitioning) return graph_from_dnn_partitioning(j, source);
      GO_CHECK(j.is_object(), source, ": a graph document must be a JSON object");
      if (j.contains("format") || j.contains("ops")) return graph_from_json(j, source);
      if (j.contains("nodes") && j.contains("edges")) return graph_from_dnn_partitioning(j, source);
      GO_FAIL(source, ": unrecognized JSON graph (expected a go-graph document with \"format\": \"go-graph\" or a "
                      "dnn-partitioning graph with \"nodes\" and \"edges\")");
    }
    case GraphFormat::auto_detect: break;
  }
  GO_FAIL(source, ": unknown graph format");
}

namespace {
// `file` does not exist but a file does at the part before its first ':' after the last '/': the
// rest is a suffix go does not take ("p.csv:foo=1", "p.csv:layers=2:layers=3"), not a missing file.
void check_suffix(const std::string& file, const std::string& path) {
  const std::size_t slash = file.rfind('/');
  const std::size_t colon = file.find(':', slash == std::string::npos ? 0 : slash + 1);
  if (colon == std::string::npos || colon == 0) return;
  std::error_code ec;
  if (std::filesystem::exists(file, ec) || !std::filesystem::is_regular_file(file.substr(0, colon), ec)) return;
  GO_FAIL(path, ": '", path.substr(colon), "' after the file name is no option of a graph file (a NeuSight profile ",
          "takes ':layers=N', once)");
}
}  // namespace

OpGraph load_graph(const std::string& path, GraphFormat format) {
  if (path.rfind("zoo:", 0) == 0) return make_zoo_graph_from_spec(std::string_view(path).substr(4));
  // "<file>:layers=N": a NeuSight profile with N copies of its traced layer.
  if (const auto sep = path.rfind(":layers="); sep != std::string::npos) {
    const std::string file = path.substr(0, sep), value = path.substr(sep + 8);
    std::int64_t n = 0;
    GO_CHECK(detail::parse_int64(value, n) && n > 0 && n < (1 << 20), path, ": ':layers=' needs a positive integer, got '",
             value, "'");
    check_suffix(file, path);
    const std::string data = detail::read_file(file);
    GO_CHECK(format == GraphFormat::neusight || (format == GraphFormat::auto_detect && looks_like_neusight(data)), path,
             ": ':layers=' applies to NeuSight profiles only, and ", file, " is not one");
    return parse_neusight(data, file, NeuSightOptions{static_cast<std::int32_t>(n)});
  }
  check_suffix(path, path);
  return parse_graph(detail::read_file(path), path, format);
}

}  // namespace go
