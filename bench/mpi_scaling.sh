#!/usr/bin/env bash
# PPO throughput (samples/s) of `gopt train` with 1 process and with N MPI ranks on the same config
# (include/go/rl/distributed.hpp): every run trains the same samples, so the runs differ only in
# how the work is split. Usage:
#   bench/mpi_scaling.sh [GOPT (default build/gopt)] [RANKS (default 2)] [UPDATES (default 6)]
# Prints one line per setting: the mean samples/s over updates 2..UPDATES (update 1 warms up), from
# the metrics CSV, and the wall and CPU time (user + system, all processes) of the whole run
# including set-up: on a machine whose cores are busy with other work, equal CPU-seconds for 1 and
# N ranks show that the split costs little even when the wall time cannot improve. Environment: GRAPH (default zoo:rnnlm2), CLUSTER (default v100x4).
set -euo pipefail
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"  # idle OpenMP threads sleep (shared cores)
here="$(cd "$(dirname "$0")" && pwd)"
gopt="${1:-$here/../build/gopt}" ranks="${2:-2}" updates="${3:-6}"
graph="${GRAPH:-zoo:rnnlm2}" cluster="${CLUSTER:-v100x4}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cat > "$work/bench.json" <<'JSON'
{ "type": "go_ppo", "samples": 16, "epochs": 2, "minibatch": 8, "seed": 1,
  "policy": { "hidden": 64, "heads": 4, "sage_layers": 2, "segment_length": 128, "memory_length": 128,
              "ffn_dim": 256, "value_hidden": 64 } }
JSON
root=()
[ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
rate() {  # mean samples/s over updates 2.. of a metrics CSV (columns: 17 samples, 18 seconds)
  awk -F, 'NR > 2 { s += $17; t += $18 } END { printf "%.1f", (t > 0 ? s / t : 0) }' "$1"
}
run() {  # label, omp threads, sim threads, launcher...
  local label="$1" omp="$2" sim="$3"
  shift 3
  local TIMEFORMAT='%U %S %R'
  { time OMP_NUM_THREADS="$omp" "$@" "$gopt" train --graphs "$graph" --cluster "$cluster" --config "$work/bench.json" \
    --updates "$updates" --threads "$sim" --out "$work/$label.ckpt" --quiet > /dev/null ; } 2> "$work/time"
  printf '%-40s %8s samples/s   whole run: %s\n' "$label" "$(rate "$work/$label.ckpt.csv")" \
    "$(awk '{ printf "%.1f s wall, %.1f CPU-s", $3, $1 + $2 }' "$work/time")"
}
echo "gopt train on $graph / $cluster, 16 samples per update, 2 epochs, minibatch 8, hidden 64; $(nproc) cores"
run "1 process, 1 OpenMP thread" 1 1
run "1 process, $ranks OpenMP threads" "$ranks" "$ranks"
run "$ranks ranks (mpirun), 1 OpenMP thread each" 1 1 mpirun "${root[@]}" --oversubscribe -np "$ranks"
