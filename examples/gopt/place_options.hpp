#pragma once
// The place() options that `gopt place` and `gopt eval` share, from their parsed flags (any struct
// with these fields): one place for what a flag means, so the two commands cannot drift apart.
#include "go/baselines/common.hpp"
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

}  // namespace gopt
