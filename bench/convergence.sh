#!/usr/bin/env bash
# Convergence against HDP (the GO paper's "15x faster than HDP"): per row of the paper's table, the
# simulated samples and wall time GO fine-tuned needs to reach HDP's final step time, against
# HDP's own, and best step time against samples for GO, GO-one, HDP and annealing.
#
#   bench/convergence.sh [--time-limit T] [--max-finetune N] [--policy CKPT] [--rows LIST] [--out DIR] [--seed S]
#
#   --time-limit    seconds of HDP, and the longest run of GO-one and annealing (default 60)
#   --max-finetune  the largest PPO update count of GO fine-tuned's sweep (default 32)
#   --policy        the pre-trained policy (default: the shipped one)
#   --rows          comma-separated row names of bench/paper_table.sh (default: all 14)
#   --out           folder for the CSVs and the table (default bench-out/convergence)
#   --seed          seed of every method (default 0)
#
# Per row: (1) hdp for --time-limit seconds; its note traces the best step time at each improvement
# (samples:seconds:ms); its final step time is the target and the sample that reached it HDP's cost.
# (2) go with --finetune 0, 1, 2, 4, ... up to --max-finetune (16 samples per update), each a fresh
# run of the same seed. (3) go-one with --time-limit T/8, T/4, T/2, T. (4) anneal with --budget 10,
# 100, 1,000, 10,000, 100,000 (at most T seconds each). Sweep points are separate runs, so a point
# is "the best plan of a run given that budget", not a prefix of one run. GO's samples count its
# simulations (zero-shot samples and fine-tuning samples) plus the anchor's candidates, which
# best-heuristic simulates the same way. Writes points.csv (row, method, samples, seconds, ms) for
# plots, and table.md: per row, HDP's target and cost, the first GO / GO-one / anneal point at or
# below the target, and HDP's samples and seconds over GO's (the paper reports 15x; geometric
# means last).
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
    -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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
  run "$OUT/$name.hdp.csv" "$T" --methods hdp,best-heuristic --time-limit "$T" --budget 100000000
  k=0
  while (( k <= MAXF )); do
    run "$OUT/$name.go.csv" "$k" --methods go --finetune "$k"
    k=$(( k == 0 ? 1 : 2 * k ))
  done
  for f in 8 4 2 1; do
    t=$(python3 -c "print($T / $f)")
    run "$OUT/$name.go-one.csv" "$t" --methods go-one --time-limit "$t"
  done
  for b in 10 100 1000 10000 100000; do
    run "$OUT/$name.anneal.csv" "$b" --methods anneal --budget "$b" --time-limit "$T"
  done
done
rm -f "$OUT/tmp.csv"

python3 - "$OUT" "${ROWS[@]}" <<'EOF' | tee "$OUT/table.md"
import csv, math, os, sys
out, rows = sys.argv[1], [r.split() for r in sys.argv[2:]]
def read(name, m):
    p = f"{out}/{name}.{m}.csv"
    return list(csv.DictReader(open(p))) if os.path.exists(p) else []
def ms(r):
    return float(r["step_time_ms"]) if r["valid"] == "1" else math.inf
points = [("row", "method", "samples", "seconds", "ms")]
print("| model (GPUs) | HDP final ms | HDP samples (s) | GO samples (s) | GO-one samples (s) | anneal samples (s) | HDP / GO samples | HDP / GO seconds |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
ratios, sec_ratios = [], []
for name, graph, cluster in rows:
    hdp_rows = read(name, "hdp")
    hdp = next((r for r in hdp_rows if r["method"] == "hdp"), None)
    bh = next((r for r in hdp_rows if r["method"] == "best-heuristic"), None)
    if hdp is None:
        continue
    anchor = int(bh["simulations"]) if bh else 0
    trace = hdp["note"].split("trace samples:seconds:ms")[-1].split()
    trace = [tuple(float(x) for x in p.split(":")) for p in trace]
    for s, sec, t in trace:
        points.append((name, "hdp", int(s), sec, t))
    target = ms(hdp)
    cost = trace[-1] if trace else (math.inf, math.inf, math.inf)
    found = {}
    for m in ("go", "go-one", "anneal"):
        sweep = [r for r in read(name, m) if r["method"] == m]
        for r in sweep:
            s = int(r["simulations"]) + (anchor if m.startswith("go") else 0)
            points.append((name, m, s, float(r["optimize_seconds"]), ms(r)))
        hits = [(int(r["simulations"]) + (anchor if m.startswith("go") else 0), float(r["optimize_seconds"]))
                for r in sweep if ms(r) <= target * (1 + 1e-9)]
        found[m] = min(hits) if hits else None
    cell = lambda h: "not reached" if h is None else f"{h[0]} ({h[1]:.1f})"
    ratio = cost[0] / found["go"][0] if found["go"] and math.isfinite(cost[0]) else math.nan
    sec_ratio = cost[1] / found["go"][1] if found["go"] and math.isfinite(cost[1]) and found["go"][1] > 0 else math.nan
    if math.isfinite(ratio):
        ratios.append(ratio)
    if math.isfinite(sec_ratio):
        sec_ratios.append(sec_ratio)
    print(f"| {name} ({cluster}) | {target:.2f} | {int(cost[0]) if math.isfinite(cost[0]) else '-'} ({cost[1]:.1f}) | "
          f"{cell(found['go'])} | {cell(found['go-one'])} | {cell(found['anneal'])} | {ratio:.1f} | {sec_ratio:.1f} |")
geo = lambda v: math.exp(sum(math.log(x) for x in v) / len(v)) if v else math.nan
print(f"\nHDP's samples to its final step time over GO fine-tuned's samples to reach it: geo-mean {geo(ratios):.1f}, "
      f"wall time {geo(sec_ratios):.1f} ({len(ratios)} rows; the paper: 15)")
with open(f"{out}/points.csv", "w", newline="") as f:
    csv.writer(f).writerows(points)
EOF
