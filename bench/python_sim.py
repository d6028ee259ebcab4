#!/usr/bin/env python3
"""What simulating a plan costs from Python against the same simulation in C++ (issue 17: within 10%).

Loads the graph as a training graph (default zoo:gnmt8:seq=121, 80,588 ops), makes a plan with one
method (default heft, which fits v100x8 and sets priorities), then alternates, for --rounds rounds:
  C++    `gopt simulate <graph> --training --cluster <c> --plan <plan> --repeat N --json`: the CLI's
         loop of Simulator::simulate on one workspace. Wall time: its sims_per_second (the load
         excluded). CPU time: the process's CPU time with --repeat 3N minus that with --repeat N,
         over 2N (the load and the first simulation cancel out).
  Python N calls of gopt.simulate(graph, cluster, plan), timed around the loop, wall and process CPU
         time (the module's cached simulator and workspace, argument checks, GIL release and the
         result object included).
Prints the per-call times of each round, their medians and the ratios, and checks that both give
the same step time. On a machine shared with other work, CPU time is the steadier of the two.

    PYTHONPATH=build/python python3 bench/python_sim.py [--gopt build/gopt] [--repeat 50] [--rounds 5]
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import gopt

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graph", default="zoo:gnmt8:seq=121")
    ap.add_argument("--cluster", default="v100x8")
    ap.add_argument("--method", default="heft", help="the method whose plan is simulated (default heft)")
    ap.add_argument("--repeat", type=int, default=50, help="simulations per timed loop (default 50)")
    ap.add_argument("--rounds", type=int, default=5, help="C++ / Python rounds, alternated (default 5)")
    ap.add_argument("--gopt", default=os.path.join(REPO, "build", "gopt"), help="the gopt binary of the same build")
    args = ap.parse_args()
    if not os.access(args.gopt, os.X_OK):
        sys.exit("python_sim.py: %s is not the gopt binary (pass --gopt)" % args.gopt)

    t0 = time.perf_counter()
    graph = gopt.load_graph(args.graph, training=True)
    cluster = gopt.cluster(args.cluster)
    placed = gopt.place(graph, cluster, args.method)
    print("graph %s (training): %d ops, %d edges, loaded in %.2f s; %s plan on %s: %.3f ms%s" % (
        args.graph, graph.num_ops, graph.num_edges, time.perf_counter() - t0, args.method, cluster.name,
        placed.step_time_ms, "" if placed.valid else " (" + placed.reason + ")"))
    plan = placed.plan
    with tempfile.TemporaryDirectory() as d:
        plan_path = os.path.join(d, "plan.json")
        plan.save(plan_path, graph)
        cmd = [args.gopt, "simulate", args.graph, "--training", "--cluster", args.cluster, "--plan", plan_path,
               "--repeat", str(args.repeat), "--json"]
        print("C++:    " + " ".join(cmd))
        print("Python: gopt.simulate(graph, cluster, plan) x %d" % args.repeat)
        first = gopt.simulate(graph, cluster, plan)  # builds the cached simulator, warms its workspace
        def cli(repeat):  # (its JSON, the CPU seconds the process used)
            c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            out = subprocess.run(cmd[:-2] + [str(repeat), "--json"], check=True, capture_output=True, text=True).stdout
            c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            j = json.loads(out)
            if j["step_time_ms"] != first.step_time_ms:
                sys.exit("python_sim.py: the CLI simulates %r ms, the module %r ms" % (j["step_time_ms"], first.step_time_ms))
            return j, (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)

        wall_c, wall_p, cpu_c, cpu_p = [], [], [], []
        n = args.repeat
        for k in range(args.rounds):
            j, cpu1 = cli(n)
            wall_c.append(1e3 / j["sims_per_second"])
            _, cpu3 = cli(3 * n)
            cpu_c.append((cpu3 - cpu1) / (2 * n) * 1e3)
            t, c = time.perf_counter(), time.process_time()
            for _ in range(n):
                r = gopt.simulate(graph, cluster, plan)
            cpu_p.append((time.process_time() - c) / n * 1e3)
            wall_p.append((time.perf_counter() - t) / n * 1e3)
            assert r.step_time_ms == first.step_time_ms
            print("round %d: wall C++ %.3f ms, Python %.3f ms; CPU C++ %.3f ms, Python %.3f ms per simulation" % (
                k + 1, wall_c[-1], wall_p[-1], cpu_c[-1], cpu_p[-1]))
    med = statistics.median
    print("median wall: C++ %.3f ms, Python %.3f ms per simulation, python/cpp = %.3f" % (
        med(wall_c), med(wall_p), med(wall_p) / med(wall_c)))
    print("median CPU:  C++ %.3f ms, Python %.3f ms per simulation, python/cpp = %.3f (step time %.3f ms in both)" % (
        med(cpu_c), med(cpu_p), med(cpu_p) / med(cpu_c), first.step_time_ms))


if __name__ == "__main__":
    main()
