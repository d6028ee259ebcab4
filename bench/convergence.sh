#!/usr/bin/env bash
# Convergence against HDP (the GO paper's "15x faster than HDP"): per row of the paper's table, the
# simulated samples and wall time GO fine-tuned needs to reach HDP's final step time, against
# HDP's own, for HDP with the reference's settings (hdp) and HDP tuned for go's simulator
# (hdp-tuned), and best step time against samples for GO, GO-one, both HDPs and annealing.
#
#   bench/convergence.sh [--time-limit T] [--max-finetune N] [--policy CKPT] [--rows LIST] [--out DIR] [--seed S]
#
#   --time-limit    seconds of each HDP, GO-one and annealing run (default 60)
#   --max-finetune  PPO updates of GO fine-tuned (default 32)
#   --policy        the pre-trained policy (default: the shipped one)
#   --rows          comma-separated row names of bench/paper_table.sh (default: all 14)
#   --out           folder for the CSVs and the table (default bench-out/convergence)
#   --seed          seed of every method (default 0)
#
# Per row, one run of each method: hdp and hdp-tuned for T seconds, go with --finetune N (128
# samples per update), go-one for T seconds, anneal for T seconds (or 100,000 simulations). Every
# method counts samples the same way: each simulator call that evaluates a plan is one sample, in
# the order the method makes them (GO: its anchor's candidates, its reward reference, the zero-shot
# plans, then each update's samples; a batch simulated in parallel is recorded in its own order),
# and its note ends with the best step time after each improvement (trace samples:seconds:ms,
# go/baselines/best_trace.hpp). A curve is the prefix of one run: a run given a smaller budget can
# differ (annealing cools faster, PPO's learning rate decays sooner).
# HDP's final step time is the target, the sample that reached it HDP's cost; the first sample at
# which another method's best is at or below the target is its cost. Writes points.csv (row,
# method, samples, seconds, ms: every improvement of every method) for plots, and table.md: per HDP
# variant and row, HDP's target and cost, GO / GO-one / anneal's cost, and HDP's samples and
# seconds over GO's (the paper reports 15x; geometric means last).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GOPT="${GOPT:-$ROOT/build/gopt}"
T=60
MAXF=32
POLICY="$ROOT/policies/go-zoo-v100x248.ckpt"
OUT="$ROOT/bench-out/convergence"
SEED=0
ROWS_WANTED=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --time-limit) T="$2"; shift 2 ;;
    --max-finetune) MAXF="$2"; shift 2 ;;
    --policy) POLICY="$2"; shift 2 ;;
    --rows) ROWS_WANTED="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --seed) SEED="$2"; shift 2 ;;
    -h|--help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench/convergence.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
done
[[ -x "$GOPT" ]] || { echo "bench/convergence.sh: $GOPT not built (cmake --build build --target gopt)" >&2; exit 1; }
[[ -f "$POLICY" ]] || { echo "bench/convergence.sh: policy $POLICY not found" >&2; exit 1; }

