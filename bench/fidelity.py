#!/usr/bin/env python3
"""Simulator fidelity on NeuSight's measured GPUs (issue 15, part 5): for every profile
label/<GPU>/<model>-<inf|train>-<seq>-<batch>.csv, the whole model simulated on one <gpu>x1 device
(default plan) against the measured end-to-end time of its sibling .json:
  (a) measured: the profile's measured per-op times composed by the simulator;
  (b) roofline: the roofline cost model alone with the preset's default efficiencies (--cost roofline);
  (c) calibrated: the roofline with the device calibrated leave-one-GPU-out (gopt calibrate on the
      other GPUs' profiles, transferred to this GPU's peak and bandwidth).
Measured e2e: inference `e2e_latency`; training `fw_latency + bwall_latency` (= e2e_latency).
Prints a markdown table (per case the four times and the errors, then median and worst absolute
error per column) and writes it to <out>/fidelity.md. Usage:
  bench/fidelity.py [neusight folder (holding label/) or a label folder] [--gopt PATH] [--out DIR]
"""
import argparse
import json
import os
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
    table = "\n".join(lines) + "\n"
    sys.stdout.write(table)
    with open(os.path.join(a.out, "fidelity.md"), "w") as f:
        f.write(table)


if __name__ == "__main__":
    main()
