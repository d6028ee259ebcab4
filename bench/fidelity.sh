#!/usr/bin/env bash
# Simulator fidelity on NeuSight's measured GPUs: measured ops composed, roofline, and roofline
# calibrated leave-one-GPU-out, each vs the measured end-to-end time; then fused vs non-fused
# inference savings, the 4-GPU pipeline (pp4_1) and Inception-v3 on 4 GPUs (bench/fidelity.py).
#   bench/fidelity.sh [neusight folder, default ../shared/real-data/neusight or data/real-data/neusight]
#                     [--gopt build/gopt, or $GOPT] [--out bench-out/fidelity]
set -euo pipefail
exec python3 "$(dirname "$0")/fidelity.py" "$@"
