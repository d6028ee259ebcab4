#!/usr/bin/env python3
"""Where a plan's step time goes, for one plan or for GO's plans on the paper table's rows.

The walk is go/sim/critical_path.hpp's (`gopt simulate --critical-path`, `gopt.simulate(...,
critical_path=True)`): from the unit that ends last, back through what let each unit start when
it did, its latest data input (on its device, or its transfer's end) or its device's previous
unit. The step time splits into compute on the path, transfers on it, the time those tensors
waited for a busy link, and gaps.

    PYTHONPATH=build/python python3 bench/critical_path.py GRAPH CLUSTER [--plan FILE | --method M]
    PYTHONPATH=build/python python3 bench/critical_path.py --rows DIR

The first form prints one plan's breakdown: GRAPH is anything gopt.load_graph reads, expanded to
its training graph unless --no-training; the plan is a go-plan JSON file, or what gopt.place makes
with --method (default best-heuristic). The second prints a markdown table over the paper
table's rows, reading DIR/<row>.go.json for each (bench/README.md, "Where GO's step time goes", has
the command that writes them); rows without a file are left out.
"""
import argparse
import os
import sys

import gopt

ROWS = [("rnnlm2", "zoo:rnnlm2", "v100x2"), ("rnnlm4", "zoo:rnnlm4", "v100x4"), ("rnnlm8", "zoo:rnnlm8", "v100x8"),
        ("gnmt2", "zoo:gnmt2", "v100x2"), ("gnmt4", "zoo:gnmt4", "v100x4"), ("gnmt8", "zoo:gnmt8", "v100x8"),
        ("transformer_xl2", "zoo:transformer_xl2", "v100x2"), ("transformer_xl4", "zoo:transformer_xl4", "v100x4"),
        ("transformer_xl8", "zoo:transformer_xl8", "v100x8"),
        ("inception_v3_b32", "zoo:inception_v3:batch=32", "v100x2"),
        ("inception_v3_b64", "zoo:inception_v3:batch=64", "v100x2"),
        ("amoebanet", "zoo:amoebanet", "v100x4"), ("wavenet2", "zoo:wavenet2", "v100x2"),
        ("wavenet4", "zoo:wavenet4", "v100x4")]


def breakdown(g, cluster, plan):
    """(SimResult, its critical_path dict); gopt.Error when the plan cannot run."""
    r = gopt.simulate(g, cluster, plan, critical_path=True)
    if r.critical_path is None:
        raise gopt.Error(f"the plan cannot run: {r.reason}")
    return r, r.critical_path


def print_one(name, g, r, cp):
    end = cp["end_ms"]
    links = {k: cp["link"].count(k) for k in ("data", "transfer", "device")}
    print(f"{name}: step {r.step_time_ms:.2f} ms, {g.num_ops} ops; the critical path has {len(cp['units'])} units")
    for key, label in (("compute_ms", "compute"), ("transfers_ms", "transfers"), ("link_wait_ms", "waiting for a link"),
                       ("gaps_ms", "gaps")):
        print(f"  {label:20s} {cp[key]:9.2f} ms  {100 * cp[key] / end:5.1f}%")
    print(f"  held by: a data input on their device {links['data']}, a transfer {links['transfer']}, "
          f"their device's previous unit {links['device']}")
    kinds = sorted(cp["compute_by_kind_ms"].items(), key=lambda kv: -kv[1])[:6]
    print("  compute on the path by op kind: " + ", ".join(f"{k} {v:.1f}" for k, v in kinds))
    print("  compute on the path by device:  " + ", ".join(f"gpu{d} {v:.1f}" for d, v in enumerate(cp["compute_by_device_ms"])))
    print("  busy per device:                " + ", ".join(f"gpu{d} {b:.1f}" for d, b in enumerate(r.busy_time_ms)))


def print_rows(folder):
    print("| model (GPUs) | GO ms | compute | transfers | link wait | gaps | links data / transfer / device | busiest | mean busy |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, graph, cluster in ROWS:
        path = os.path.join(folder, f"{name}.go.json")
        if not os.path.exists(path):
            continue
        g = gopt.load_graph(graph, training=True)
        r, cp = breakdown(g, cluster, gopt.Plan.load(path, g))
        end, n = cp["end_ms"], max(1, len(cp["link"]))
        share = [100 * cp["link"].count(k) / n for k in ("data", "transfer", "device")]
        busy = r.busy_time_ms
        print(f"| {name} ({cluster}) | {r.step_time_ms:.2f} | " +
              " | ".join(f"{abs(100 * cp[k] / end):.1f}%" if abs(cp[k]) < 5e-4 * end else f"{100 * cp[k] / end:.1f}%"
                         for k in ("compute_ms", "transfers_ms", "link_wait_ms", "gaps_ms")) +
              f" | {share[0]:.0f} / {share[1]:.0f} / {share[2]:.0f} | {100 * max(busy) / r.step_time_ms:.0f}% | "
              f"{100 * sum(busy) / len(busy) / r.step_time_ms:.0f}% |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("graph", nargs="?")
    ap.add_argument("cluster", nargs="?")
    ap.add_argument("--plan", help="go-plan JSON file (default: what --method makes)")
    ap.add_argument("--method", default="best-heuristic", help="gopt.place method when no --plan (default best-heuristic)")
    ap.add_argument("--no-training", action="store_true", help="the graph as it is, not its training graph")
    ap.add_argument("--seed", type=int, default=0, help="the method's seed (default 0)")
    ap.add_argument("--rows", metavar="DIR", help="a table over the paper table's rows of DIR/<row>.go.json")
    args = ap.parse_args()
    try:
        if args.rows:
            print_rows(args.rows)
            return
        if not args.graph or not args.cluster:
            ap.error("give GRAPH and CLUSTER, or --rows DIR")
        g = gopt.load_graph(args.graph, training=not args.no_training)
        c = gopt.cluster(args.cluster)
        plan = gopt.Plan.load(args.plan, g) if args.plan else gopt.place(g, c, args.method, seed=args.seed).plan
        r, cp = breakdown(g, c, plan)
        print_one(f"{args.graph} on {args.cluster}", g, r, cp)
    except gopt.Error as e:
        sys.exit(f"critical_path.py: {e}")


if __name__ == "__main__":
    main()
