#!/usr/bin/env python3
"""Where a plan's hand-offs wait for busy copy channels, and what its gradient sums would give
elsewhere; by default GO's plan of the 80,588-op graph (zoo:gnmt8:seq=121, v100x8).

GO's answer on that graph is its anchor (human's placement fitted to memory, rank priorities,
XLA-like fusion, latest-first order, devices relabelled; 1,202.53 ms): 20 updates of fine-tuning
and annealing in the same time find nothing faster. best-heuristic answers the same plan, so
without --plan the script takes it from there (about a second instead of a minute). It prints:
  - where the step time goes (the critical path: compute, transfers, waits for a busy link);
  - the path's longest hand-offs, with what kept the sender's copy channel busy meanwhile;
  - the gradient sum (an `accumulate` op, AddN: it keeps all its inputs until it runs) that
    receives the most bytes from other devices, those bytes per device, and the step time and
    memory with that one op on each device instead; where that is faster but out of memory, the
    plan fitted to memory (gopt.fit_memory, the procedure of GO's anchor and --fit-memory);
  - every unfused gradient sum moved to the device that sends it the most bytes: all at once, and
    one at a time (the 40 with the most bytes to gain, each kept where it makes the step faster).

    PYTHONPATH=build/python python3 bench/link_waits.py
    gopt place zoo:gnmt4 --training --cluster v100x4 --method go --finetune 20 --seed 0 --out gnmt4.go.json
    PYTHONPATH=build/python python3 bench/link_waits.py --graph zoo:gnmt4 --cluster v100x4 --plan gnmt4.go.json
"""
import argparse
import collections
import json
import re

import numpy as np

