#!/usr/bin/env python3
"""The GO policy network of go/policy/policy.hpp in PyTorch, for bench/policy_vs_torch.sh.

Loads the inputs written by `bench_policy dump DIR` (DIR/graph.params: features, edges, the
fusion mask and actions in topological order; DIR/policy.params: the weights, with the config in the metadata),
runs one warm-up step and K timed steps of forward (teacher-forced actions) + the same PPO-shaped
loss + backward, and prints one JSON line like `bench_policy run`.

The same network, op for op:
  - GraphSAGE max-pool: messages gathered along edges, `Tensor.scatter_reduce(reduce="amax",
    include_self=False)` onto zeros (a node without neighbours gets 0, as in go's kernel);
  - segment-recurrent attention: the natural batched form for PyTorch 1.13 (which has no fused
    scaled_dot_product_attention): rows padded to whole segments, viewed as
    [segments, heads, seg_len, head_dim]; each segment's keys/values are the last mem_len rows of
    the previous segment, detached (Transformer-XL's stop-gradient memory), concatenated with its
    own; scores by batched matmul, the causal / memory / padding mask applied in place, softmax,
    matmul with the values. Requires mem_len <= seg_len (the default config has them equal);
  - everything else with the obvious torch ops (F.layer_norm, F.gelu exact, log_softmax, ...).
"""
import argparse
import json
import math
import os
import resource
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F