# name graph cluster: the rows of bench/paper_table.sh, read from it so the two stay one list
eval "$(sed -n '/^ROWS=(/,/^)/p' "$ROOT/bench/paper_table.sh")"
[[ ${#ROWS[@]} -gt 0 ]] || { echo "bench/convergence.sh: no ROWS=( ... ) in bench/paper_table.sh" >&2; exit 1; }
mkdir -p "$OUT"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
run() {  # csv-file tag extra-args...: one gopt eval, its rows appended with the tag (sweep point)
  local csv="$1" tag="$2"
  shift 2
  "$GOPT" eval --graphs "$graph" --training --cluster "$cluster" --seed "$SEED" --policy "$POLICY" \
    --csv "$OUT/tmp.csv" "$@" > /dev/null
  if [[ ! -f "$csv" ]]; then head -1 "$OUT/tmp.csv" | sed 's/^/point,/' > "$csv"; fi
  tail -n +2 "$OUT/tmp.csv" | sed "s/^/$tag,/" >> "$csv"
}
for row in "${ROWS[@]}"; do
  read -r name graph cluster <<< "$row"
  [[ -z "$ROWS_WANTED" || ",$ROWS_WANTED," == *",$name,"* ]] || continue
  echo "== $name: $graph on $cluster" >&2
  rm -f "$OUT/$name".*.csv
  run "$OUT/$name.hdp.csv" "$T" --methods hdp,hdp-tuned --time-limit "$T" --budget 100000000
  run "$OUT/$name.go.csv" "$MAXF" --methods go --finetune "$MAXF"
  run "$OUT/$name.go-one.csv" "$T" --methods go-one --time-limit "$T"
  run "$OUT/$name.anneal.csv" "$T" --methods anneal --budget 100000 --time-limit "$T"
done
rm -f "$OUT/tmp.csv"

python3 - "$OUT" "${ROWS[@]}" <<'EOF' | tee "$OUT/table.md"
import csv, math, os, sys
out, rows = sys.argv[1], [r.split() for r in sys.argv[2:]]
def read(name, m):
    p = f"{out}/{name}.{m}.csv"
    return list(csv.DictReader(open(p))) if os.path.exists(p) else []
def trace(r):  # [(samples, seconds, best ms)] from the note's "trace samples:seconds:ms ..."
    if r is None or "trace samples:seconds:ms" not in r["note"]:
        return []
    pts = r["note"].split("trace samples:seconds:ms")[-1].split()
    return [(int(p.split(":")[0]), float(p.split(":")[1]), float(p.split(":")[2])) for p in pts]
def first_at(tr, target):  # (samples, seconds) of the first point at or below target, else None
    return next(((s, sec) for s, sec, t in tr if t <= target * (1 + 1e-9)), None)
geo = lambda v: math.exp(sum(math.log(x) for x in v) / len(v)) if v else math.nan
points = [("row", "method", "samples", "seconds", "ms")]
traces = {}
for name, graph, cluster in rows:
    for file, methods in (("hdp", ("hdp", "hdp-tuned")), ("go", ("go",)), ("go-one", ("go-one",)), ("anneal", ("anneal",))):
        for m in methods:
            r = next((x for x in read(name, file) if x["method"] == m), None)
            if r is None:
                continue
            traces[name, m] = trace(r)
            for s, sec, t in traces[name, m]:
                points.append((name, m, s, sec, t))
for h in ("hdp", "hdp-tuned"):
    print(f"\n#### against {h}\n")
    print(f"| model (GPUs) | {h} final ms | {h} samples (s) | GO samples (s) | GO-one samples (s) | anneal samples (s) | {h} / GO samples | {h} / GO seconds |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    ratios, sec_ratios, missed = [], [], []
    for name, graph, cluster in rows:
        tr = traces.get((name, h))
        if not tr:
            continue
        target = tr[-1][2]
        cost = tr[-1]
        found = {m: first_at(traces.get((name, m), []), target) for m in ("go", "go-one", "anneal")}
        cell = lambda x: "not reached" if x is None else f"{x[0]} ({x[1]:.1f})"
        go = found["go"]
        ratio = cost[0] / go[0] if go else math.nan
        sec_ratio = cost[1] / go[1] if go and go[1] > 0 else math.nan
        if go is None:
            missed.append(name)
        if math.isfinite(ratio):
            ratios.append(ratio)
        if math.isfinite(sec_ratio):
            sec_ratios.append(sec_ratio)
        print(f"| {name} ({cluster}) | {target:.2f} | {cost[0]} ({cost[1]:.1f}) | {cell(go)} | {cell(found['go-one'])} | "
              f"{cell(found['anneal'])} | {ratio:.1f} | {sec_ratio:.1f} |")
    print(f"\n{h}'s samples to its final step time over GO fine-tuned's samples to reach it: geo-mean {geo(ratios):.1f}, "
          f"wall time {geo(sec_ratios):.1f} ({len(ratios)} rows; the paper: 15)"
          + (f"; GO did not reach {h}'s result on {', '.join(missed)}" if missed else ""))
with open(f"{out}/points.csv", "w", newline="") as f:
    csv.writer(f).writerows(points)
EOF
