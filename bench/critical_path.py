#!/usr/bin/env python3
"""Where a plan's step time goes: its critical path through the simulated step.

Simulates the plan (gopt.simulate with trace=True) and walks back from the unit (an op, or a
fusion group) that ends last: each unit started when the later of two things let it, the arrival
of its last data input (its producer's end on the same device, or the end of the transfer to this
device) or the end of its device's previous unit (device order). The walk follows that one, to the
step's start, passing through ops of no time (inputs, views: done when their last input is there). Prints the path's time by kind: compute (by device and by op kind), transfers on
the path, the time their tensors waited for a busy link, and the gaps between units; and each
device's busy time. A path of device-order links on a device busy nearly all the step says that
device's work is the limit (move work off it, or fuse to do less); data links and transfers say
the dependency chain is (fewer hand-offs between devices, or overlap them).

    PYTHONPATH=build/python python3 bench/critical_path.py GRAPH CLUSTER [--plan FILE | --method M]
        [--no-training] [--seed S]

GRAPH is anything gopt.load_graph reads (zoo:gnmt4, a .onnx file, ...), expanded to its training
graph unless --no-training; the plan is a go-plan JSON file, or what gopt.place makes with
--method (default best-heuristic, under a second for most graphs).
"""
import argparse
import collections
import json
import sys

import gopt


