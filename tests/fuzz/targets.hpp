#pragma once
// The fuzz targets: one function per loader, shared by the libFuzzer drivers (fuzz_main.cpp, built
// with -DGO_FUZZ=ON and clang) and by the regression test (tests/test_reliability.cpp), which runs
// every input under tests/fuzz/regressions/<target>/ and tests/fuzz/seeds/<target>/ through the
// same function with any compiler.
//
// The contract every target checks: an input either loads or throws go::Error. Anything else is a
// bug: a crash or sanitizer report, another exception type (nlohmann::json::exception,
// std::bad_alloc, std::out_of_range, ...), a hang, or a loaded object that breaks its own
// invariants. For the last kind the target throws InvariantBroken (not a go::Error), so it is
// reported as a bug too:
//   - a loaded graph passes OpGraph::validate() and survives a go-graph JSON round trip unchanged;
//   - a loaded cluster passes Cluster::validate() and survives a go-cluster JSON round trip;
//   - a loaded plan has one entry per op and survives a go-plan JSON round trip;
//   - loaded tensors have the byte size their shape and dtype say.
//
// Adding a target: write `inline void name(std::string_view data)` below, list it in targets(),
// and add one go_fuzz_target() line (with its seed corpus) to tests/fuzz/CMakeLists.txt.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

#include <nlohmann/json.hpp>

#include "go/core/error.hpp"
#include "go/graph/dnn_partitioning.hpp"
#include "go/graph/io.hpp"
#include "go/graph/json.hpp"
#include "go/graph/load.hpp"
#include "go/graph/onnx.hpp"
#include "go/graph/pipedream.hpp"
#include "go/nn/serialize.hpp"

#if __has_include("go/sim/plan.hpp") && __has_include("go/sim/cluster.hpp")
#include "go/sim/cluster.hpp"
#include "go/sim/plan.hpp"
#define GO_FUZZ_HAVE_SIM 1
#endif

