#pragma once
// The place() options that `gopt place` and `gopt eval` share, from their parsed flags (any struct
// with these fields): one place for what a flag means, so the two commands cannot drift apart.
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "go/baselines/common.hpp"
#include "go/baselines/place.hpp"
#include "go/graph/cost.hpp"

#include "format.hpp"

namespace gopt {

inline constexpr const char* kProgressHelp =
    "anchor-search, go, go-one: a progress line per update on stderr (default: when stderr is a terminal, "
    "one line rewritten in place)";

// Progress lines of the methods that run in updates, on stderr: on a terminal one line rewritten
// in place (end(), or the destructor where an error unwinds, closes it), elsewhere a line per update.
class ProgressLine {
 public:
  ProgressLine(std::string command, bool tty) : command_(std::move(command)), tty_(tty) {}
  ProgressLine(const ProgressLine&) = delete;  // the callbacks hold `this`
  ProgressLine& operator=(const ProgressLine&) = delete;
  ~ProgressLine() { end(); }
  // What the methods call, for `label` (a method, or a graph and a method).
  std::function<void(const go::UpdateProgress&)> callback(const std::string& label) {
    return [this, label](const go::UpdateProgress& p) { print(label, p); };
  }
  void end() {
    if (open_) std::fputc('\n', stderr);
    open_ = false;
  }

 private:
  void print(const std::string& label, const go::UpdateProgress& p) {
    const double per = p.update > 0 ? p.seconds / static_cast<double>(p.update) : 0;
    double eta = std::numeric_limits<double>::infinity();
    if (p.updates > 0) eta = per * static_cast<double>(p.updates - p.update);
    if (p.time_limit > 0) eta = std::min(eta, std::max(0.0, p.time_limit - p.seconds));
    const std::string of = p.updates > 0 ? "/" + std::to_string(p.updates) : "";
    char best[48] = "none valid";
    if (std::isfinite(p.best_step_time)) std::snprintf(best, sizeof best, "%.3f ms", p.best_step_time * 1e3);
    std::fprintf(stderr, "%sgopt %s: %s update %lld%s  best %s  %s  ETA %s%s", tty_ ? "\r\033[K" : "", command_.c_str(),
                 label.c_str(), static_cast<long long>(p.update), of.c_str(), best,
                 duration_text(p.seconds).c_str(), duration_text(eta).c_str(), tty_ ? "" : "\n");
    std::fflush(stderr);
    open_ = tty_;
  }
  std::string command_;
  bool tty_;
  bool open_ = false;
};

// Whether progress lines are on: --progress, --no-progress, else when stderr is a terminal.
inline bool progress_on(bool progress, bool no_progress) { return progress || (!no_progress && isatty(2) != 0); }

// A bad --fusion or --cost throws go::Error naming the value.
template <class Flags>
go::PlaceOptions place_options(const Flags& o) {
  go::PlaceOptions po;
  po.seed = o.seed;
  po.budget = o.budget;
  po.fusion = go::parse_fusion_mode(o.fusion);
  po.policy = o.policy;
  po.finetune = o.finetune;
  po.time_limit = o.time_limit;
  po.patience = o.patience;
  po.anchor_ties = o.anchor_ties;
  po.anchor_placements = o.anchor_placements;
  po.fit_memory = o.fit_memory;
  po.sim.cost = go::parse_cost_source(o.cost);
  return po;
}

// Each flag given on `cmd`'s command line that none of `methods` reads gets a line on stderr
// (go::unused_option_note): the run goes on, the flag ignored.
inline void note_unused_flags(const CLI::App& cmd, const std::string& command, const std::vector<std::string>& methods) {
  using go::PlaceOption;
  const std::pair<const char*, PlaceOption> flags[] = {
      {"--budget", PlaceOption::budget}, {"--time-limit", PlaceOption::time_limit}, {"--fusion", PlaceOption::fusion},
      {"--expert", PlaceOption::expert}, {"--policy", PlaceOption::policy},         {"--finetune", PlaceOption::finetune},
      {"--anchor-ties", PlaceOption::anchor}, {"--anchor-placements", PlaceOption::anchor},
      {"--patience", PlaceOption::patience}, {"--progress", PlaceOption::progress}};
  for (const auto& [flag, option] : flags) {
    const CLI::Option* opt = cmd.get_option_no_throw(flag);
    if (!opt || opt->count() == 0) continue;
    const std::string note = go::unused_option_note(methods, option, flag);
    if (!note.empty()) std::fprintf(stderr, "gopt %s: note: %s\n", command.c_str(), note.c_str());
  }
}

}  // namespace gopt
