#pragma once
// Text helpers shared by the gopt commands.
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <new>
#include <stdexcept>
#include <sstream>
#include <vector>
#include <string>

#include <nlohmann/json.hpp>

#include "go/core/error.hpp"
#include "go/rl/config.hpp"

namespace gopt {

// A duration for progress lines: "42s", "3m05s", "1h07m"; "?" when unknown.
inline std::string duration_text(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  char buf[64];
  const long long t = static_cast<long long>(s + 0.5);
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%lldh%02lldm", t / 3600, (t / 60) % 60);
  else if (t >= 60) std::snprintf(buf, sizeof buf, "%lldm%02llds", t / 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%llds", t);
  return buf;
}

// Help texts that several commands share, so that a new graph format or a change of meaning
// shows in every command's --help.
inline constexpr const char* kGraphFileHelp =
    "graph file (.onnx, go-graph .json, PipeDream graph.txt, dnn-partitioning .json, NeuSight .csv[:layers=N])";
inline constexpr const char* kFusionHelp =
    "none | xla: greedy producer-consumer fusion after placement (default none; anneal, anneal-anchor, anchor-search "
    "and the go methods choose fusion themselves)";
inline constexpr const char* kTimeLimitHelp =
    "anneal, anneal-anchor, anchor-search, hdp, hdp-tuned, go, go-one, exact: wall-clock seconds of optimization per graph (0: no limit; go-one "
    "then trains as many updates as go; exact then stops after 60 s; exact's limit is CBC's, which checks its clock "
    "between search steps, so a solve can run a step over, and a re-solve with memory rows gets at least half again)";
inline constexpr const char* kPatienceHelp =
    "go, go-one, anchor-search: stop fine-tuning after this many updates (rounds) in a row that found no faster plan "
    "(default 0: never; --finetune or --time-limit ends it)";
inline constexpr const char* kFitMemoryHelp =
    "every method: a plan that runs out of memory has op sets moved off the devices that overflow until it fits "
    "(as GO's anchor does with its candidates, then, where that finds none, weighing ops with the tensors they "
    "receive, with windows of several sizes; the "
    "moves' simulations count in optimize_seconds; off by default: "
    "a heuristic's plan is its rule's)";
inline constexpr const char* kAnchorTiesHelp =
    "best-heuristic, anneal-anchor, anchor-search, go methods: orders of the ops of one priority level GO's anchor is chosen "
    "from, of program,first-ready,latest,depth-first: every candidate in the first, its best four in each other "
    "one; latest and first-ready when not listed are tried on those four as answers only, never as the anchor "
    "(default program,first-ready; latest = the op latest in topological order first; depth-first = one stream "
    "of independent work through every layer before the next, weights taken as given; the pipelined candidates, "
    "see --anchor-placements, are in depth-first order whatever is listed)";
inline std::string anchor_placements_help() {
  return "best-heuristic, anneal-anchor, anchor-search, go methods: the placements GO's anchor starts from, of " +
         go::rl::kAnchorPlacements +
         " (default: all; fit = the fastest candidate that runs out of memory, where faster than the best that "
         "fits, with op sets moved off the devices that overflow until it fits; spread = the best of the others "
         "with its fan-out ops, those read on two or more other "
         "devices, spread over the devices; depth-first = the two best of the others pipelined: no priority levels, "
         "depth-first order, every op fused into its main producer, the one whose input is largest; and the spread "
         "one pipelined with its own fusion; relabel = last, the best with its devices relabelled for the least "
         "transfer time where links differ by pair, e.g. v100x8's NVLink mesh)";
}
// A bad option is one line naming it ("gopt: --updates: must be a whole number >= 0, got -1").
inline void one_line_parse_errors(CLI::App& app) {
  app.failure_message([](const CLI::App*, const CLI::Error& e) { return std::string("gopt: ") + e.what() + "\n"; });
}

// Checks a list of names of `known` (--anchor-ties, --anchor-placements) as the training config
// checks "anchor_ties" and "anchor_placements".
inline CLI::Validator name_list_check(const std::string& known) {
  return CLI::Validator([known](std::string& s) { return go::rl::list_problem(s, known); }, "LIST");
}
inline constexpr const char* kCostHelp =
    "measured | roofline: op times from the graph's measured profile where it has one (default), or from the "
    "roofline cost model alone (measured times ignored, to judge the cost model)";

// One line, printable: names read from corrupt files may hold control characters.
inline std::string printable(std::string s) {
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  return s;
}

// 1234567 -> "1.23 MB" (decimal units).
inline std::string human_bytes(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000 && u < 4) {
    b /= 1000;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", b, units[u]);
  return buf;
}

// A count option (updates, seed, budget, ...) must be a whole number >= 0 (>= 1 with min 1):
// CLI11 then reports "--updates: must be a whole number >= 0, got -1" and exits non-zero.
inline CLI::Validator count_at_least(long long min = 0) {
  return CLI::Validator(
      [min](std::string& s) -> std::string {
        std::size_t used = 0;
        long long v = 0;
        try {
          v = std::stoll(s, &used);
        } catch (const std::out_of_range&) {
          return "must be a whole number from " + std::to_string(min) + " to " +
                 std::to_string(std::numeric_limits<long long>::max()) + ", got " + s;
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != s.size() || v < min)
          return "must be a whole number >= " + std::to_string(min) + ", got " + s;
        return "";
      },
      min == 0 ? "COUNT>=0" : "COUNT>=" + std::to_string(min));
}

// The items of a comma-separated option value (--graphs a,b), empty ones dropped. One token per
// option: CLI11's own splitting let `--graphs ,` take the next option as its value.
inline std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ','))
    if (!x.empty()) v.push_back(x);
  return v;
}

