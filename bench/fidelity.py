#!/usr/bin/env python3
"""Simulator fidelity on NeuSight's measured GPUs (issue 15, part 5): for every profile
label/<GPU>/<model>-<inf|train>-<seq>-<batch>.csv, the whole model simulated on one <gpu>x1 device
(default plan) against the measured end-to-end time of its sibling .json:
  (a) measured: the profile's measured per-op times composed by the simulator;
  (b) roofline: the roofline cost model alone with the preset's default efficiencies (--cost roofline);
  (c) calibrated: the roofline with the device calibrated leave-one-GPU-out (gopt calibrate on the
      other GPUs' profiles, transferred to this GPU's peak and bandwidth, GEMM efficiencies carried
      to its machine balance: include/go/sim/calibrate.hpp).
Measured e2e: inference `e2e_latency`; training `fw_latency + bwall_latency` (= e2e_latency).
Then three more sections:
  (d) fused vs non-fused inference (every <case>-fusion.json, torch.compile): the measured saving
      1 - fused / non-fused against the saving our simulator predicts for `--fusion xla` over no
      fusion (default plan, one GPU), with (a) measured op times (a fused group keeps its measured
      library kernels' times and streams its other external bytes at its longest measured loop
      member's rate: include/go/sim/simulator/semantics.hpp, "Fusion"), (b) the roofline, (c') the roofline
      calibrated on this GPU's own profiles, and (d'') the measured op times with each fused group
      costed as its slowest member (computed here from the simulator's per-op times and groups, not
      a rule of the simulator); error in points;
  (e) 4-GPU pipeline training (`-pp4_1`, Megatron-LM, 4 stages, one micro-batch) on a100-sxm4-40gbx4:
      the training profile of the same model and batch measured on another A100 (the SXM4 folder has
      none), layers split into 4 contiguous stages of equal layer count (Megatron's split; embeddings
      with the first stage, the final norm, head and loss with the last), given to `place --method
      human --expert`; also the generic `human` rule;
  (f) Inception-v3 batch 64 training on 4 GPUs: m-ETF / m-SCT / m-TOPO over one GPU (`default`) vs
      BaechiPyTorch's measured ratios (REFERENCES.md), on v100x4 (BaechiPyTorch's GPUs are not
      stated there).
Prints markdown tables (per case the times and the errors, then median and worst absolute error
per column) and writes them to <out>/fidelity.md. Usage:
  bench/fidelity.py [neusight folder (holding label/) or a label folder] [--gopt PATH] [--out DIR]
"""
import argparse
import csv
import json
import os
import re
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def gpu_preset(folder):
    # the rule of go::neusight_gpu_preset (include/go/sim/calibrate.hpp)
    s = folder.replace("_", "-").lower()
    for p in ("nvidia-", "tesla-", "amd-instinct-"):
        if s.startswith(p):
            return s[len(p):]
    return s


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("fidelity: %s failed: %s" % (" ".join(cmd), r.stderr.strip() or r.stdout.strip()))
    return r.stdout


def simulate(gopt, csv, cluster, training, roofline):
    cmd = [gopt, "simulate", csv, "--cluster", cluster, "--json"]
    if training:
        cmd.append("--training")
    if roofline:
        cmd += ["--cost", "roofline"]
    j = json.loads(run(cmd))
    return j["step_time_ms"], j["valid"]


def place(gopt, graph, cluster, method, training=False, roofline=False, fusion=None, expert=None):
    cmd = [gopt, "place", graph, "--cluster", cluster, "--method", method, "--json"]
    if training:
        cmd.append("--training")
    if roofline:
        cmd += ["--cost", "roofline"]
    if fusion:
        cmd += ["--fusion", fusion]
    if expert:
        cmd += ["--expert", expert]
    j = json.loads(run(cmd))
    return j["step_time_ms"], j["valid"]


