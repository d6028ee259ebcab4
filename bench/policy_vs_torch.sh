#!/usr/bin/env bash
# The GO policy network, forward + backward on an 80,000-op graph at default sizes with 2 threads:
# go (bench/bench_policy.cpp) against the same network in PyTorch (bench/torch_reference.py,
# Debian's python3-torch), each in its own process, on the same inputs and weights.
#
#   bench/policy_vs_torch.sh [--graph gnmt|synthetic] [--nodes N] [--iters K] [--threads T] [--netlib]
#
# Builds bench_policy (Release, build-pol/ unless BUILD_DIR is set), installs python3-torch and
# OpenBLAS with apt-get when missing (needs root), writes the graph, actions and weights once,
# runs both, checks that they compute the same loss, and prints, as its last line,
#   speedup_vs_torch=<PyTorch step time / go step time> memory_ratio=<go peak RSS / PyTorch peak RSS>
# Step time: median over K timed steps after one warm-up step. Peak RSS: getrusage ru_maxrss of
# each process (both include loading the inputs, building the network and every step).
#
# Debian's python3-torch calls the system BLAS (libblas.so.3); with only the reference (netlib)
# BLAS installed its matrix products are ~10x slower than an optimized one, so PyTorch runs on
# OpenBLAS (libopenblas0-pthread, selected with LD_LIBRARY_PATH for its process only). --netlib
# also runs it on the reference BLAS, for the record.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-pol}"
GRAPH=gnmt
NODES=80000
ITERS=3
THREADS=2
NETLIB=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --graph) GRAPH="$2"; shift 2 ;;
    --nodes) NODES="$2"; shift 2 ;;
    --iters) ITERS="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --netlib) NETLIB=1; shift ;;
    *) echo "usage: $0 [--graph gnmt|synthetic] [--nodes N] [--iters K] [--threads T] [--netlib]" >&2; exit 2 ;;
  esac
done

PY=/usr/bin/python3   # Debian's python (a pyenv python3 on PATH would not see python3-torch)
ARCH_LIB=/usr/lib/x86_64-linux-gnu
OPENBLAS_DIR="$ARCH_LIB/openblas-pthread"

as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo -n "$@"; fi; }
need_apt=()
"$PY" -c "import torch" 2>/dev/null || need_apt+=(python3-torch)
[[ -e "$OPENBLAS_DIR/libblas.so.3" ]] || need_apt+=(libopenblas0-pthread)
if [[ ${#need_apt[@]} -gt 0 ]]; then
  echo "installing ${need_apt[*]} ..." >&2
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y "${need_apt[@]}" >&2
fi

if [[ ! -f "$BUILD_DIR/build.ninja" && ! -f "$BUILD_DIR/Makefile" ]]; then
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGO_CUDA=OFF >&2
fi
cmake --build "$BUILD_DIR" --target bench_policy -j "$THREADS" >&2
BENCH="$BUILD_DIR/bench/bench_policy"

DATA="$(mktemp -d /tmp/go_policy_bench.XXXXXX)"
trap 'rm -rf "$DATA"' EXIT
echo "== inputs" >&2
"$BENCH" dump "$DATA" --graph "$GRAPH" --nodes "$NODES" | tee "$DATA/dump.json"

export OMP_NUM_THREADS="$THREADS" OPENBLAS_NUM_THREADS="$THREADS" MKL_NUM_THREADS="$THREADS"
echo "== go ($THREADS threads)" >&2
"$BENCH" run "$DATA" --iters "$ITERS" | tee "$DATA/go.json"
echo "== PyTorch ($THREADS threads, OpenBLAS)" >&2
LD_LIBRARY_PATH="$OPENBLAS_DIR" "$PY" -W ignore "$ROOT/bench/torch_reference.py" "$DATA" --iters "$ITERS" \
  --threads "$THREADS" | tee "$DATA/torch.json"
if [[ $NETLIB -eq 1 ]]; then
  echo "== PyTorch ($THREADS threads, reference BLAS)" >&2
  LD_LIBRARY_PATH="$ARCH_LIB/blas" "$PY" -W ignore "$ROOT/bench/torch_reference.py" "$DATA" --iters 1 \
    --threads "$THREADS" | tee "$DATA/torch_netlib.json"
fi
echo "== load average: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

"$PY" - "$DATA/go.json" "$DATA/torch.json" <<'EOF'
import json, sys
ours, ref = (json.load(open(p)) for p in sys.argv[1:3])
rel = abs(ours["loss"] - ref["loss"]) / max(1e-12, abs(ref["loss"]))
grel = abs(ours["grad_norm"] - ref["grad_norm"]) / max(1e-12, abs(ref["grad_norm"]))
print(f"same network: loss go {ours['loss']:.6g} torch {ref['loss']:.6g} (rel. diff {rel:.1e}), "
      f"gradient norm go {ours['grad_norm']:.6g} torch {ref['grad_norm']:.6g} (rel. diff {grel:.1e})")
if rel > 1e-3 or grel > 1e-2:
    sys.exit("the two implementations disagree: not the same network")
print(f"step (forward + backward): go {ours['step_s']:.3f} s, torch {ref['step_s']:.3f} s; "
      f"peak RSS: go {ours['peak_rss_mb']:.0f} MB, torch {ref['peak_rss_mb']:.0f} MB "
      f"(after loading: go {ours['rss_after_load_mb']:.0f} MB, torch {ref['rss_after_load_mb']:.0f} MB)")
print(f"CPU time per step (user + system, all threads): go {ours['step_cpu_s']:.3f} s, torch {ref['step_cpu_s']:.3f} s "
      f"(ratio {ref['step_cpu_s'] / ours['step_cpu_s']:.2f}; less sensitive to other processes than wall time)")
print(f"speedup_vs_torch={ref['step_s'] / ours['step_s']:.2f} memory_ratio={ours['peak_rss_mb'] / ref['peak_rss_mb']:.2f}")
EOF
