#!/usr/bin/env python3
"""Copies a `gopt train` checkpoint without the per-graph best plans, for shipping.

    scripts/ship_policy.py RUN.ckpt SHIPPED.ckpt

A pre-training checkpoint stores, per graph, the best plan found (device, priority and fusion of
every op) so that `--resume` continues exactly; on tens of thousands of ops per graph those plans
are most of the file. Loading a policy (`--policy`, `--init-policy`) reads only the parameters and
the config, so the shipped file keeps the parameters, Adam's moments, the config and the record of
the run (per graph: reference, best step time and the update that found it) and drops the plans.
Resume a pre-training from the full checkpoint, not from the shipped copy.
"""
import json
import struct
import sys

MAGIC_LEN = 8


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: scripts/ship_policy.py RUN.ckpt SHIPPED.ckpt")
    src, dst = argv[1], argv[2]
    try:
        data = open(src, "rb").read()
    except OSError as e:
        sys.exit(f"{src}: cannot read: {e.strerror}")
    if len(data) < 16:
        sys.exit(f"{src}: not a go parameter file (too short)")
    (hl,) = struct.unpack("<Q", data[MAGIC_LEN:16])
    try:
        header = json.loads(data[16:16 + hl])
    except ValueError as e:
        sys.exit(f"{src}: not a go parameter file (bad header: {e})")
    meta = header.get("meta", {})
    if header.get("format") != "go-parameters" or meta.get("format") != "go-ppo-checkpoint":
        sys.exit(f"{src}: not a gopt train checkpoint")
    for g in meta.get("graphs", []):
        best = g.get("best")
        if isinstance(best, dict):
            for k in ("device", "priority", "fusion"):
                best.pop(k, None)
    meta["shipped"] = "per-graph best plans removed by scripts/ship_policy.py; resume from the full checkpoint"
    h = json.dumps(header, separators=(",", ":")).encode()
    with open(dst, "wb") as f:
        f.write(data[:MAGIC_LEN] + struct.pack("<Q", len(h)) + h + data[16 + hl:])


if __name__ == "__main__":
    main(sys.argv)