def fusion_rows(gopt, label, gpus, fits, out):
    """(d): per case with a -fusion.json: measured saving and the three predicted ones (fractions)."""
    rows = []
    for g, csvs in gpus.items():
        dev = gpu_preset(g)
        for c in csvs:
            path = os.path.join(label, g, c)
            fused = path[:-4] + "-fusion.json"
            if "-inf-" not in c or not os.path.exists(fused) or not os.path.exists(path[:-4] + ".json"):
                continue
            meas = 1 - json.load(open(fused))["e2e_latency"] / json.load(open(path[:-4] + ".json"))["e2e_latency"]
            pred = []
            for cluster, roof in ((dev + "x1", False), (dev + "x1", True), (fits.get(g), True)):
                if cluster is None:
                    pred.append(None)
                    continue
                none, _ = place(gopt, path, cluster, "default", roofline=roof, fusion="none")
                xla, _ = place(gopt, path, cluster, "default", roofline=roof, fusion="xla")
                pred.append(1 - xla / none)
            pred.append(slowest_member_saving(gopt, path, dev + "x1", out))
            rows.append((dev, c[:-4], meas, pred))
    return rows


def slowest_member_saving(gopt, path, cluster, out):
    """(d'') not the simulator's rule: the measured op times of the default plan, each `--fusion xla`
    group costed as its slowest member (a fused loop kernel streams about what its largest member
    does; a library kernel's epilogue rides along). One GPU runs its units back to back, so the
    step is the sum of the unit times."""
    trace, plan = os.path.join(out, "unfused-trace.json"), os.path.join(out, "xla-plan.json")
    run([gopt, "simulate", path, "--cluster", cluster, "--trace", trace, "--json"])
    run([gopt, "place", path, "--cluster", cluster, "--method", "default", "--fusion", "xla", "--out", plan, "--json"])
    events = json.load(open(trace))
    events = events["traceEvents"] if isinstance(events, dict) else events
    dur = {e["args"]["op"]: e["dur"] for e in events if e.get("ph") == "X"}  # NeuSight op ids are dense indices
    fusion = json.load(open(plan)).get("fusion") or []
    groups = {}
    lone = 0.0
    for i in range(len(fusion) or max(dur) + 1):
        f = fusion[i] if fusion else -1
        if f < 0:
            lone += dur.get(i, 0.0)
        else:
            groups[f] = max(groups.get(f, 0.0), dur.get(i, 0.0))
    return 1 - (lone + sum(groups.values())) / sum(dur.values())