// A seed: a whole number 0 to 2^64 - 1, as the config's "seed" and Python's seed= take (a seed
// past 2^63 from a Python run must be reproducible here too).
inline CLI::Validator seed_value() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        std::size_t used = 0;
        bool ok = !s.empty() && s[0] >= '0' && s[0] <= '9';  // stoull would wrap "-1"
        try {
          if (ok) (void)std::stoull(s, &used);
        } catch (const std::exception&) {
          ok = false;
        }
        if (!ok || used != s.size()) return "must be a whole number from 0 to 18446744073709551615, got " + s;
        return "";
      },
      "SEED");
}

// A file or folder option that is given must name one: `--out ""` would otherwise read as "not
// given" and write nothing, silently.
inline CLI::Validator path_given() {
  return CLI::Validator(
      [](std::string& s) -> std::string { return s.empty() ? "must name a file, got an empty string" : ""; }, "PATH");
}

// A duration option (--time-limit) must be a finite number of seconds >= 0: "--time-limit: must be
// a number of seconds >= 0, got -1" (CLI11's NonNegativeNumber names the largest double instead).
inline CLI::Validator seconds_at_least_zero() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        std::size_t used = 0;
        double v = -1;
        try {
          v = std::stod(s, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != s.size() || !std::isfinite(v) || v < 0)
          return "must be a number of seconds >= 0, got " + s;
        return "";
      },
      "SECONDS>=0");
}

// Runs the body of `gopt <command>`: bad input (go::Error, malformed JSON), a path the file system
// refuses (a folder that cannot be made, a symlink loop) or exhausted host memory becomes one line
// "gopt <command>: <what>" on stderr and exit status 1.
template <class F>
void run_command(const char* command, F&& body) {
  try {
    body();
  } catch (const go::Error& e) {
    std::fprintf(stderr, "gopt %s: %s\n", command, printable(e.what()).c_str());
    throw CLI::RuntimeError(1);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "gopt %s: out of host memory\n", command);
    throw CLI::RuntimeError(1);
  } catch (const nlohmann::json::exception& e) {
    std::fprintf(stderr, "gopt %s: %s\n", command, printable(e.what()).c_str());
    throw CLI::RuntimeError(1);
  } catch (const std::filesystem::filesystem_error& e) {
    // "<path>: <what the system said>", as go::Error's messages about files read
    const std::string path = e.path1().empty() ? std::string("a path") : e.path1().string();
    std::fprintf(stderr, "gopt %s: %s: %s\n", command, printable(path).c_str(), printable(e.code().message()).c_str());
    throw CLI::RuntimeError(1);
  }
}

}  // namespace gopt
