#!/usr/bin/env python3
"""Compare placement methods on one model with the gopt Python module.

Loads an ONNX model (default: data/models/resnet50.onnx) as a training graph, optimizes it for a
simulated cluster with three methods (default: the human expert's placement, Baechi's m-ETF and GO
zero-shot with the shipped policy), prints a table of simulated step times and saves a bar chart
(matplotlib, when installed: Debian python3-matplotlib; without it the plot is skipped).

    PYTHONPATH=build/python python3 examples/python/compare.py
    PYTHONPATH=build/python python3 examples/python/compare.py data/models/inception_v3.onnx \\
        --cluster v100x8 --methods default,heft,go-zero-shot --out inception.png
"""
import argparse
import os
import sys

import gopt

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", nargs="?", default=os.path.join(REPO, "data", "models", "resnet50.onnx"),
                    help="graph file or zoo:<name> (default: data/models/resnet50.onnx)")
    ap.add_argument("--cluster", default="v100x4", help="cluster preset or go-cluster JSON (default v100x4)")
    ap.add_argument("--methods", default="human,m-etf,go-zero-shot",
                    help="comma-separated, from: " + ", ".join(gopt.methods()))
    ap.add_argument("--forward", action="store_true", help="the forward graph only (default: the training graph)")
    ap.add_argument("--seed", type=int, default=0, help="seed of every random choice (default 0)")
    ap.add_argument("--out", default="compare.png", help="where to save the plot (default compare.png)")
    args = ap.parse_args()

    try:
        graph = gopt.load_graph(args.model, training=not args.forward)
        cluster = gopt.cluster(args.cluster)
        methods = [m for m in args.methods.split(",") if m]
        results = [gopt.place(graph, cluster, m, seed=args.seed) for m in methods]
    except gopt.Error as e:
        sys.exit("compare.py: %s" % e)

    print("%s: %d ops%s on %s (%d devices)" % (args.model, graph.num_ops, ", training" if graph.training else "",
                                               cluster.name, cluster.num_devices))
    print("%-14s %12s %10s  %s" % ("method", "step ms", "optimize s", "note"))
    for r in results:
        step = "%.3f" % r.step_time_ms if r.valid else "OOM"
        print("%-14s %12s %10.3f  %s" % (r.method, step, r.optimize_seconds, r.note))

    try:
        import matplotlib
        matplotlib.use("Agg")  # files only, no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot skipped: matplotlib is not installed (Debian: python3-matplotlib)")
        return
    fig, ax = plt.subplots(figsize=(6, 3.5))
    valid = [r for r in results if r.valid]
    bars = ax.bar([r.method for r in valid], [r.step_time_ms for r in valid], color="#4878a8")
    ax.bar_label(bars, fmt="%.1f")
    ax.set_ylabel("simulated step time (ms)")
    ax.set_title("%s on %s" % (os.path.basename(args.model), cluster.name))
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print("plot saved to %s" % args.out)


if __name__ == "__main__":
    main()