def layer_plan(gopt, label_csv, out, stages):
    """(e): a go-plan putting layer i on stage i * stages / layers, the ops before the layers on the
    first stage and those after them (and the loss) on the last; training ops with their forward op.
    The op names and ids come from a Chrome trace of the training graph; the trace lists only ops
    that take time, so it is taken of a copy of the profile whose zero times are made tiny."""
    src_dir = os.path.dirname(label_csv)
    tmp_label = os.path.join(out, "names", "label", os.path.basename(src_dir))
    os.makedirs(tmp_label, exist_ok=True)
    cfg_src = os.path.join(src_dir, "..", "..", "model_configs")
    cfg_dst = os.path.join(out, "names", "model_configs")
    if os.path.isdir(cfg_src) and not os.path.isdir(cfg_dst):
        shutil.copytree(cfg_src, cfg_dst)
    copy = os.path.join(tmp_label, os.path.basename(label_csv))
    shutil.copy(label_csv[:-4] + ".json", copy[:-4] + ".json")
    with open(label_csv, newline="") as fi, open(copy, "w", newline="") as fo:
        r = csv.reader(fi)
        w = csv.writer(fo)
        header = next(r)
        w.writerow(header)
        cols = [header.index(k) for k in ("fw_latency", "bw_latency") if k in header]
        for row in r:
            for k in cols:
                if float(row[k]) == 0:
                    row[k] = "1e-9"
            w.writerow(row)
    trace = os.path.join(out, "names", "trace.json")
    j = json.loads(run([gopt, "simulate", copy, "--cluster", "a100-sxm4-40gbx1", "--training", "--json", "--trace", trace]))
    events = json.load(open(trace))
    events = events["traceEvents"] if isinstance(events, dict) else events
    names = {e["args"]["op"]: e["name"] for e in events if e.get("ph") == "X"}
    if len(names) != j["num_ops"]:
        sys.exit("fidelity: %s: the trace names %d of %d ops" % (copy, len(names), j["num_ops"]))
    base = lambda n: re.sub(r"/(grad|grad_sum\d*|update)$", "", n)
    # the layer container from the names of unnamed layer rows: "transformer.h.3/view_2"
    cont = None
    for n in names.values():
        m = re.match(r"^(.+)\.(\d+)/", n)
        if m:
            cont = m.group(1)
            break
    if cont is None:
        sys.exit("fidelity: %s: no layer copies in the op names" % copy)
    token = re.compile(r"^%s\.(\d+)/|%s_(\d+)_" % (re.escape(cont), re.escape(cont.replace(".", "_"))))
    layer = {}
    for i, n in names.items():
        m = token.search(base(n))
        if m:
            layer[i] = int(m.group(1) or m.group(2))
    layers = max(layer.values()) + 1
    first = min(i for i in layer)  # forward ops: pre-layer ids below the layers', post-layer above
    by_name = {n: i for i, n in names.items()}
    lists = [[] for _ in range(stages)]
    for i, n in names.items():
        if i in layer:
            s = layer[i] * stages // layers
        else:
            f = by_name.get(base(n))
            s = 0 if f is not None and f < first else stages - 1
        lists[s].append(i)
    plan = os.path.join(out, "pp%d-plan.json" % stages)
    json.dump({"format": "go-plan", "version": 1, "num_ops": j["num_ops"], "device_ops": lists}, open(plan, "w"))
    return plan, layers


