#!/usr/bin/env bash
# Every method's gap to the optimum on small real graphs: `exact` (the placement + schedule MILP
# with CBC, include/go/baselines/exact.hpp) against the baselines, annealing and GO.
#
#   bench/exact_gap.sh [--cluster C] [--time-limit S] [--hdp-time S] [--graphs LIST] [--out DIR] [--seed N]
#                      [--table-only]
#
#   --cluster     cluster preset or JSON (default v100x4)
#   --time-limit  seconds of CBC per graph (default 30; the whole default run then takes about 10
#                 minutes on 2 cores)
#   --hdp-time    seconds of HDP and of HDP-tuned per graph (default 10; each trains from scratch and
#                 stops at that time)
#   --graphs      comma-separated names from the list below (default: all)
#   --out         folder for the per-graph CSVs and the table (default bench-out/exact_gap)
#   --seed        seed of every method (default 0)
#   --table-only  print the table from the CSVs of an earlier run in --out
#
# Graphs (tens of ops): PipeDream layer profiles (forward, and the training graphs go builds from
# them), dnn-partitioning layer graphs, and two zoo workloads shrunk by their own options (fewer time
# steps: go has no graph coarsening, so the zoo's full-size graphs, 800 to 80,000 ops, are out of
# reach of the MILP). Methods: default, human, pipeline, metis, heft, m-topo, m-etf, m-sct, anneal,
# anneal-anchor, best-heuristic, go-zero-shot, go (those this gopt knows), all with their defaults,
# hdp and hdp-tuned with --hdp-time, and exact with --time-limit. The MILP is a relaxation of the simulator (exact.hpp): its optimum (or CBC's bound
# when not proven) L is a lower bound on every unfused plan's simulated step time, and the best
# simulated plan of any method an upper bound on the simulator's optimum. Cells: simulated step time
# in ms and its gap to L; the exact columns give L, whether CBC proved the MILP optimum (else its
# gap) and exact's own plan simulated (above L where the simulator's link contention or list
# scheduling delays it).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GOPT="${GOPT:-$ROOT/build/gopt}"
CLUSTER=v100x4
LIMIT=30
HDP_LIMIT=10
OUT="$ROOT/bench-out/exact_gap"
SEED=0
WANTED=""
TABLE_ONLY=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cluster) CLUSTER="$2"; shift 2 ;;
    --time-limit) LIMIT="$2"; shift 2 ;;
    --hdp-time) HDP_LIMIT="$2"; shift 2 ;;
    --graphs) WANTED="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --seed) SEED="$2"; shift 2 ;;
    --table-only) TABLE_ONLY=1; shift ;;
    -h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench/exact_gap.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
done
[[ -x "$GOPT" ]] || { echo "bench/exact_gap.sh: $GOPT not built (cmake --build build --target gopt)" >&2; exit 1; }

P=data/real-data/msr-fiddle-pipedream
D=data/real-data/msr-fiddle-dnn-partitioning/throughput-inputs/LayerGraphs
# name graph [--training]
GRAPHS=(
  "alexnet-train $P/alexnet/graph.txt --training"
  "vgg16-train $P/vgg16/graph.txt --training"
  "gnmt-pd $P/gnmt/graph.txt"
  "gnmt-pd-train $P/gnmt/graph.txt --training"
  "squeezenet $P/squeezenet1_0/graph.txt"
  "resnet18 $P/resnet18/graph.txt"
  "bert24-inf $D/bert24_inference.json"
  "bert24-train $D/bert24_training.json"
  "gnmt-dp-inf $D/gnmt_inference.json"
  "rnnlm2-seq2 zoo:rnnlm2:seq=2"
  "txl2-seq2 zoo:transformer_xl2:seq=2:segments=1"
)
WANT_METHODS=(default human pipeline metis heft m-topo m-etf m-sct anneal anneal-anchor best-heuristic go-zero-shot go hdp hdp-tuned)
KNOWN="$("$GOPT" eval --help | grep -- '--methods')"
grep -q 'exact' <<< "$KNOWN" || { echo "bench/exact_gap.sh: $GOPT has no exact method" >&2; exit 1; }
METHODS=()
for m in "${WANT_METHODS[@]}"; do
  [[ "$KNOWN" =~ [\(\ ,]$m[,\)] ]] && METHODS+=("$m")
done
OTHERS_A=() HDPS_A=()
for m in "${METHODS[@]}"; do
  if [[ $m == hdp* ]]; then HDPS_A+=("$m"); else OTHERS_A+=("$m"); fi
