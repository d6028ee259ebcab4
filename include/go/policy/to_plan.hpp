#pragma once
// Adapter from a policy Decision (go/policy/decode.hpp) to the simulator's Plan
// (go/sim/plan.hpp): same per-OpId vectors; the priority level becomes a float, level + tie
// (higher runs first, as in Plan; the tie in [0, 1) keeps levels apart and orders a level by
// program order), the fusion group id is the group's first op.
#include "go/policy/decode.hpp"
#include "go/sim/plan.hpp"

namespace go::policy {

inline Plan to_plan(const Decision& d) {
  Plan p;
  p.device = d.device;
  p.priority.assign(d.priority.begin(), d.priority.end());
  if (d.tie.size() == p.priority.size())
    for (std::size_t i = 0; i < p.priority.size(); ++i) p.priority[i] += d.tie[i];
  p.fusion = d.fusion_group;
  return p;
}

}  // namespace go::policy
