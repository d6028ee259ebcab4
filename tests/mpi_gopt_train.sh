#!/bin/sh
# `gopt train` under MPI (ctest mpi:gopt_train_two_ranks):
#   mpi_gopt_train.sh GOPT DATA_DIR WORK_DIR MPIRUN [launcher options, e.g. -n 2 --oversubscribe]
# 1. two ranks train 2 updates of a tiny policy: the header says "2 ranks", rank 0 alone writes the
#    checkpoint and a metrics CSV of 2 rows;
# 2. one process resumes that checkpoint to 3 updates;
# 3. one process trains 3 updates from scratch: its first update sampled the same plans (same
#    metrics-row rewards) as the two-rank run's.
set -eu
gopt="$1" data="$2" work="$3"
shift 3
here="$(cd "$(dirname "$0")" && pwd)"
rm -rf "$work"
mkdir -p "$work"
cat > "$work/tiny.json" <<'JSON'
{ "type": "go_ppo", "samples": 6, "epochs": 2, "minibatch": 3, "updates": 3, "seed": 5, "threads": 1,
  "policy": { "hidden": 16, "heads": 2, "sage_layers": 1, "segment_length": 8, "memory_length": 8,
              "ffn_dim": 32, "value_hidden": 16 } }
JSON
fail() { echo "FAILED: $*" >&2; exit 1; }
export OMP_NUM_THREADS=1
args="--graphs $data/graph/example.json --cluster v100x2 --config $work/tiny.json"

"$here/mpi_run.sh" "$@" "$gopt" train $args --updates 2 --out "$work/mpi.ckpt" > "$work/mpi.out" 2> "$work/mpi.err" \
  || { cat "$work/mpi.err" >&2; fail "mpirun gopt train"; }
cat "$work/mpi.err" "$work/mpi.out"
grep -q "2 ranks" "$work/mpi.err" || fail "no '2 ranks' in the progress header"
[ "$(grep -c "gopt train:" "$work/mpi.err")" = 1 ] || fail "progress header printed by more than rank 0"
[ -f "$work/mpi.ckpt" ] || fail "no checkpoint"
[ "$(grep -c '^[0-9]' "$work/mpi.ckpt.csv")" = 2 ] || fail "metrics CSV should have 2 rows"
[ "$(grep -c "^checkpoint " "$work/mpi.out")" = 1 ] || fail "summary printed by more than rank 0"

"$gopt" train $args --resume --updates 3 --out "$work/mpi.ckpt" > "$work/resume.out" 2> "$work/resume.err" \
  || { cat "$work/resume.err" >&2; fail "gopt train --resume"; }
cat "$work/resume.err"
grep -q "resuming at 2" "$work/resume.err" || fail "one process did not resume at update 2"
grep -q "1 process" "$work/resume.err" || fail "no '1 process' in the header"
[ "$(grep -c '^[0-9]' "$work/mpi.ckpt.csv")" = 3 ] || fail "metrics CSV should have 3 rows after the resume"

"$gopt" train $args --updates 3 --out "$work/one.ckpt" > /dev/null 2>&1 || fail "gopt train (one process)"
# columns 3-4: mean and max reward of update 1 (the same sampled plans)
[ "$(sed -n 2p "$work/mpi.ckpt.csv" | cut -d, -f1,3,4)" = "$(sed -n 2p "$work/one.ckpt.csv" | cut -d, -f1,3,4)" ] \
  || fail "update 1 rewards differ between 2 ranks and 1 process"
echo "mpi gopt train: OK"
