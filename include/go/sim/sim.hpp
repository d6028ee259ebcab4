#pragma once
// The whole simulation layer: clusters, plans, the event-driven simulator and Chrome traces.
#include "go/sim/cluster.hpp"
#include "go/sim/critical_path.hpp"
#include "go/sim/plan.hpp"
#include "go/sim/simulator.hpp"
#include "go/sim/trace.hpp"
