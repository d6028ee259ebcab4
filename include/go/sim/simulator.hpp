#pragma once
// The simulated multi-GPU execution model: given a graph, a cluster and a plan (device, priority and
// fusion group per op), the step time, per-device busy time and peak memory, bytes moved and kernel
// launches of one execution, or why the plan is invalid.
//
// Usage (one Simulator per (graph, cluster), one SimWorkspace per thread, reused across calls):
//   go::Simulator sim(graph, go::cluster_preset("v100x4"));
//   go::SimWorkspace ws = sim.make_workspace();
//   const go::SimResult& r = sim.simulate(plan, ws);   // no allocation once ws has warmed up
//   if (!r.valid) std::puts(go::sim_reason(r, graph, sim.cluster()).c_str());
// The Simulator only reads the graph (which must outlive it) and is safe to share between threads;
// the result lives in the workspace until its next simulation.
//
// The pieces (this header includes them all; include it rather than one of them):
//   simulator/result.hpp      SimOptions, SimStatus, SimResult, TransferRecord, MemoryEvent,
//                             memory_excess(), sim_reason()
//   simulator/workspace.hpp   SimWorkspace
//   simulator/semantics.hpp   the semantics of the model and where they differ from the anchors;
//                             the Simulator class
// and, compiled once into libgo (link go::go):
//   src/sim/simulator.cpp     per-op cost records, workspace sizing, simulate()'s checks
//   src/sim/event_loop.cpp    the event loops (Simulator::run), with the fusion groups' costs and
//                             checks per plan, and the implementation notes
#include "go/sim/simulator/result.hpp"
#include "go/sim/simulator/workspace.hpp"
#include "go/sim/simulator/semantics.hpp"