def load_go_params(path):
    """Reads a go parameter file (go/nn/serialize.hpp): magic, header length, JSON header, data."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"GOPARAMS":
        raise SystemExit(f"{path}: not a go parameter file")
    (hl,) = struct.unpack("<Q", data[8:16])
    header = json.loads(data[16:16 + hl])
    base = 16 + hl
    dtypes = {"f32": np.float32, "i32": np.int32, "i64": np.int64}
    out = {}
    for t in header["tensors"]:
        a = np.frombuffer(data, dtype=dtypes[t["dtype"]], count=int(np.prod(t["shape"], dtype=np.int64)),
                          offset=base + t["offset"]).reshape(t["shape"])
        out[t["name"]] = torch.from_numpy(a.copy())
    return out, header.get("meta", {})


def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class TorchGoPolicy:
    def __init__(self, params, cfg):
        self.cfg = cfg
        self.p = {k: v.clone().requires_grad_(True) for k, v in params.items()}

    def parameters(self):
        return list(self.p.values())

    def dense(self, x, name, act=None, bias=True):
        y = x @ self.p[name + ".weight"]
        if bias:
            y = y + self.p[name + ".bias"]
        if act == "relu":
            y = F.relu(y)
        elif act == "gelu":
            y = F.gelu(y)
        return y

    def ln(self, x, name):
        return F.layer_norm(x, (x.shape[1],), self.p[name + ".gamma"], self.p[name + ".beta"], 1e-5)

    @staticmethod
    def scatter_max(msg, dst, src, n):
        d = msg.shape[1]
        idx = dst.view(-1, 1).expand(-1, d)
        return torch.zeros(n, d, dtype=msg.dtype).scatter_reduce(0, idx, msg.index_select(0, src), reduce="amax",
                                                                 include_self=False)

    def seg_attention(self, q, k, v):
        cfg = self.cfg
        n, dm = q.shape
        H = cfg["heads"]
        hd = dm // H
        L, M = cfg["segment_length"], cfg["memory_length"]
        assert M <= L, "the reference implements mem_len <= seg_len"
        S = (n + L - 1) // L
        pad = S * L - n

        def split(x):
            if pad:
                x = F.pad(x, (0, 0, 0, pad))
            return x.view(S, L, H, hd).transpose(1, 2)  # [S, H, L, hd]

        qs, ks, vs = split(q), split(k), split(v)
        if M > 0:
            # memory of segment s: the last M rows of segment s - 1 (zeros for s = 0, masked below), detached
            km = F.pad(ks[:-1, :, L - M:, :].detach(), (0, 0, 0, 0, 0, 0, 1, 0))
            vm = F.pad(vs[:-1, :, L - M:, :].detach(), (0, 0, 0, 0, 0, 0, 1, 0))
            ks = torch.cat([km, ks], dim=2)
            vs = torch.cat([vm, vs], dim=2)
        scores = torch.matmul(qs * (1.0 / math.sqrt(hd)), ks.transpose(-1, -2))  # [S, H, L, M + L]
        scores.masked_fill_(self.mask(n, S, L, M, cfg["causal"]), float("-inf"))
        out = torch.matmul(torch.softmax(scores, dim=-1), vs)  # [S, H, L, hd]
        return out.transpose(1, 2).reshape(S * L, dm)[:n]

    def mask(self, n, S, L, M, causal):
        key = (n, S, L, M, causal)
        if getattr(self, "_mask_key", None) != key:
            qi = torch.arange(L).view(1, L, 1)
            kj = torch.arange(M + L).view(1, 1, M + L) - M  # key position relative to the segment start
            seg = torch.arange(S).view(S, 1, 1)
            masked = (seg * L + kj >= n) | (seg * L + kj < 0)  # padding rows; memory before row 0
            if causal:
                masked = masked | (kj > qi)
            self._mask = masked.unsqueeze(1)  # [S, 1, L, M + L]
            self._mask_key = key
        return self._mask

    def block(self, x, name, gate):
        u = x * gate if gate is not None else x
        z = self.ln(u, name + ".ln1")
        att = self.seg_attention(self.dense(z, name + ".q", bias=False), self.dense(z, name + ".k", bias=False),
                                 self.dense(z, name + ".v", bias=False))
        a = u + self.dense(att, name + ".o")
        return a + self.dense(self.dense(self.ln(a, name + ".ln2"), name + ".ff1", "gelu"), name + ".ff2")

    def forward(self, g, D, actions):
        cfg, p = self.cfg, self.p
        n = g["numeric"].shape[0]
        x = self.dense(g["numeric"], "input") + p["kind.table"].index_select(0, g["kinds"])
        h = F.relu(x)
        for l in range(cfg["sage_layers"]):
            name = f"sage.layer{l}"
            m = self.dense(h, name + ".pool", "relu")
            up = self.scatter_max(m, g["dst"], g["src"], n)
            down = self.scatter_max(m, g["src"], g["dst"], n)
            h = self.dense(torch.cat([h, up, down], dim=1), name + ".combine", "relu")
        context = h.mean(dim=0, keepdim=True)
        Lt = cfg["layers_per_task"]

        def run(task, tname, x):
            for l in range(Lt):
                gate = None
                if cfg["superposition"]:
                    gate = 2.0 * torch.sigmoid(self.dense(context, f"superposition.gate{task * Lt + l}"))
                x = self.block(x, f"{tname}.block{l}", gate)
            return x

        d = cfg["hidden"]
        zp = run(0, "placement", h)
        dev = p["placement.devices.table"][:D]
        dl = (self.dense(self.ln(zp, "placement.ln"), "placement.query") @ dev.t()) * (1.0 / math.sqrt(d))
        # chain "hidden": the tasks read the previous task's hidden states only; "action" (policy
        # files saved before the key existed): plus the embedding of the previous task's action
        hidden = cfg.get("chain", "action") == "hidden"
        zs = run(1, "priority", zp if hidden else zp + p["placement.action.table"].index_select(0, actions["device"]))
        pl = self.dense(self.ln(zs, "priority.ln"), "priority.head")
        zf = run(2, "fusion", zs if hidden else zs + p["priority.action.table"].index_select(0, actions["priority"]))
        fl = self.dense(self.ln(zf, "fusion.ln"), "fusion.head") + g["fusion_mask"]
        lp = 0
        ent = 0
        for logits, a in ((dl, actions["device"]), (pl, actions["priority"]), (fl, actions["fuse"])):
            ls = torch.log_softmax(logits, dim=1)
            lp = lp + ls.gather(1, a.view(-1, 1)).view(-1)
            ent = ent - (ls.exp() * ls).sum(dim=1)
        vin = torch.cat([context, dev.mean(dim=0, keepdim=True)], dim=1)
        value = self.dense(self.dense(vin, "value.fc1", "relu"), "value.fc2")
        return lp.sum(), ent.mean(), value


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    gt, meta = load_go_params(os.path.join(args.dir, "graph.params"))
    params, pmeta = load_go_params(os.path.join(args.dir, "policy.params"))
    cfg = pmeta["config"]
    n = gt["kinds"].shape[0]
    g = {"numeric": gt["numeric"], "kinds": gt["kinds"].long(), "dst": gt["edge_dst"].long(),
         "src": gt["edge_src"].long()}
    # the policy's fusion mask as go computed it (rows without a predecessor or of a kind that no
    # compiler fuses into a producer): the rule lives in one place, go/policy/features.hpp
    g["fusion_mask"] = gt["fusion_mask"]
    actions = {"device": gt["act_device"].long(), "priority": gt["act_priority"].long(), "fuse": gt["act_fuse"].long()}
    D = int(meta["num_devices"])
    net = TorchGoPolicy(params, cfg)
    load_s = time.perf_counter() - t0
    rss_loaded = rss_mb()
    fwd, total, cpu = [], [], []
    first = None
    for it in range(args.iters + 1):
        for q in net.parameters():
            q.grad = None
        s = time.perf_counter()
        c0 = time.process_time()
        lp, ent, value = net.forward(g, D, actions)
        loss = -lp / n - 0.01 * ent + 0.5 * ((value - 1.0) ** 2).sum()
        f = time.perf_counter() - s
        loss.backward()
        t = time.perf_counter() - s
        c = time.process_time() - c0
        if it == 0:
            first = (lp.item(), ent.item(), value.item(), loss.item())
        else:
            fwd.append(f)
            total.append(t)
            cpu.append(c)
    grad_norm = math.sqrt(sum(float((q.grad.double() ** 2).sum()) for q in net.parameters() if q.grad is not None))
    med = lambda v: sorted(v)[len(v) // 2]
    print(json.dumps({
        "impl": "torch", "torch": torch.__version__, "threads": torch.get_num_threads(), "nodes": n,
        "edges": int(g["dst"].numel()), "parameters": sum(q.numel() for q in net.parameters()),
        "load_s": round(load_s, 2), "rss_after_load_mb": round(rss_loaded, 1), "forward_s": round(med(fwd), 4),
        "step_s": round(med(total), 4), "step_min_s": round(min(total), 4), "step_cpu_s": round(med(cpu), 4), "steps": [round(x, 4) for x in total],
        "peak_rss_mb": round(peak_rss_mb(), 1), "log_prob_sum": first[0], "entropy_mean": first[1],
        "value": first[2], "loss": first[3], "grad_norm": grad_norm}))


if __name__ == "__main__":
    main()
