#!/usr/bin/env bash
# The GO paper's placement table (its 14 rows), simulated: per row, every baseline, the best
# heuristic, annealing (twice: from its own starts, and from GO's anchor too), GO's fine-tuning search
# without the policy (anchor-search), HDP (as the reference sets it, and tuned for this simulator) and
# GO-one given the same wall-clock time as GO fine-tuned, GO zero-shot and GO fine-tuned, with each
# optimizer's wall time.
#
#   bench/paper_table.sh [--finetune N] [--policy CKPT] [--rows LIST] [--out DIR] [--seed S] [--summarize]
#
#   --finetune  PPO updates of GO fine-tuned per row (default 20)
#   --policy    the pre-trained policy (default: the shipped one, policies/go-zoo-v100x248.ckpt)
#   --rows      comma-separated row names (default: all 14; see ROWS below), e.g. rnnlm2,gnmt2
#   --out       folder for the per-row CSVs and the table (default bench-out/paper_table)
#   --seed      seed of every method (default 0)
#   --summarize print the table again from the files a run left in --out, running nothing
#
# Rows (training graphs, V100 clusters), as in the paper: RNNLM 2/4/8 layers on 2/4/8 GPUs, GNMT
# 2/4/8 on 2/4/8, Transformer-XL 2/4/8 on 2/4/8, Inception-v3 on 2 GPUs at batch 32 and 64,
# AmoebaNet on 4, WaveNet 2 stacks on 2 and 4 stacks on 4.
# Per row: (1) `gopt eval` with human, metis, heft, m-etf, m-sct, best-heuristic, go-zero-shot and go
# (--finetune N); (2) T = go's optimize_seconds; (3) `gopt eval` with anneal (placement, priorities
# and fusion), anneal-anchor (the same, starting also from GO's anchor), anchor-search (GO's block
# moves and critical-path moves from its anchor, without the policy), hdp, hdp-tuned and go-one,
# all with --time-limit T. Cells: simulated step time in ms (optimizer wall seconds); OOM = the plan
# does not fit. Column "bound": no valid plan of the row (fusion groups within go's fusion rules,
# as every method's plan is) simulates faster (`gopt simulate --json`'s lower_bound_ms.valid_plan,
# go/sim/bound.hpp; its any_plan where a gopt before it wrote none). Last rows: geometric means of
# each column over human, GO fine-tuned over the best non-GO cell of each row, GO fine-tuned over
# anchor-search, and the bound over the best non-GO cell (the lowest ratio any plan could reach).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GOPT="${GOPT:-$ROOT/build/gopt}"
FINETUNE=20
POLICY="$ROOT/policies/go-zoo-v100x248.ckpt"
OUT="$ROOT/bench-out/paper_table"
SEED=0
ROWS_WANTED=""
SUMMARIZE=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --finetune) FINETUNE="$2"; shift 2 ;;
    --policy) POLICY="$2"; shift 2 ;;
    --rows) ROWS_WANTED="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --seed) SEED="$2"; shift 2 ;;
    --summarize) SUMMARIZE=1; shift ;;
    -h|--help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench/paper_table.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
done
[[ "$SUMMARIZE" == 1 || -x "$GOPT" ]] || { echo "bench/paper_table.sh: $GOPT not built (cmake --build build --target gopt)" >&2; exit 1; }
[[ "$SUMMARIZE" == 1 || -f "$POLICY" ]] || { echo "bench/paper_table.sh: policy $POLICY not found" >&2; exit 1; }

# name graph cluster
ROWS=(
  "rnnlm2 zoo:rnnlm2 v100x2" "rnnlm4 zoo:rnnlm4 v100x4" "rnnlm8 zoo:rnnlm8 v100x8"
  "gnmt2 zoo:gnmt2 v100x2" "gnmt4 zoo:gnmt4 v100x4" "gnmt8 zoo:gnmt8 v100x8"
  "transformer_xl2 zoo:transformer_xl2 v100x2" "transformer_xl4 zoo:transformer_xl4 v100x4"
  "transformer_xl8 zoo:transformer_xl8 v100x8"
  "inception_v3_b32 zoo:inception_v3:batch=32 v100x2" "inception_v3_b64 zoo:inception_v3:batch=64 v100x2"
  "amoebanet zoo:amoebanet v100x4" "wavenet2 zoo:wavenet2 v100x2" "wavenet4 zoo:wavenet4 v100x4"
)
mkdir -p "$OUT"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
for row in "${ROWS[@]}"; do
  read -r name graph cluster <<< "$row"
  [[ "$SUMMARIZE" == 0 ]] || break
  [[ -z "$ROWS_WANTED" || ",$ROWS_WANTED," == *",$name,"* ]] || continue
  echo "== $name: $graph on $cluster" >&2
  "$GOPT" eval --graphs "$graph" --training --cluster "$cluster" --seed "$SEED" --policy "$POLICY" \
    --methods human,metis,heft,m-etf,m-sct,best-heuristic,go-zero-shot,go --finetune "$FINETUNE" \
    --csv "$OUT/$name.a.csv" > /dev/null
  T=$(python3 -c "import csv,sys; print(next(r['optimize_seconds'] for r in csv.DictReader(open(sys.argv[1])) if r['method'] == 'go'))" "$OUT/$name.a.csv")
  echo "   go took $T s: anneal, anneal-anchor, anchor-search, hdp, hdp-tuned and go-one get as long" >&2
  "$GOPT" eval --graphs "$graph" --training --cluster "$cluster" --seed "$SEED" --policy "$POLICY" \
    --methods anneal,anneal-anchor,anchor-search,hdp,hdp-tuned,go-one --time-limit "$T" --budget 100000000 --csv "$OUT/$name.b.csv" > /dev/null
  "$GOPT" simulate "$graph" --training --cluster "$cluster" --json > "$OUT/$name.bound.json"
