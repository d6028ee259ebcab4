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
  po.anchor_ties = o.anchor_ties;
  po.anchor_placements = o.anchor_placements;
  po.fit_memory = o.fit_memory;
  po.sim.cost = go::parse_cost_source(o.cost);
  return po;
}

// Each flag given on `cmd`'s command line that none of `methods` reads (go::PlaceMethod::reads,
// decides_fusion for --fusion) gets a line on stderr naming the methods that read it: the run goes
// on, the flag ignored. Unknown methods are left to place()'s error.
inline void note_unused_flags(const CLI::App& cmd, const std::string& command, const std::vector<std::string>& methods) {
  using go::PlaceOption;
  auto reads = [](const go::PlaceMethod& m, const std::string& flag) {
    if (flag == "--fusion") return !m.decides_fusion;
    const PlaceOption o = flag == "--budget"       ? PlaceOption::budget
                          : flag == "--time-limit" ? PlaceOption::time_limit
                          : flag == "--expert"     ? PlaceOption::expert
                          : flag == "--policy"     ? PlaceOption::policy
                          : flag == "--finetune"   ? PlaceOption::finetune
                                                   : PlaceOption::anchor;
    return m.reads_option(o);
  };
  std::vector<const go::PlaceMethod*> given;
  for (const std::string& name : methods)
    for (const go::PlaceMethod& m : go::place_methods())
      if (m.name == name) given.push_back(&m);
  if (given.size() != methods.size()) return;
  for (const char* flag : {"--budget", "--time-limit", "--fusion", "--expert", "--policy", "--finetune", "--anchor-ties",
                           "--anchor-placements"}) {
    const CLI::Option* opt = cmd.get_option_no_throw(flag);
    if (!opt || opt->count() == 0) continue;
    bool used = false;
    for (const go::PlaceMethod* m : given) used = used || reads(*m, flag);
    if (used) continue;
    std::string names, readers;
    for (const std::string& n : methods) names += (names.empty() ? "" : ", ") + n;
    for (const go::PlaceMethod& m : go::place_methods())
      if (reads(m, flag)) readers += (readers.empty() ? "" : ", ") + m.name;
    std::fprintf(stderr, "gopt %s: note: %s is not used by %s%s (it is read by %s); ignored\n", command.c_str(), flag,
                 methods.size() > 1 ? "any of " : "", names.c_str(), readers.c_str());
  }
}

}  // namespace gopt