def critical_path(g, cluster, plan):
    """(SimResult, totals: Counter of ms by kind, path: the units on it, last first, link counts:
    how each of them was held, by a data input on its device, a transfer, or its device's order)."""
    r = gopt.simulate(g, cluster, plan, trace=True)
    if not r.valid:
        raise gopt.Error(f"the plan is invalid: {r.reason}")
    events = json.loads(r.trace)["traceEvents"]
    num_devices = len(r.busy_time_ms)
    fusion = list(plan.fusion) if len(plan.fusion) else [-1] * g.num_ops
    members = collections.defaultdict(list)
    for v, f in enumerate(fusion):
        if f >= 0:
            members[f].append(v)
    # a tensor's output index: tensors are numbered by producer, in output order
    producer = g.tensor_producer.tolist()
    first = {}
    for k, u in enumerate(producer):
        first.setdefault(u, k)
    preds = collections.defaultdict(list)  # op -> [(producer, output index)]
    for (u, v), tensor in zip(g.edges.tolist(), g.edge_tensors.tolist()):
        if tensor >= 0:
            preds[v].append((u, tensor - first[u]))
    names = g.names
    units, unit_of = [], {}
    for e in events:
        if e.get("ph") != "X" or e["pid"] != 0:
            continue
        i = e["args"]["index"]
        ops = members[fusion[i]] if fusion[i] >= 0 else [i]
        u = {"start": e["ts"] / 1e3, "end": (e["ts"] + e["dur"]) / 1e3, "device": e["tid"],
             "name": e["name"], "kind": e["cat"], "ops": ops}
        units.append(u)
        for v in ops:
            unit_of[v] = u
    arrival = {}  # (producer, output index, device) -> (start, end) of the tensor's transfer there
    for e in events:
        if e.get("ph") == "X" and e["pid"] == 1:
            output = int(e["name"].rsplit(":", 1)[1])
            arrival[(e["args"]["producer"], output, e["tid"] % num_devices)] = (e["ts"] / 1e3, (e["ts"] + e["dur"]) / 1e3)
    # Ops of zero time (inputs, views) are no units: each is done when its last input is there
    # (topological order), and the walk passes through them as through a unit of no length.
    device = list(plan.device)

    def arrival_at(p, output, d):  # (when p's output reaches device d, its transfer or None)
        x = arrival.get((p, output, d)) if device[p] != d else None
        return (x[1], x) if x else (unit_of[p]["end"], None)

    for v in g.topo_order.tolist():
        if v in unit_of:
            continue
        t = max((arrival_at(p, output, device[v])[0] for p, output in preds[v]), default=0.0)
        unit_of[v] = {"start": t, "end": t, "device": device[v], "name": names[v], "kind": "", "ops": [v],
                      "zero": True}
    by_device = collections.defaultdict(list)
    for u in units:
        by_device[u["device"]].append(u)
    for d in by_device:
        by_device[d].sort(key=lambda u: u["start"])
    totals, links, path = collections.Counter(), collections.Counter(), []
    u = max(units, key=lambda u: u["end"])
    while u is not None:
        zero = u.get("zero", False)
        if not zero:
            path.append(u)
            totals["compute"] += u["end"] - u["start"]
        # the data input that arrived last
        data, inside = (-1.0, None, None), set(u["ops"])
        for v in u["ops"]:
            for p, output in preds[v]:
                if p in inside:
                    continue
                t, x = arrival_at(p, output, u["device"])
                if t > data[0]:
                    data = (t, unit_of[p], x)
        # the device's previous unit
        prev = None
        for q in [] if zero else by_device[u["device"]]:
            if q["start"] >= u["start"]:
                break
            if q["end"] <= u["start"] + 1e-9 and (prev is None or q["end"] > prev["end"]):
                prev = q
        if prev is not None and prev["end"] > data[0] + 1e-9:  # a tie is the data's
            u["ready"] = prev["end"]
            totals["gaps"] += u["start"] - prev["end"]
            links["device order"] += 1
            u = prev
            continue
        if data[1] is None:
            u["ready"] = 0.0
            totals["gaps"] += u["start"]
            break
        t, pu, x = data
        u["ready"] = t  # what let the unit start: it cannot start before
        totals["gaps"] += u["start"] - t
        if x is not None:
            totals["transfers"] += x[1] - x[0]
            totals["waiting for a link"] += x[0] - pu["end"]
        if not zero:
            links["transfer" if x is not None else "data, same device"] += 1
        u = pu
    return r, totals, path, links


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("graph")
    ap.add_argument("cluster")
    ap.add_argument("--plan", help="go-plan JSON file (default: what --method makes)")
    ap.add_argument("--method", default="best-heuristic", help="gopt.place method when no --plan (default best-heuristic)")
    ap.add_argument("--no-training", action="store_true", help="the graph as it is, not its training graph")
    ap.add_argument("--seed", type=int, default=0, help="the method's seed (default 0)")
    args = ap.parse_args()
    try:
        g = gopt.load_graph(args.graph, training=not args.no_training)
        c = gopt.cluster(args.cluster)
        plan = gopt.Plan.load(args.plan, g) if args.plan else gopt.place(g, c, args.method, seed=args.seed).plan
        r, totals, path, links = critical_path(g, c, plan)
    except gopt.Error as e:
        sys.exit(f"critical_path.py: {e}")
    step = r.step_time_ms
    print(f"{args.graph} on {args.cluster}: step {step:.2f} ms, {g.num_ops} ops; the critical path has {len(path)} units")
    for k in ("compute", "transfers", "waiting for a link", "gaps"):
        print(f"  {k:20s} {totals[k]:9.2f} ms  {100 * totals[k] / step:5.1f}%")
    print("  links: " + ", ".join(f"{k} {v}" for k, v in links.most_common()))
    kinds, devices = collections.Counter(), collections.Counter()
    for u in path:
        kinds[u["kind"]] += u["end"] - u["start"]
        devices[u["device"]] += u["end"] - u["start"]
    print("  compute on the path by op kind: " + ", ".join(f"{k} {v:.1f}" for k, v in kinds.most_common(6)))
    print("  compute on the path by device:  " + ", ".join(f"gpu{d} {v:.1f}" for d, v in sorted(devices.items())))
    print("  busy per device:                " + ", ".join(f"gpu{d} {b:.1f}" for d, b in enumerate(r.busy_time_ms)))


if __name__ == "__main__":
    main()