def section_d(gopt, label, gpus, fits, out):
    rows = fusion_rows(gopt, label, gpus, fits, out)
    if not rows:
        return []
    pts = lambda p, m: None if p is None else abs(p - m) * 100
    fmt = lambda x, f: "-" if x is None else f % x
    lines = ["(d) fused vs non-fused inference: saving = 1 - fused / non-fused; predicted: `--fusion xla` vs none, "
             "default plan, one GPU; error in points",
             "",
             "| GPU | case | measured saving | (a) measured ops (simulator) | err | (b) roofline | err | (c') roofline calibrated on this GPU | err "
             "| (d'') measured ops, group = slowest member | err |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    cols = ([], [], [], [])
    for dev, case, meas, pred in rows:
        es = [pts(p, meas) for p in pred]
        for col, e in zip(cols, es):
            if e is not None:
                col.append(e)
        cells = []
        for p, e in zip(pred, es):
            cells += [fmt(None if p is None else p * 100, "%.1f%%"), fmt(e, "%.1f")]
        lines.append("| %s | %s | %.1f%% | %s |" % (dev, case, meas * 100, " | ".join(cells)))
    med = [fmt(statistics.median(c) if c else None, "**%.1f**") for c in cols]
    worst = [fmt(max(c) if c else None, "%.1f") for c in cols]
    lines.append("| **median abs error (points)** | %d cases | | | %s | | %s | | %s | | %s |" % (len(rows), *med))
    lines.append("| **worst** | | | | %s | | %s | | %s | | %s |" % tuple(worst))
    return lines


def section_e(gopt, label, out):
    gpu, model, stages = "NVIDIA_A100-SXM4-40GB", "gpt2_large-train-1024-4", 4
    meas_file = os.path.join(label, gpu, model + "-pp4_1.json")
    prof = os.path.join(label, "NVIDIA_A100_80GB_PCIe", model + ".csv")
    if not (os.path.exists(meas_file) and os.path.exists(prof)):
        return []
    meas = json.load(open(meas_file))["e2e_latency"]
    cluster = gpu_preset(gpu) + "x%d" % stages
    plan, layers = layer_plan(gopt, prof, out, stages)
    lines = ["(e) 4-GPU pipeline training, %s, %d stages, one micro-batch, on %s (measured %.1f ms); op times from "
             "NVIDIA_A100_80GB_PCIe/%s.csv (%d layers, %d per stage)" % (model, stages, cluster, meas, model, layers,
                                                                        layers // stages),
             "",
             "| placement | cost | simulated ms | err | valid |", "|---|---|---:|---:|---|"]
    err = lambda t: abs(t - meas) / meas * 100
    for name, method, expert in (("human: layers in %d equal stages" % stages, "human", plan),
                                 ("human: generic rule (blocks by depth)", "human", None)):
        for roof in (False, True):
            t, v = place(gopt, prof, cluster, method, training=True, roofline=roof, expert=expert)
            lines.append("| %s | %s | %.1f | %.1f%% | %s |" % (name, "roofline" if roof else "measured ops", t, err(t),
                                                              "yes" if v else "no"))
    t, v = simulate(gopt, prof, gpu_preset(gpu) + "x1", True, False)
    lines.append("| one GPU (for reference) | measured ops | %.1f | %.1f%% | %s |" % (t, err(t), "yes" if v else "no (memory)"))
    return lines


def section_f(gopt):
    measured = {"default": 457.4, "m-etf": 466.0, "m-sct": 462.5, "m-topo": 533.3}
    graphs = [("zoo:inception_v3:batch=64", "zoo, batch 64")]
    onnx = os.path.join(ROOT, "data", "models", "inception_v3.onnx")
    if os.path.exists(onnx):
        graphs.append((onnx, "torchvision ONNX, batch 32"))
    lines = ["(f) Inception-v3 training on 4 GPUs (v100x4): step time over one GPU (`default`), vs BaechiPyTorch's "
             "measured ratios (batch 64, one GPU 457.4 ms)",
             "",
             "| graph | one GPU ms | m-ETF | err | m-SCT | err | m-TOPO | err |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    ratio = {m: measured[m] / measured["default"] for m in measured}
    lines.append("| measured (BaechiPyTorch) | 457.4 | %.3f | | %.3f | | %.3f | |" % (ratio["m-etf"], ratio["m-sct"], ratio["m-topo"]))
    for graph, what in graphs:
        t = {m: place(gopt, graph, "v100x4", m, training=True)[0] for m in measured}
        cells = []
        for m in ("m-etf", "m-sct", "m-topo"):
            r = t[m] / t["default"]
            cells += ["%.3f" % r, "%.1f%%" % (abs(r - ratio[m]) / ratio[m] * 100)]
        lines.append("| %s | %.1f | %s |" % (what, t["default"], " | ".join(cells)))
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default = os.path.join(ROOT, "..", "shared", "real-data", "neusight")
    if not os.path.isdir(default):
        default = os.path.join(ROOT, "data", "real-data", "neusight")
    ap.add_argument("folder", nargs="?", default=default)
    ap.add_argument("--gopt", default=os.environ.get("GOPT", os.path.join(ROOT, "build", "gopt")))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench-out", "fidelity"))
    a = ap.parse_args()
    label = a.folder if os.path.basename(os.path.normpath(a.folder)) == "label" else os.path.join(a.folder, "label")
    if not os.path.isdir(label):
        sys.exit("fidelity: %s: no label/ folder of NeuSight profiles" % a.folder)
    os.makedirs(a.out, exist_ok=True)
    gpus = {}
    for g in sorted(os.listdir(label)):
        d = os.path.join(label, g)
        csvs = sorted(f for f in os.listdir(d) if f.endswith(".csv")) if os.path.isdir(d) else []
        if csvs:
            gpus[g] = csvs
    # Each GPU fitted on its own profiles once; the left-out GPU pools the others' fits.
    fits = {}
    for g in gpus:
        fits[g] = os.path.join(a.out, "fit-%s.json" % gpu_preset(g))
        run([a.gopt, "calibrate", "--profiles", os.path.join(label, g), "--device", gpu_preset(g), "--out", fits[g]])
    loo = {}
    for g in gpus:
        others = [fits[o] for o in gpus if o != g]
        if not others:
            continue
        loo[g] = os.path.join(a.out, "loo-%s.json" % gpu_preset(g))
        run([a.gopt, "calibrate", "--fitted", *others, "--device", gpu_preset(g), "--leave-out", "--out", loo[g]])
    rows = []
    for g, csvs in gpus.items():
        dev = gpu_preset(g)
        for c in csvs:
            path = os.path.join(label, g, c)
            side = path[:-4] + ".json"
            if not os.path.exists(side):
                continue
            m = json.load(open(side))
            training = "-train-" in c
            meas = m["fw_latency"] + m["bwall_latency"] if training else m["e2e_latency"]
            ta, va = simulate(a.gopt, path, dev + "x1", training, False)
            tb, vb = simulate(a.gopt, path, dev + "x1", training, True)
            tc, vc = simulate(a.gopt, path, loo[g], training, True) if g in loo else (None, True)
            rows.append((dev, c[:-4], meas, ta, tb, tc, va and vb and vc))
    err = lambda t, m: None if t is None else abs(t - m) / m * 100
    lines = ["| GPU | case | measured ms | (a) measured ops ms | err | (b) roofline ms | err | (c) calibrated LOO ms | err |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    cols = ([], [], [])
    fmt = lambda x, f: "-" if x is None else f % x
    for dev, case, meas, ta, tb, tc, valid in rows:
        es = [err(t, meas) for t in (ta, tb, tc)]
        for col, e in zip(cols, es):
            if e is not None:
                col.append(e)
        lines.append("| %s | %s%s | %.1f | %s | %s | %s | %s | %s | %s |" % (
            dev, case, "" if valid else " (sim: over memory)", meas, fmt(ta, "%.1f"), fmt(es[0], "%.1f%%"),
            fmt(tb, "%.1f"), fmt(es[1], "%.1f%%"), fmt(tc, "%.1f"), fmt(es[2], "%.1f%%")))
    med = [statistics.median(c) if c else None for c in cols]
    worst = [max(c) if c else None for c in cols]
    lines.append("| **median abs error** | %d cases | | | %s | | %s | | %s |" % (
        len(rows), *(fmt(x, "**%.2f%%**") for x in med)))
    lines.append("| **worst abs error** | | | | %s | | %s | | %s |" % tuple(fmt(x, "%.1f%%") for x in worst))
    # NeuSight's summary (shared README: absolute error of predicted vs measured e2e latency) on the
    # subsets it reports, next to ours on the same cases: min-max over the subset.
    lines += ["", "| subset (cases) | (a) measured ops | (b) roofline | (c) calibrated LOO | NeuSight's roofline | NeuSight |",
              "|---|---:|---:|---:|---:|---:|"]
    for name, dev, ns_roof, ns in (("a100-80gb-pcie training", "a100-80gb-pcie", "12-41%", "0.1-28%"),
                                   ("v100-pcie-32gb training", "v100-pcie-32gb", "12-22%", "3-14%")):
        sub = [r for r in rows if r[0] == dev and "-train-" in r[1]]
        if not sub:
            continue
        rng = []
        for i in (3, 4, 5):
            es = [err(r[i], r[2]) for r in sub if r[i] is not None]
            rng.append("%.1f-%.1f%%" % (min(es), max(es)) if es else "-")
        lines.append("| %s (%d) | %s | %s | %s | %s | %s |" % (name, len(sub), *rng, ns_roof, ns))
    lines += [""] + section_d(a.gopt, label, gpus, fits, a.out)
    lines += [""] + section_e(a.gopt, label, a.out)
    lines += [""] + section_f(a.gopt)
    table = "\n".join(lines) + "\n"
    sys.stdout.write(table)
    with open(os.path.join(a.out, "fidelity.md"), "w") as f:
        f.write(table)


if __name__ == "__main__":
    main()