namespace go::fuzz {

// A loaded object that violates its own invariants: a bug even though nothing crashed.
struct InvariantBroken : std::logic_error {
  using std::logic_error::logic_error;
};

// Runs `check` on a freshly loaded object; any exception thrown there (a go::Error too) is a broken
// invariant, not a rejected input.
template <class F>
void require_invariant(const char* what, F&& check) {
  try {
    check();
  } catch (const InvariantBroken&) {
    throw;
  } catch (const std::exception& e) {
    throw InvariantBroken(std::string(what) + ": " + typeid(e).name() + ": " + e.what());
  }
}

// Set by run(): whether known open bugs (known_open_issues() below) may be passed over.
inline bool& allow_known_flag() {
  static bool allow = true;
  return allow;
}

// Thrown by a target's guard in front of a known open bug that would otherwise end the process (a
// sanitizer report cannot be caught); its message starts with the bug's signature.
struct KnownOpenBug : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline void check_graph(const OpGraph& g) {
  require_invariant("loaded graph fails validate()", [&] { g.validate(); });
  std::string diff;
  require_invariant("loaded graph does not reload from its go-graph JSON", [&] {
    const OpGraph back = parse_json_graph(save_json_string(g), "roundtrip.json");
    diff = graph_difference(g, back);
  });
  if (!diff.empty()) throw InvariantBroken("go-graph JSON round trip changes the graph: " + diff);
}

inline void onnx(std::string_view data) { check_graph(parse_onnx(data, "fuzz.onnx")); }
inline void json_graph(std::string_view data) { check_graph(parse_json_graph(data, "fuzz.json")); }
inline void pipedream(std::string_view data) { check_graph(parse_pipedream(data, "fuzz/graph.txt")); }
inline void dnn_partitioning(std::string_view data) { check_graph(parse_dnn_partitioning(data, "fuzz.json")); }
// Format detection by content (load_graph on a file without a telling extension).
inline void any_graph(std::string_view data) { check_graph(parse_graph(data, "fuzz")); }

// load_tensors() reads a path: the bytes go into an in-memory file (memfd) read back through
// /proc/self/fd, so nothing touches the disk.
//
// Random mutations rarely keep the header length and the data checksum right, which would keep the
// fuzzer out of the tensor table. So an input that does not start with the magic "GOPARAMS" is
// framed here: "<header JSON>\0<data>" becomes a file with the right header length, and a
// "checksum": "auto" in the header is replaced by the data's real checksum (seeds/checkpoint/
// holds both kinds).
inline std::string checkpoint_bytes(std::string_view data) {
  if (data.substr(0, 8) == std::string_view(detail::kParamMagic, 8)) return std::string(data);
  const std::size_t cut = std::min(data.find('\0'), data.size());
  std::string header(data.substr(0, cut));
  const std::string_view payload = cut < data.size() ? data.substr(cut + 1) : std::string_view();
  const std::string autosum = "\"checksum\":\"auto\"";
  if (const auto at = header.find(autosum); at != std::string::npos)
    header.replace(at, autosum.size(),
                   "\"checksum\":\"" + detail::hex64(detail::fnv1a64(payload.data(), payload.size())) + "\"");
  std::string out(detail::kParamMagic, 8);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  out += header;
  out += payload;
  return out;
}

inline void checkpoint(std::string_view input) {
  const std::string data = checkpoint_bytes(input);
  static const int fd = [] {
    const int f = ::memfd_create("go_fuzz_checkpoint", 0);
    if (f < 0) throw std::runtime_error("memfd_create failed");
    return f;
  }();
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (::ftruncate(fd, 0) != 0) throw std::runtime_error("ftruncate failed");
  for (std::size_t done = 0; done < data.size();) {
    const ssize_t w = ::pwrite(fd, data.data() + done, data.size() - done, static_cast<off_t>(done));
    if (w <= 0) throw std::runtime_error("pwrite failed");
    done += static_cast<std::size_t>(w);
  }
  const LoadedTensors in = load_tensors(path);
  for (const auto& [name, t] : in.tensors) {
    std::int64_t n = 1;
    for (std::int64_t d : t.shape())
      if (__builtin_mul_overflow(n, d, &n))
        throw InvariantBroken("tensor '" + name + "' loaded with a shape whose element count overflows: " +
                              t.shape().to_string());
    if (t.nbytes() != static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype()))
      throw InvariantBroken("tensor '" + name + "' has " + std::to_string(t.nbytes()) + " bytes for " +
                            t.describe());
  }
}

#ifdef GO_FUZZ_HAVE_SIM
// The graphs plans are read against: a three-op chain (a -> b -> c, tests/data/sim/tiny_plan.json)
// and bert24_inference of dnn-partitioning in data/real-data (its human-expert splits).
inline const std::vector<OpGraph>& plan_graphs() {
  static const std::vector<OpGraph> graphs = [] {
    std::vector<OpGraph> v;
    v.push_back(parse_json_graph(R"({"format": "go-graph", "ops": [
        {"id": 0, "name": "a", "kind": "input", "outputs": [{"shape": [4, 8]}]},
        {"id": 1, "name": "b", "kind": "matmul", "flops": 512, "outputs": [{"shape": [4, 8]}], "inputs": [0]},
        {"id": 2, "name": "c", "kind": "relu", "flops": 32, "outputs": [{"shape": [4, 8]}], "inputs": [1]}]})",
                                 "chain3.json"));
#ifdef GO_DATA_DIR
    const std::string bert = std::string(GO_DATA_DIR) +
                             "/real-data/msr-fiddle-dnn-partitioning/throughput-inputs/LayerGraphs/bert24_inference.json";
    try {
      v.push_back(load_dnn_partitioning(bert));
    } catch (const Error&) {  // data/ missing: the chain alone
    }
#endif
    return v;
  }();
  return graphs;
}

