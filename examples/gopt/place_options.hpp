#pragma once
// The place() options that `gopt place` and `gopt eval` share, from their parsed flags (any struct
// with these fields): one place for what a flag means, so the two commands cannot drift apart.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "go/baselines/common.hpp"
#include "go/baselines/place.hpp"
#include "go/graph/cost.hpp"

namespace gopt {

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
      {"--patience", PlaceOption::patience}};
  for (const auto& [flag, option] : flags) {
    const CLI::Option* opt = cmd.get_option_no_throw(flag);
    if (!opt || opt->count() == 0) continue;
    const std::string note = go::unused_option_note(methods, option, flag);
    if (!note.empty()) std::fprintf(stderr, "gopt %s: note: %s\n", command.c_str(), note.c_str());
  }
}

}  // namespace gopt
