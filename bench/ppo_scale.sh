#!/usr/bin/env bash
# GO at the paper's scale: one PPO update and one zero-shot placement of an 80,000-op training
# graph, timed through the CLI as a user runs them, for this build and (optionally) another build
# of gopt in the same run, so that old and new code are compared on the same machine state.
#
#   bench/ppo_scale.sh [--graph SPEC] [--cluster C] [--threads T] [--updates N] [--old GOPT]
#                      [--policy CKPT] [--chains hidden,action]
#
#   --graph    graph spec (default zoo:gnmt8:seq=121: 80,588 ops as a training graph)
#   --cluster  cluster preset (default v100x8)
#   --threads  OMP_NUM_THREADS and simulation threads (default 2)
#   --updates  PPO updates timed per run (default 2; the first includes nothing extra: the anchor
#              and the graph are built before the first update and are not in its time)
#   --old      another gopt binary (e.g. a build of an earlier commit) run with the shipped policy
#   --policy   the network every run starts from (default policies/go-zoo-v100x248.ckpt); for
#              chain "hidden" a fresh network of the same sizes with chain "hidden" is made with
#              `gopt train --updates 0`
#   --chains   which task chainings to run with this build (default hidden,action)
#
# Per run it prints one line: the update times from the metrics CSV (column "seconds"; this
# build's CSV also splits the last one into sampling, simulation and gradient epochs), the
# zero-shot `optimize_seconds` of `gopt place --method go-zero-shot --json`, and the peak RSS of
# each process (getrusage of the child). The training config is TrainConfig's defaults.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GOPT="${GOPT:-$ROOT/build/gopt}"
GRAPH="zoo:gnmt8:seq=121"
CLUSTER=v100x8
THREADS=2
UPDATES=2
OLD=""
POLICY="$ROOT/policies/go-zoo-v100x248.ckpt"
CHAINS="hidden,action"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --graph) GRAPH="$2"; shift 2 ;;
    --cluster) CLUSTER="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --updates) UPDATES="$2"; shift 2 ;;
    --old) OLD="$2"; shift 2 ;;
    --policy) POLICY="$2"; shift 2 ;;
    --chains) CHAINS="$2"; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench/ppo_scale.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
done
[[ -x "$GOPT" ]] || { echo "bench/ppo_scale.sh: $GOPT not built (cmake --build build --target gopt)" >&2; exit 1; }
[[ -z "$OLD" || -x "$OLD" ]] || { echo "bench/ppo_scale.sh: --old $OLD is not an executable" >&2; exit 1; }
[[ -f "$POLICY" ]] || { echo "bench/ppo_scale.sh: policy $POLICY not found" >&2; exit 1; }
export OMP_NUM_THREADS="$THREADS" OMP_WAIT_POLICY=passive
TMP="$(mktemp -d /tmp/go_ppo_scale.XXXXXX)"
trap 'rm -rf "$TMP"' EXIT

# run LABEL CMD...: runs CMD, prints its wall seconds and peak RSS (MB) to $TMP/LABEL.rss
run() {
  local label="$1"; shift
  python3 - "$TMP/$label.rss" "$@" <<'EOF'
import resource, subprocess, sys, time
t = time.monotonic()
r = subprocess.run(sys.argv[2:], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
wall = time.monotonic() - t
if r.returncode != 0:
    sys.stderr.write(r.stderr)
    sys.exit(f"failed ({r.returncode}): {' '.join(sys.argv[2:])}")
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
open(sys.argv[1], "w").write(f"{wall:.2f} {rss:.0f}\n")
sys.stdout.write(r.stdout)
EOF
}

# one_run LABEL GOPT POLICY
one_run() {
  local label="$1" bin="$2" pol="$3"
  run "$label-train" "$bin" train --graphs "$GRAPH" --training --cluster "$CLUSTER" --init-policy "$pol" \
    --updates "$UPDATES" --threads "$THREADS" --seed 1 --out "$TMP/$label.ckpt" --metrics "$TMP/$label.csv" --quiet >/dev/null
  run "$label-zs" "$bin" place "$GRAPH" --training --cluster "$CLUSTER" --method go-zero-shot --policy "$pol" \
    --seed 0 --json > "$TMP/$label.zs.json"
  python3 - "$TMP" "$label" <<'EOF'
import csv, json, sys
tmp, label = sys.argv[1:3]
rows = list(csv.DictReader(open(f"{tmp}/{label}.csv")))
secs = ", ".join(f"{float(r['seconds']):.2f}" for r in rows)
if "train_seconds" in rows[-1]:  # this build's CSV has the breakdown of the last update
    r = rows[-1]
    secs += f"; last: sample {float(r['sample_seconds']):.2f} + simulate {float(r['simulate_seconds']):.2f} + train {float(r['train_seconds']):.2f}"
zs = json.load(open(f"{tmp}/{label}.zs.json"))
tw, tr = open(f"{tmp}/{label}-train.rss").read().split()
zw, zr = open(f"{tmp}/{label}-zs.rss").read().split()
best = zs.get("step_time_ms")
print(f"{label:>14}: update s [{secs}] (best {float(rows[-1]['best_step_time_ms']):.2f} ms), train peak RSS {tr} MB | "
      f"zero-shot optimize {zs['optimize_seconds']:.2f} s ({best:.2f} ms), peak RSS {zr} MB")
EOF
}

echo "graph $GRAPH, cluster $CLUSTER, $THREADS threads, $UPDATES update(s); load average $(cut -d' ' -f1-3 /proc/loadavg)"
[[ -n "$OLD" ]] && one_run old "$OLD" "$POLICY"
IFS=',' read -ra chains <<< "$CHAINS"
for ch in "${chains[@]}"; do
  pol="$POLICY"
  if [[ "$ch" == hidden ]]; then
    # the shipped network's sizes with chain "hidden" (a fresh network: timing does not depend on the weights)
    python3 - "$TMP/hidden.json" <<'EOF'
import json, sys
json.dump({"type": "go_ppo", "policy": {"hidden": 64, "heads": 4, "ffn_dim": 256, "sage_layers": 2, "value_hidden": 64,
           "segment_length": 128, "memory_length": 128, "max_devices": 8, "priority_levels": 8, "anchor": True,
           "anchor_bias": 4.0, "chain": "hidden", "seed": 1}}, open(sys.argv[1], "w"))
EOF
    "$GOPT" train --graphs zoo:rnnlm2 --cluster v100x2 --config "$TMP/hidden.json" --updates 0 --out "$TMP/hidden.ckpt" --quiet >/dev/null
    pol="$TMP/hidden.ckpt"
  fi
  one_run "new-$ch" "$GOPT" "$pol"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