import gopt

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graph", default="zoo:gnmt8:seq=121", help="graph, expanded to its training graph (default zoo:gnmt8:seq=121)")
    ap.add_argument("--cluster", default="v100x8", help="cluster preset or go-cluster JSON (default v100x8)")
    ap.add_argument("--plan", help="go-plan file (gopt place --out); default: best-heuristic's plan")
    args = ap.parse_args()
    g = gopt.load_graph(args.graph, training=True)
    c = gopt.cluster(args.cluster)
    if args.plan:
        plan, what = gopt.Plan.load(args.plan, g), args.plan
    else:
        res = gopt.place(g, c, "best-heuristic")
        plan, what = res.plan, "best-heuristic: " + res.note
    r = gopt.simulate(g, c, plan, critical_path=True, trace=True)
    cp = r.critical_path
    print(f"{args.graph} on {args.cluster}: {r.step_time_ms:.2f} ms, valid {r.valid} ({what})")
    total = cp["end_ms"]
    for k in ("compute_ms", "transfers_ms", "link_wait_ms", "gaps_ms"):
        print(f"  {k[:-3]:10s} {cp[k]:9.2f} ms  {100 * cp[k] / total:5.1f}%")
    busy = np.array(r.busy_time_ms)
    print("  busy %:", " ".join(f"{100 * b / r.step_time_ms:.1f}" for b in busy),
          f"(mean {100 * busy.mean() / r.step_time_ms:.1f})")
    print("  peak GB:", " ".join(f"{p / 1e9:.2f}" for p in r.peak_memory_bytes),
          f"(capacity {np.asarray(c.memory_bytes)[0] / 1e9:.2f})")

    # the path's hand-offs: a unit let start by a transfer waited from its producer's finish (the
    # next unit on the path) to the transfer's end; of that, the transfer itself is short here
    ev = json.loads(r.trace)
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    link_name = {e["tid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e.get("pid") == 1
                 and e["name"] == "thread_name"}
    xfers = [e for e in ev if e.get("ph") == "X" and e.get("pid") == 1]
    ends = lambda tid: tuple(int(x) for x in re.match(r"gpu(\d+) -> gpu(\d+)", link_name[tid]).groups())
    units, link, fin, ready = cp["units"], cp["link"], cp["finish_ms"], cp["ready_ms"]
    waits = sorted(((ready[i] - fin[i + 1], i) for i in range(len(units) - 1) if link[i] == "transfer"), reverse=True)
    print("  longest hand-offs on the path (ms from producer's finish to arrival):")
    for w, i in waits[:3]:
        x = min(xfers, key=lambda e: abs((e["ts"] + e["dur"]) / 1000 - ready[i]))
        s, _ = ends(x["tid"])
        t0, t1 = fin[i + 1], x["ts"] / 1000
        sent = [e for e in xfers if ends(e["tid"])[0] == s and e["ts"] / 1000 < t1 and (e["ts"] + e["dur"]) / 1000 > t0]
        by = collections.Counter()
        for e in sent:
            by[re.sub(r"/t\d+/", "/t*/", e["name"])] += e["dur"] / 1000
        top = ", ".join(f"{n} {v:.1f} ms" for n, v in by.most_common(3))
        print(f"    {w:7.2f}  {x['name']} ({link_name[x['tid']]}); gpu{s} sent {len(sent)} tensors meanwhile: {top}")

    # the gradient sums' inputs by the device that sends them
    kinds, dev = g.kinds, np.asarray(plan.device)
    fusion = np.asarray(plan.fusion) if len(plan.fusion) else np.full(len(dev), -1)
    into = collections.defaultdict(collections.Counter)
    for (s, d), b in zip(g.edges, g.edge_bytes):
        if kinds[d] == "accumulate":
            into[int(d)][int(dev[s])] += int(b)
    simulate = lambda devices: gopt.simulate(g, c, gopt.Plan(device=devices.astype(np.int32), priority=plan.priority,
                                                              fusion=plan.fusion))
    remote = {o: sum(b for d, b in cnt.items() if d != dev[o]) for o, cnt in into.items()}
    op = max(remote, key=remote.get) if remote else None
    if op is not None and remote[op] > 0:
        print(f"  {g.names[op]} on gpu{dev[op]} receives", ", ".join(
            f"{b / 1e9:.2f} GB from gpu{d}" for d, b in sorted(into[op].items()) if d != dev[op]))
        for d in range(c.num_devices):
            if fusion[op] >= 0:
                print("    (it is fused: moving it alone would split its group)")
                break
            moved = dev.copy()
            moved[op] = d
            m = simulate(moved)
            line = f"    on gpu{d}: {m.step_time_ms:8.2f} ms  {m.status:13s} gpu{d} peak {m.peak_memory_bytes[d] / 1e9:.2f} GB"
            if not m.valid and m.step_time_ms < r.step_time_ms:
                f = gopt.fit_memory(g, c, gopt.Plan(device=moved.astype(np.int32), priority=plan.priority, fusion=plan.fusion))
                line += f"; fitted: {f.step_time_ms:.2f} ms, valid {f.valid} ({f.note})"
            print(line)

    # every unfused sum (in no group, or alone in one) to its main sender
    size = collections.Counter(fusion[fusion >= 0].tolist())
    moves = []
    for o, cnt in into.items():
        to = cnt.most_common(1)[0][0]
        if to != dev[o] and (fusion[o] < 0 or size[int(fusion[o])] == 1) and g.colocation[o] < 0:
            moves.append((cnt[to] - cnt[int(dev[o])], o, to))
    moves.sort(reverse=True)
    print(f"  gradient sums: {len(into)}, of which {len(moves)} unfused and not on the device sending them the most bytes")
    if moves:
        every = dev.copy()
        for _, o, to in moves:
            every[o] = to
        m = simulate(every)
        print(f"    all moved there: {m.step_time_ms:.2f} ms, {m.status}")
        cur, best = dev.copy(), r.step_time_ms
        for _, o, to in moves[:40]:
            trial = cur.copy()
            trial[o] = to
            m = simulate(trial)
            if m.valid and m.step_time_ms < best:
                cur, best = trial, m.step_time_ms
        print(f"    one at a time, kept where faster: {best:.2f} ms ({best / r.step_time_ms:.4f}x)")

if __name__ == "__main__":
    main()