done
OTHERS="$(IFS=,; echo "${OTHERS_A[*]}")" HDPS="$(IFS=,; echo "${HDPS_A[*]}")"

mkdir -p "$OUT"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
cd "$ROOT"
if [[ $TABLE_ONLY == 0 ]]; then
  rm -f "$OUT"/*.csv
  t0=$SECONDS
  for row in "${GRAPHS[@]}"; do
    read -r name graph training <<< "$row"
    [[ -z "$WANTED" || ",$WANTED," == *",$name,"* ]] || continue
    echo "== $name: $graph ${training:-} on $CLUSTER ($((SECONDS - t0)) s)" >&2
    # exact on its own: --time-limit would also bound anneal and go
    "$GOPT" eval --graphs "$graph" ${training:-} --cluster "$CLUSTER" --seed "$SEED" --methods exact \
      --time-limit "$LIMIT" --csv "$OUT/$name.exact.csv" > "$OUT/$name.exact.log"
    "$GOPT" eval --graphs "$graph" ${training:-} --cluster "$CLUSTER" --seed "$SEED" --methods "$OTHERS" \
      --csv "$OUT/$name.others.csv" > "$OUT/$name.others.log"
    if [[ -n "$HDPS" ]]; then  # trained from scratch: bounded by time, not by their 1000 samples
      "$GOPT" eval --graphs "$graph" ${training:-} --cluster "$CLUSTER" --seed "$SEED" --methods "$HDPS" \
        --time-limit "$HDP_LIMIT" --budget 100000 --csv "$OUT/$name.hdp.csv" > "$OUT/$name.hdp.log"
    fi
  done
  echo "== done in $((SECONDS - t0)) s" >&2
fi

python3 - "$OUT" "$CLUSTER" "$LIMIT" "${METHODS[@]}" <<'PY' | tee "$OUT/table.md"
import csv, glob, math, os, re, sys
out, cluster, limit, methods = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
rows, order = {}, []
for path in sorted(glob.glob(os.path.join(out, "*.csv")), key=os.path.getmtime):
    name = os.path.basename(path).split(".")[0]
    if name not in rows:
        rows[name] = {}
        order.append(name)
    with open(path) as f:
        for r in csv.DictReader(f):
            rows[name][r["method"]] = r
            rows[name]["_ops"] = r["num_ops"]
def ms(r):
    return float(r["step_time_ms"]) if r["valid"] == "1" else math.inf
print(f"cluster {cluster}; CBC time limit {limit} s per graph; L = the MILP optimum (proven) or CBC's bound: a lower")
print("bound on every unfused plan's simulated step time; cells: simulated step time ms (gap to L)\n")
cols = ["exact"] + methods
head = ["graph", "ops", "L ms", "MILP proven"] + cols
print("| " + " | ".join(head) + " |")
print("|---|" + "---:|" * (len(head) - 1))
ratios = {m: [] for m in cols}
within = {m: 0 for m in cols}
proven = 0
for name in order:
    r = rows[name]
    e = r.get("exact")
    if e is None:
        continue
    note = e["note"]
    L = float(re.search(r"lower bound ([0-9.e+-]+) ms", note).group(1))
    gap = re.search(r"gap ([0-9.]+)%", note)
    is_opt = note.startswith("optimal")
    proven += is_opt
    cells = [name, r["_ops"], f"{L:.2f}", "yes" if is_opt else "memory-limited" if note.startswith("the optimum without")
             else f"no (gap {gap.group(1)}%)" if gap else "no"]
    for m in cols:
        x = r.get(m)
        if x is None:
            cells.append("-")
            continue
        t = ms(x)
        if math.isinf(t):
            cells.append("OOM")
            continue
        ratios[m].append(t / L)
        within[m] += t <= 1.05 * L
        cells.append(f"{t:.2f} ({100 * (t / L - 1):+.1f}%)")
    print("| " + " | ".join(cells) + " |")
def gm(v):
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else math.nan
print(f"| geo-mean gap | | | {proven}/{len(order)} | " + " | ".join(f"{100 * (gm(ratios[m]) - 1):+.1f}%" for m in cols) + " |")
print("| worst gap | | | | " + " | ".join(f"{100 * (max(ratios[m]) - 1):+.1f}%" if ratios[m] else "-" for m in cols) + " |")
print("| within 5% of L | | | | " + " | ".join(f"{within[m]}/{len(ratios[m])}" for m in cols) + " |")
PY