done

python3 - "$OUT" "${ROWS[@]}" <<'EOF' | tee "$OUT/table.md"
import csv, math, os, sys
out, rows = sys.argv[1], [r.split() for r in sys.argv[2:]]
cols = ["human", "metis", "heft", "m-etf", "m-sct", "best-heuristic", "anneal", "anneal-anchor", "anchor-search", "hdp",
        "hdp-tuned", "go-one", "go-zero-shot", "go"]
non_go = ["human", "metis", "heft", "m-etf", "m-sct", "best-heuristic", "anneal", "anneal-anchor", "anchor-search", "hdp",
          "hdp-tuned"]
print("| model (GPUs) | ops | bound | " + " | ".join(cols) + " |")
print("|---|---:|---:|" + "---:|" * len(cols))
ratios = {c: [] for c in cols}
vs_best, bound_vs_best, vs_search, vs_others = [], [], [], []
for name, graph, cluster in rows:
    cells = {}
    for part in "ab":
        p = f"{out}/{name}.{part}.csv"
        if os.path.exists(p):
            for r in csv.DictReader(open(p)):
                cells[r["method"]] = r
    if "go" not in cells:
        continue
    def ms(m):
        r = cells.get(m)
        return float(r["step_time_ms"]) if r and r["valid"] == "1" else math.inf
    text = []
    for c in cols:
        r = cells.get(c)
        if r is None:
            text.append("-")
            continue
        t = ms(c)
        text.append(("OOM" if math.isinf(t) else f"{t:.2f}") + f" ({float(r['optimize_seconds']):.1f})")
    h = ms("human")
    for c in cols:
        if math.isfinite(h) and math.isfinite(ms(c)):
            ratios[c].append(ms(c) / h)
    best = min(ms(c) for c in non_go)
    if math.isfinite(best) and math.isfinite(ms("go")):
        vs_best.append(ms("go") / best)
    if math.isfinite(ms("go")) and math.isfinite(ms("anchor-search")):
        vs_search.append(ms("go") / ms("anchor-search"))
    others = min(ms(c) for c in non_go if c != "anchor-search")
    if math.isfinite(others) and math.isfinite(ms("go")):
        vs_others.append(ms("go") / others)
    bound = math.nan
    if os.path.exists(f"{out}/{name}.bound.json"):
        import json
        lb = json.load(open(f"{out}/{name}.bound.json"))["lower_bound_ms"]
        bound = lb.get("valid_plan", lb["any_plan"])
        if math.isfinite(best):
            bound_vs_best.append(bound / best)
    ops = next(iter(cells.values()))["num_ops"]
    print(f"| {name} ({cluster}) | {ops} | " + ("-" if math.isnan(bound) else f"{bound:.2f}") + " | " + " | ".join(text) + " |")
geo = lambda v: math.exp(sum(math.log(x) for x in v) / len(v)) if v else math.nan
print("| geo-mean / human | | | " + " | ".join(f"{geo(ratios[c]):.3f} ({len(ratios[c])})" for c in cols) + " |")
print(f"\nGO fine-tuned / best non-GO cell of its row: geo-mean {geo(vs_best):.3f}, worst {max(vs_best, default=math.nan):.3f} "
      f"({len(vs_best)} rows); zero-shot / fine-tuned: geo-mean "
      f"{geo([a / b for a, b in zip(ratios['go-zero-shot'], ratios['go'])]):.3f}")
if vs_others:
    print(f"GO fine-tuned / best cell of the other optimizers (anchor-search, GO's search without its policy, left out): "
          f"geo-mean {geo(vs_others):.3f}, worst {max(vs_others):.3f}")
if vs_search:
    print(f"GO fine-tuned / anchor-search (its search without the policy, the same time): geo-mean {geo(vs_search):.3f}, "
          f"over {len(vs_search)} rows GO behind by more than 0.1% on {sum(v > 1.001 for v in vs_search)}, ahead by more "
          f"than 0.1% on {sum(v < 0.999 for v in vs_search)}")
if bound_vs_best:
    print(f"bound / best non-GO cell (no valid plan can go lower): geo-mean {geo(bound_vs_best):.3f}, highest "
          f"{max(bound_vs_best):.3f} ({len(bound_vs_best)} rows)")
EOF
