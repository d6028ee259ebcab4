#!/usr/bin/env python3
"""Pipelined plans for WaveNet 4 (v100x4): the anchor's candidate, its parts, and one made by hand.

WaveNet's layers read their time chunk and the previous chunk's tail, so with layers in blocks on
the devices a device can start on chunk 0 as soon as the previous device has passed chunk 0 on: a
pipeline over the 16 chunks. Two things keep the other heuristic plans from it (bench/README.md,
"Pipelined plans"):
  - order: program order and the rank levels run one layer for every chunk before the next layer,
    so a device hands nothing on until it is nearly done;
  - fusion: XLA-like fusion lets an op that reads two chunks (the concat of a chunk and its
    predecessor's tail) join both chunks' groups, and the chain of such merges makes one kernel of a
    layer's 16 chunks, which waits for all of them.
This script prints:
  - best-heuristic without the pipelined candidates (`depth-first` left out of the placements);
  - best-heuristic with them: no priority levels, depth-first order with the weights first, and
    every op fused into its main producer (the one whose output it reads is largest);
  - each part alone: that fusion in first-ready order, and XLA-like fusion into every producer in
    depth-first order;
  - by hand: XLA-like fusion whose groups are split by time chunk (the chunk read from the op names,
    which only a hand-made plan may do), in depth-first order: what the main-producer rule gets
    without the names.

    PYTHONPATH=build/python python3 bench/wavenet_pipeline.py [--graph zoo:wavenet4] [--cluster v100x4]
"""
import argparse
import re

import gopt


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graph", default="zoo:wavenet4", help="a WaveNet of the zoo (default zoo:wavenet4)")
    ap.add_argument("--cluster", default="v100x4", help="cluster preset (default v100x4)")
    args = ap.parse_args()
    g = gopt.load_graph(args.graph, training=True)
    heuristics = [m for m in ("default", "human", "pipeline", "metis", "m-etf", "m-sct", "heft") if m in gopt.methods()]
    before = gopt.place(g, args.cluster, "best-heuristic", anchor_placements=",".join(heuristics + ["spread"]))
    now = gopt.place(g, args.cluster, "best-heuristic")
    print("best-heuristic without the pipelined candidates: %.2f ms (%s)" % (before.step_time_ms, before.note))
    print("best-heuristic with them:                        %.2f ms (%s)" % (now.step_time_ms, now.note))

    def step(plan):
        r = gopt.simulate(g, args.cluster, plan)
        return "%.2f ms" % r.step_time_ms if r.valid else r.status

    device = now.plan.device
    depth_first = now.plan.priority  # level 0 + the depth-first tie of every op
    print("  its fusion in first-ready order (no priorities):       %s" % step(gopt.Plan(device, None, now.plan.fusion)))
    xla = gopt.place(g, args.cluster, "human", fusion="xla").plan
    if list(xla.device) == list(device):
        print("  XLA-like fusion into every producer, depth-first order: %s" % step(gopt.Plan(device, depth_first, xla.fusion)))
        chunk = []
        for n in g.names:
            m = re.search(r"/chunk(\d+)/", n + "/")
            chunk.append(int(m.group(1)) if m else -1)
        ids, split = {}, []
        for i, f in enumerate(xla.fusion):
            split.append(-1 if f < 0 else ids.setdefault((f, chunk[i]), len(ids)))
        print("by hand, XLA-like fusion split by chunk + depth-first order: %s" % step(gopt.Plan(device, depth_first, split)))
    else:
        print("  (the answer's placement is not the human one, on which the hand-made plans are built)")


if __name__ == "__main__":
    main()
