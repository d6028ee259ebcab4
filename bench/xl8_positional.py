#!/usr/bin/env python3
"""A plan faster than every method's on transformer_xl8 (v100x8), made by hand.

Before the anchor gained its fan-out spread candidate (commit a342aa8), the paper table's
transformer_xl8 row ended at GO's anchor (human placement + rank priorities + XLA-like fusion,
133.31 ms): GO, annealing and anneal-anchor found nothing faster in 82 s. In that plan gpu0 computes the relative positional encoding of all 96 segments first (one fused kernel:
the sinusoid and its 96 dropouts) and sends each to the seven other devices, whose layers read it:
672 transfers queue on gpu0's send channel ahead of layer 0's first output, so gpu1-7 start their
forward pass about 37 ms late.

This script takes that anchor (gopt.place(..., "best-heuristic") without the `spread` candidate),
unfuses the positional dropouts
and moves the dropout of segment s to device s mod 8 (the sinusoid, one tensor, then goes once to
each device and each device's channel carries an eighth of the fan-out), and simulates:
  - the first k segments moved, k = 1 ... 96 (the step time is not monotone in k: a search moving
    one op at a time meets a worse plan on the way);
  - all 96 moved, each dropout given the priority of its segment's first layer-0 op;
  - the 96 dropouts on random devices, --scatters times (seeded by --seed);
and, for comparison, today's anchor (with the spread candidate: the first of those plans).
Prints the step times.

    PYTHONPATH=build/python python3 bench/xl8_positional.py [--scatters 10] [--seed 0]
"""
import argparse
import random
import re

import gopt

GRAPH, CLUSTER, SEGMENTS = "zoo:transformer_xl8", "v100x8", 96


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scatters", type=int, default=10, help="random scatters of the 96 dropouts (default 10)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the scatters (default 0)")
    args = ap.parse_args()
    g = gopt.load_graph(GRAPH, training=True)
    heuristics = [m for m in ("default", "human", "pipeline", "metis", "m-etf", "m-sct", "heft") if m in gopt.methods()]
    anchor = gopt.place(g, CLUSTER, "best-heuristic", anchor_placements=",".join(heuristics))
    names = g.names
    index = {n: i for i, n in enumerate(names)}
    pos = [index["embedding/seg%d/pos_dropout" % s] for s in range(SEGMENTS)]
    devices = gopt.cluster(CLUSTER).num_devices

    def step(device, priority, fusion):
        r = gopt.simulate(g, CLUSTER, gopt.Plan(device, priority, fusion))
        return "%.2f ms" % r.step_time_ms if r.valid else r.status

    base_dev, base_pri, base_fus = anchor.plan.device, anchor.plan.priority, anchor.plan.fusion
    print("anchor (%s): %.2f ms" % (anchor.note, anchor.step_time_ms))
    print("positional dropouts in the anchor's fused group:", sum(int(base_fus[i] >= 0) for i in pos), "of", SEGMENTS)
    for k in (1, 2, 4, 8, 16, 32, 48, 64, 96):
        dev, fus = base_dev.copy(), base_fus.copy()
        for s in range(k):
            dev[pos[s]] = s % devices
            fus[pos[s]] = -1
        print("first %2d segments' dropouts on device s mod %d: %s" % (k, devices, step(dev, base_pri, fus)))
    # and each dropout run right before its segment's layer-0 ops
    first_op = {}
    for i, n in enumerate(names):
        m = re.match(r"layer0/seg(\d+)/", n)
        if m and "/grad" not in n:
            s = int(m.group(1))
            first_op[s] = max(first_op.get(s, -1e30), float(base_pri[i]))
    pri = base_pri.copy()
    for s in range(SEGMENTS):
        pri[pos[s]] = first_op[s] + 1e-6
    print("all %d moved, each before its segment's layer-0 ops: %s" % (SEGMENTS, step(dev, pri, fus)))
    rng = random.Random(args.seed)
    unfused = base_fus.copy()
    for i in pos:
        unfused[i] = -1
    times = []
    for _ in range(args.scatters):
        dev = base_dev.copy()
        for i in pos:
            dev[i] = rng.randrange(devices)
        times.append(step(dev, base_pri, unfused))
    print("the %d dropouts on random devices (%d draws, seed %d): %s" % (SEGMENTS, args.scatters, args.seed, ", ".join(times)))
    today = gopt.place(g, CLUSTER, "best-heuristic")
    print("today's anchor (%s): %.2f ms" % (today.note, today.step_time_ms))


if __name__ == "__main__":
    main()