inline void plan(std::string_view data) {
  int loaded = 0;
  Error last("");
  for (const OpGraph& g : plan_graphs()) {
    Plan p;
    try {
      p = parse_plan(data, g, "fuzz-plan.json");
    } catch (const Error& e) {
      last = e;
      continue;
    }
    ++loaded;
    require_invariant("loaded plan has the wrong size", [&] { check_plan_sizes(p, g.num_ops()); });
    (void)check_plan(g, p, 4);  // a string, never a throw or a crash
    Plan back;
    require_invariant("loaded plan does not reload from its go-plan JSON",
                      [&] { back = parse_plan(plan_to_json(p, g).dump(), g, "roundtrip.json"); });
    bool same = back.fusion == p.fusion && back.priority.size() == p.priority.size();
    for (OpId i = 0; same && i < g.num_ops(); ++i) same = back.device_of(i) == p.device_of(i);
    if (!same) throw InvariantBroken("go-plan JSON round trip changes the plan");
  }
  if (loaded == 0) throw last;
}

inline void cluster(std::string_view data) {
  const Cluster c = parse_cluster(data, "fuzz-cluster.json");
  require_invariant("loaded cluster fails validate()", [&] { c.validate("fuzz-cluster.json: "); });
  Cluster back;
  require_invariant("loaded cluster does not reload from its go-cluster JSON",
                    [&] { back = parse_cluster(cluster_to_json(c).dump(), "roundtrip.json"); });
  if (back.num_devices() != c.num_devices() || back.channels != c.channels)
    throw InvariantBroken("go-cluster JSON round trip changes the cluster");
}
#endif

struct Target {
  const char* name;
  void (*run)(std::string_view);
};

// Every target; the names are the folder names under tests/fuzz/{seeds,regressions}/ and the
// binaries' names (fuzz_<name>).
inline const std::vector<Target>& targets() {
  static const std::vector<Target> all = {
      {"onnx", onnx},
      {"json_graph", json_graph},
      {"pipedream", pipedream},
      {"dnn_partitioning", dnn_partitioning},
      {"any_graph", any_graph},
      {"checkpoint", checkpoint},
#ifdef GO_FUZZ_HAVE_SIM
      {"plan", plan},
      {"cluster", cluster},
#endif
  };
  return all;
}

inline const Target* find_target(std::string_view name) {
  for (const Target& t : targets())
    if (name == t.name) return &t;
  return nullptr;
}

// Bugs found by fuzzing and not fixed yet, each in a file the fuzz harness does not own, matched by
// a substring of the exception's message. While listed, an input hitting one counts as
// Outcome::known_open, so the fuzzers keep looking for new bugs instead of stopping at the first
// input of a known one; the input itself sits in tests/fuzz/regressions/<target>/, and
// test_reliability replays every regression input strictly in a [!mayfail] test case, so the open
// ones show in every ctest log. Remove the entry with the fix (GO_FUZZ_STRICT=1 ignores the list).
struct KnownIssue {
  const char* signature;  // a substring of what() of the exception
  const char* bug;        // where and what
};

inline const std::vector<KnownIssue>& known_open_issues() {
  static const std::vector<KnownIssue> all = {
  };
  return all;
}

// GO_FUZZ_STRICT=1: no bug is passed over.
inline bool strict_mode() {
  static const bool strict = [] {
    const char* e = std::getenv("GO_FUZZ_STRICT");
    return e && *e && std::string_view(e) != "0";
  }();
  return strict;
}

inline const KnownIssue* known_open_issue(std::string_view what) {
  if (strict_mode()) return nullptr;
  for (const KnownIssue& k : known_open_issues())
    if (what.find(k.signature) != std::string_view::npos) return &k;
  return nullptr;
}

enum class Outcome { loaded, rejected, known_open };

// Loaded, rejected with a go::Error, or a listed open bug (when allow_known); every other exception
// propagates to the caller as a bug.
inline Outcome run(const Target& t, std::string_view data, std::string* message = nullptr, bool allow_known = true) {
  allow_known_flag() = allow_known && !strict_mode();
  try {
    t.run(data);
    return Outcome::loaded;
  } catch (const Error& e) {
    if (message) *message = e.what();
    return Outcome::rejected;
  } catch (const std::exception& e) {
    if (!allow_known || !known_open_issue(e.what())) throw;
    if (message) *message = e.what();
    return Outcome::known_open;
  }
}

}  // namespace go::fuzz
