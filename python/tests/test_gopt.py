"""Tests of the Python module gopt (python/gopt_module.cpp, python/gopt_optimize.cpp).

ctest runs each class as its own test (python/CMakeLists.txt) with PYTHONPATH at build/python and
GOPT_CLI at the gopt binary of the same build; by hand:

    PYTHONPATH=build/python GOPT_CLI=build/gopt python3 -m unittest -v python/tests/test_gopt.py
"""
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import threading
import unittest
import warnings

import numpy as np

import gopt

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.environ.get("GO_DATA_DIR", os.path.join(REPO, "data"))
TEST_DATA = os.environ.get("GO_TEST_DATA_DIR", os.path.join(REPO, "tests", "data"))
CLI = os.environ.get("GOPT_CLI", "")
RESNET18 = os.path.join(DATA, "models", "resnet18.onnx")
EXAMPLE = os.path.join(TEST_DATA, "graph", "example.json")  # a two-layer MLP, 11 ops

# The smallest PPO run worth training (tests/test_train_cli.cpp uses the same).
TINY_CONFIG = {
    "type": "go_ppo", "samples": 4, "epochs": 1, "minibatch": 2, "updates": 2, "seed": 3, "threads": 1,
    "policy": {"hidden": 16, "heads": 2, "sage_layers": 1, "segment_length": 8, "memory_length": 8,
               "ffn_dim": 32, "value_hidden": 16},
}


def chain(n=3, flops=2e9, nbytes=4 << 20):
    """input -> matmul -> relu -> ... : n ops in a chain."""
    kinds = ["input"] + ["matmul" if i % 2 else "relu" for i in range(1, n)]
    return gopt.Graph.from_arrays(kinds=kinds, edges=[[i, i + 1] for i in range(n - 1)],
                                  flops=[0.0] + [flops] * (n - 1), output_bytes=[nbytes] * n)


class Graphs(unittest.TestCase):
    def test_onnx_arrays_are_consistent(self):
        g = gopt.load_graph(RESNET18)
        n = g.num_ops
        self.assertEqual(len(g), n)
        self.assertEqual(g.format, "onnx")
        self.assertFalse(g.training)
        self.assertEqual(g.batch, 32)
        for name in ("names", "kinds", "roles"):
            self.assertEqual(len(getattr(g, name)), n, name)
        for name, dtype in (("flops", np.float64), ("output_bytes", np.int64), ("input_bytes", np.int64),
                            ("param_bytes", np.int64), ("temp_bytes", np.int64), ("time", np.float64),
                            ("colocation", np.int32), ("topo_order", np.int32)):
            a = getattr(g, name)
            self.assertEqual(a.shape, (n,), name)
            self.assertEqual(a.dtype, dtype, name)
        self.assertTrue(set(g.kinds) <= set(gopt.op_kinds()))
        self.assertEqual(g.kinds.count("conv"), 20)
        self.assertTrue(np.all(np.isnan(g.time)))  # an ONNX export has no measured times
        # 11.69 M parameters (the published count), float32
        self.assertAlmostEqual(g.param_bytes.sum() / 4 / 1e6, 11.69, delta=0.12)
        e = g.edges
        self.assertEqual(e.shape, (g.num_edges, 2))
        self.assertEqual(e.dtype, np.int32)
        pos = np.empty(n, dtype=np.int64)
        pos[g.topo_order] = np.arange(n)
        self.assertTrue(np.all(pos[e[:, 0]] < pos[e[:, 1]]))  # edges follow the topological order
        self.assertEqual(g.edge_bytes.shape, (g.num_edges,))
        # every data edge carries its producer's output (one output per op in this export)
        self.assertTrue(np.array_equal(g.edge_bytes, g.output_bytes[e[:, 0]]))

    def test_training_graph(self):
        g = gopt.load_graph(RESNET18, training=True)
        fwd = gopt.load_graph(RESNET18)
        self.assertTrue(g.training)
        self.assertGreater(g.num_ops, 2 * fwd.num_ops)
        self.assertEqual(set(g.roles), {"forward", "backward", "update"})
        self.assertEqual(fwd.training_graph().num_ops, g.num_ops)
        with self.assertRaisesRegex(gopt.Error, "already a training graph"):
            g.training_graph()

    def test_zoo_and_profiles(self):
        g = gopt.load_graph("zoo:rnnlm2:seq=4")
        self.assertGreater(g.num_ops, 10)
        p = gopt.load_graph(os.path.join(DATA, "real-data", "msr-fiddle-pipedream", "alexnet", "graph.txt"))
        self.assertEqual(p.format, "pipedream")
        self.assertFalse(np.any(np.isnan(p.time)))  # measured per-layer times
        with self.assertRaisesRegex(gopt.Error, "nosuch"):
            gopt.load_graph("zoo:nosuch")

    def test_bad_files(self):
        with self.assertRaises(gopt.Error) as cm:
            gopt.load_graph("/no/such/model.onnx")
        self.assertIsInstance(cm.exception, RuntimeError)
        self.assertIn("/no/such/model.onnx", str(cm.exception))
        with tempfile.TemporaryDirectory() as d:
            bad = os.path.join(d, "bad.json")
            with open(bad, "w") as f:
                f.write('{"format": "go-graph", "ops": [{"id": 0, "kind": "nosuchkind"}]}')
            with self.assertRaisesRegex(gopt.Error, "bad.json"):
                gopt.load_graph(bad)
            empty = os.path.join(d, "empty.onnx")
            open(empty, "w").close()
            with self.assertRaisesRegex(gopt.Error, "empty file"):
                gopt.load_graph(empty)
            # the part before the NUL names another file, which must not be read
            with self.assertRaisesRegex(gopt.Error, "a file name cannot hold a NUL byte"):
                gopt.load_graph(bad + "\0.onnx")
        with self.assertRaises(TypeError):
            gopt.load_graph(42)

    def assert_same_graph(self, g, h):
        for a in ("kinds", "names", "roles"):
            self.assertEqual(getattr(h, a), getattr(g, a), a)
        for a in ("flops", "output_bytes", "input_bytes", "param_bytes", "temp_bytes", "colocation", "edges",
                  "edge_bytes", "topo_order"):
            self.assertTrue(np.array_equal(getattr(h, a), getattr(g, a)), a)
        np.testing.assert_array_equal(h.time, g.time)  # NaN where none
        # so every cost, transfer and memory event is the same
        for cluster in ("v100x1", "v100x2"):
            plan = gopt.place(g, cluster, "m-etf", fusion="xla").plan
            self.assertEqual(gopt.simulate(g, cluster, plan).to_dict(), gopt.simulate(h, cluster, plan).to_dict())

    def test_from_arrays_round_trip(self):
        # one output per op: the simple form
        g = gopt.load_graph(RESNET18)
        self.assertEqual(g.num_tensors, g.num_ops)
        h = gopt.Graph.from_arrays(kinds=g.kinds, edges=g.edges, flops=g.flops, output_bytes=g.output_bytes,
                                   param_bytes=g.param_bytes, temp_bytes=g.temp_bytes, time=g.time,
                                   names=g.names, roles=g.roles, colocation=g.colocation, name="copy")
        self.assertEqual(h.name, "copy")
        self.assertFalse(h.training)
        self.assert_same_graph(g, h)
        # ops with two outputs (gradients of matmuls) and measured times: the tensor form
        for t in (gopt.load_graph(RESNET18, training=True),
                  gopt.load_graph(os.path.join(DATA, "real-data", "msr-fiddle-pipedream", "gnmt", "graph.txt"))):
            self.assertGreater(t.num_tensors, t.num_ops)
            h = gopt.Graph.from_arrays(kinds=t.kinds, edges=t.edges, flops=t.flops, param_bytes=t.param_bytes,
                                       temp_bytes=t.temp_bytes, time=t.time, names=t.names, roles=t.roles,
                                       colocation=t.colocation, tensor_producer=t.tensor_producer,
                                       tensor_bytes=t.tensor_bytes, edge_tensors=t.edge_tensors, training=t.training)
            self.assertTrue(np.array_equal(h.tensor_producer, t.tensor_producer))
            self.assertTrue(np.array_equal(h.edge_tensors, t.edge_tensors))
            self.assert_same_graph(t, h)

    def test_control_edges(self):
        g = gopt.Graph.from_arrays(kinds=["input", "matmul", "matmul"], edges=[[0, 1], [0, 2], [1, 2]],
                                   flops=[0, 1e9, 1e9], tensor_producer=[0, 1, 2], tensor_bytes=[1 << 20, 8, 8],
                                   edge_tensors=[0, 0, -1])
        self.assertEqual(g.edge_bytes.tolist(), [1 << 20, 1 << 20, 0])
        self.assertEqual(g.input_bytes.tolist(), [0, 1 << 20, 1 << 20])
        # op 2 waits for op 1 on the other device, though no data moves: one latency, no transfer
        r = gopt.simulate(g, "v100x2", gopt.Plan(device=[0, 0, 1]))
        self.assertEqual(r.transfers, 1)  # the input to device 1, not op 1's output
        self.assertEqual(r.transfer_bytes, 1 << 20)

    def test_from_arrays_defaults_and_times(self):
        g = gopt.Graph.from_arrays(kinds=["input", "conv"], edges=np.array([[0, 1]], dtype=np.uint8),
                                   time=[float("nan"), 2e-3])
        self.assertEqual(g.names, ["op0", "op1"])
        self.assertEqual(g.roles, ["forward", "forward"])
        self.assertTrue(math.isnan(g.time[0]))
        self.assertEqual(g.time[1], 2e-3)
        self.assertEqual(g.flops.tolist(), [0.0, 0.0])
        # the measured time is the op's cost
        self.assertAlmostEqual(gopt.simulate(g, "v100x1").step_time_ms, 2.0, places=12)

    def test_from_arrays_errors(self):
        ok = dict(kinds=["input", "relu"], edges=[[0, 1]])
        gopt.Graph.from_arrays(**ok)
        bad = [
            (dict(kinds=["input", "nosuch"], edges=[[0, 1]]), "kinds\\[1\\] is 'nosuch'"),
            (dict(kinds="input", edges=[]), "not one string"),
            (dict(kinds=["input", "relu"], edges=[[0, 2]]), "outside \\[0, 2\\)"),
            (dict(kinds=["input", "relu"], edges=[[5, 1]]), "unknown op id 5"),
            (dict(kinds=["relu", "relu"], edges=[[0, 1], [1, 0]]), "cycle"),
            (dict(kinds=["relu"], edges=[[0, 0]]), "cycle"),
            (dict(kinds=["input", "relu"], edges=[0, 1]), "shape \\[E, 2\\]"),
            (dict(kinds=["input", "relu"], edges=[[0.0, 1.0]]), "integers"),
            (dict(ok, flops=[1.0]), "flops has 1 entries for 2 ops"),
            (dict(ok, flops=[0.0, -1.0]), "negative or invalid flops"),
            (dict(ok, output_bytes=[0, -4]), "negative size"),
            # numpy's casts would truncate 1.5 to 1 and wrap 2**64-1 to -1
            (dict(ok, output_bytes=[1, 1.5]), "output_bytes\\[1\\] = 1.5 is not a whole number"),
            (dict(ok, param_bytes=[0.0, float("nan")]), "param_bytes\\[1\\] = nan is not a whole number"),
            (dict(ok, temp_bytes=np.array([0, 2**64 - 1], dtype=np.uint64)), "temp_bytes\\[1\\] = 18446744073709551615 does not fit in int64"),
            (dict(kinds=["input", "relu"], edges=np.array([[2**64 - 1, 1]], dtype=np.uint64)), "edges\\[0\\] = 18446744073709551615 does not fit"),
            (dict(ok, roles=["forward", "sideways"]), "roles\\[1\\]"),
            (dict(ok, time=[0.0, float("inf")]), "time\\[1\\] = inf is not a finite number"),
            (dict(ok, param_bytes=[True, False]), "param_bytes must hold numbers, got dtype bool"),
            (dict(ok, names=["a", "b\udc80"]), "names\\[1\\] cannot be written as UTF-8 \\(it holds a lone surrogate\\)"),
            # sums of byte counts must fit int64: a graph's total is bounded
            (dict(ok, param_bytes=[4 * 10**18, 4 * 10**18]), "param_bytes 4000000000000000000, more than"),
            (dict(ok, param_bytes=[2**50, 0], temp_bytes=[2**50, 2**50], output_bytes=[2**50, 2**50]), None),
            (dict(ok, names=["a"]), "names has 1 entries"),
            (dict(ok, tensor_producer=[0, 1]), "together"),
            (dict(ok, output_bytes=[1, 1], tensor_producer=[0, 1], tensor_bytes=[1, 1], edge_tensors=[0]), "not both"),
            (dict(ok, tensor_producer=[0, 2], tensor_bytes=[1, 1], edge_tensors=[0]), "tensor_producer\\[1\\] is 2"),
            (dict(ok, tensor_producer=[0, 1], tensor_bytes=[1], edge_tensors=[0]), "tensor_bytes has 1 entries"),
            (dict(ok, tensor_producer=[0, 1], tensor_bytes=[1, 1], edge_tensors=[0, 0]), "edge_tensors has 2 entries"),
            (dict(ok, tensor_producer=[0, 1], tensor_bytes=[1, 1], edge_tensors=[1]), "an output of op 1, not of op 0"),
            (dict(ok, tensor_producer=[0, 1], tensor_bytes=[1, 1], edge_tensors=[7]), "edge_tensors\\[0\\] is 7"),
        ]
        for kwargs, message in bad:
            with self.subTest(kwargs=kwargs):
                if message is None:  # at the limits: taken
                    gopt.Graph.from_arrays(**kwargs)
                    continue
                with self.assertRaisesRegex(gopt.Error, message):
                    gopt.Graph.from_arrays(**kwargs)

    def test_from_arrays_whole_floats(self):
        # byte counts computed in float64 are taken where whole
        g = gopt.Graph.from_arrays(kinds=["input", "relu"], edges=[[0, 1]], output_bytes=np.array([8.0, 4e9]))
        self.assertEqual(g.output_bytes.tolist(), [8, 4000000000])

    def test_empty_graph(self):
        g = gopt.Graph.from_arrays(kinds=[], edges=np.zeros((0, 2), dtype=np.int64))
        self.assertEqual((g.num_ops, g.num_edges), (0, 0))
        self.assertEqual(g.edges.shape, (0, 2))
        self.assertEqual(g.names, [])
        r = gopt.simulate(g, "v100x2")
        self.assertTrue(r.valid)
        self.assertEqual(r.step_time_ms, 0.0)
        self.assertEqual(r.busy_time_ms.tolist(), [0.0, 0.0])
        self.assertEqual(len(gopt.place(g, "v100x2", "human").plan), 0)

    def test_json_round_trip(self):
        g = gopt.load_graph(EXAMPLE)
        h = gopt.Graph.from_json(g.to_json())
        self.assertEqual(h.names, g.names)
        self.assertTrue(np.array_equal(h.edges, g.edges))
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "g.json")
            g.save(path)
            self.assertEqual(gopt.load_graph(path).to_json(), g.to_json())
        with self.assertRaisesRegex(gopt.Error, "from_json"):
            gopt.Graph.from_json("{not json")


class Clusters(unittest.TestCase):
    def test_presets(self):
        c = gopt.cluster("v100x8")
        self.assertEqual((c.name, c.num_devices, len(c)), ("v100x8", 8, 8))
        self.assertEqual(c.device_types, ["v100"] * 8)
        self.assertEqual(c.bandwidth.shape, (8, 8))
        # DGX-1 cube-mesh: NVLink 0-1 (25 GB/s), PCIe 0-5 (10 GB/s)
        self.assertEqual(c.bandwidth[0, 1], 25e9)
        self.assertEqual(c.bandwidth[0, 5], 10e9)
        self.assertEqual(c.memory_bytes.tolist(), [16 << 30] * 8)
        self.assertIn("v100x4", gopt.cluster_presets())
        self.assertEqual(gopt.cluster("h100x2").peak_flops.tolist(), [67e12] * 2)  # H100 SXM

    def test_files_and_json(self):
        c = gopt.cluster(os.path.join(TEST_DATA, "sim", "pairs.json"))
        self.assertEqual(c.channels, "shared")
        self.assertEqual(c.num_devices, 4)
        d = gopt.Cluster.from_json(c.to_json())
        self.assertEqual(d.to_json(), c.to_json())
        self.assertTrue(np.array_equal(d.latency, c.latency))

    def test_errors(self):
        with self.assertRaisesRegex(gopt.Error, "unknown cluster preset 'v100x'"):
            gopt.cluster("v100x")
        bad = os.path.join(TEST_DATA, "sim", "bad_cluster.json")
        with self.assertRaisesRegex(gopt.Error, "bad_cluster.json: link 0 -> 1 has invalid bandwidth -1"):
            gopt.cluster(bad)
        with self.assertRaisesRegex(gopt.Error, "cannot open"):
            gopt.cluster("/no/such/cluster.json")
        with self.assertRaisesRegex(gopt.Error, "cluster must be"):
            gopt.simulate(chain(), 4)


class Plans(unittest.TestCase):
    def test_arrays(self):
        p = gopt.Plan(device=[0, 1, 1], priority=[3, 2, 1], fusion=[-1, 1, 1])
        self.assertEqual(p.device.dtype, np.int32)
        self.assertEqual(p.priority.dtype, np.float32)
        self.assertEqual(p.fusion.dtype, np.int32)
        self.assertEqual(len(p), 3)
        with self.assertRaises(ValueError):  # read-only: a write would not change the plan
            p.device[0] = 1
        p.device = np.array([1, 1, 1], dtype=np.int64)
        self.assertEqual(p.device.tolist(), [1, 1, 1])
        p.priority = None
        self.assertEqual(p.priority.size, 0)
        self.assertEqual(gopt.Plan.single_device(3, 1), gopt.Plan(device=[1, 1, 1]))
        self.assertNotEqual(gopt.Plan(device=[0]), gopt.Plan(device=[1]))
        self.assertEqual(len(gopt.Plan()), 0)

    def test_errors(self):
        with self.assertRaisesRegex(gopt.Error, "device must hold integers"):
            gopt.Plan(device=[0.5, 1.0])
        with self.assertRaisesRegex(gopt.Error, "device\\[0\\] = 18446744073709551615 does not fit in int64"):
            gopt.Plan(device=np.array([2**64 - 1], dtype=np.uint64))
        with self.assertRaisesRegex(gopt.Error, "one-dimensional"):
            gopt.Plan(device=[[0, 1]])
        with self.assertRaisesRegex(gopt.Error, "does not fit in int32"):
            gopt.Plan(fusion=[1 << 40])
        with self.assertRaisesRegex(gopt.Error, "priority must hold numbers"):
            gopt.Plan(priority=["high"])
        # a plan that could not be written (NaN is no JSON number) or would turn into inf
        with self.assertRaisesRegex(gopt.Error, "priority\\[1\\] = nan is not a finite number"):
            gopt.Plan(priority=[0.0, float("nan")])
        with self.assertRaisesRegex(gopt.Error, "priority\\[0\\] = 1e\\+300 is outside the range of float32"):
            gopt.Plan(priority=[1e300])
        # bool is no device index
        with self.assertRaisesRegex(gopt.Error, "device must hold integers, got dtype bool"):
            gopt.Plan(device=np.array([True, False]))
        p = gopt.Plan(priority=[3.4e38, -1.5])
        self.assertEqual(p.priority.tolist(), [np.float32(3.4e38), -1.5])

    def test_json_and_files(self):
        g = chain()
        p = gopt.Plan(device=[0, 1, 1], priority=[0.5, 0.25, 0.125], fusion=[-1, 1, 1])
        text = p.to_json(g)
        self.assertEqual(json.loads(text)["format"], "go-plan")
        self.assertEqual(gopt.Plan.from_json(text, g), p)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "p.json")
            p.save(path, g)
            self.assertEqual(gopt.Plan.load(path, g), p)
        with self.assertRaisesRegex(gopt.Error, "the plan is for 3 ops but the graph has 5"):
            gopt.Plan.from_json(text, chain(5))
        with self.assertRaisesRegex(gopt.Error, "plan has 2 device entries for a graph of 3 ops"):
            gopt.Plan(device=[0, 1]).to_json(g)
        self.assertEqual(p.check(g, gopt.cluster("v100x2")), "")
        self.assertIn("cluster has 1 device", p.check(g, gopt.cluster("v100x1")))

    def test_expert_split(self):
        root = os.path.join(DATA, "real-data", "msr-fiddle-dnn-partitioning")
        g = gopt.load_graph(os.path.join(root, "throughput-inputs", "LayerGraphs", "gnmt_training.json"))
        p = gopt.Plan.load(os.path.join(root, "human-experts", "gnmt_training_expert.json"), g)
        self.assertEqual(len(p), g.num_ops)
        self.assertEqual(gopt.place(g, "v100x6", "human").plan.device.tolist(), p.device.tolist())

    def test_expert_plan_is_the_anchors_human(self):
        # a plan file given as expert is human's placement for GO's anchor too, as for annealing's start
        g = gopt.load_graph("zoo:gnmt2:seq=4", training=True)
        mine = gopt.Plan(device=np.ones(g.num_ops, dtype=np.int32))
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "mine.json")
            mine.save(path, g)
            bh = gopt.place(g, "v100x2", "best-heuristic", expert=path, anchor_placements="human")
            self.assertTrue(bh.valid)
            self.assertTrue((bh.plan.device == 1).all())
            rule = gopt.place(g, "v100x2", "best-heuristic", anchor_placements="human")
            self.assertFalse((rule.plan.device == 1).all())
            with self.assertRaisesRegex(gopt.Error, "cannot open"):
                gopt.place(g, "v100x2", "go-zero-shot", expert=path + ".missing")


class Simulate(unittest.TestCase):
    def test_default_plan(self):
        g = gopt.load_graph(RESNET18, training=True)
        a = gopt.simulate(g, "v100x2")
        b = gopt.simulate(g, gopt.cluster("v100x2"), gopt.Plan.single_device(g.num_ops))
        self.assertEqual(a.to_dict(), b.to_dict())
        self.assertTrue(a.valid)
        self.assertEqual(a.status, "ok")
        self.assertEqual(a.reason, "")
        self.assertIsNone(a.trace)
        self.assertEqual(a.busy_time_ms[1], 0.0)
        self.assertAlmostEqual(a.busy_time_ms[0], a.step_time_ms, places=9)  # one device, no transfers
        self.assertEqual(a.transfers, 0)
        self.assertEqual(a.peak_memory_bytes.dtype, np.int64)

    def test_cost_source(self):
        # a PipeDream profile has measured times: roofline ignores them; a graph without times is
        # costed by the roofline either way
        p = gopt.load_graph(os.path.join(DATA, "real-data", "msr-fiddle-pipedream", "alexnet", "graph.txt"), training=True)
        measured = gopt.simulate(p, "v100x2")
        roof = gopt.simulate(p, "v100x2", cost="roofline")
        self.assertEqual(gopt.simulate(p, "v100x2", cost="measured").step_time_ms, measured.step_time_ms)
        self.assertNotAlmostEqual(roof.step_time_ms, measured.step_time_ms, places=3)
        g = chain(4)
        self.assertEqual(gopt.simulate(g, "v100x2", cost="roofline").step_time_ms, gopt.simulate(g, "v100x2").step_time_ms)
        r = gopt.place(p, "v100x2", "human", cost="roofline")
        self.assertEqual(r.step_time_ms, gopt.simulate(p, "v100x2", r.plan, cost="roofline").step_time_ms)
        with self.assertRaisesRegex(gopt.Error, "unknown cost source 'flops'"):
            gopt.simulate(p, "v100x2", cost="flops")

    def test_lower_bound(self):
        # chain(): three ops in sequence, so the longest path is every op's time; one device runs
        # the unfused default plan at exactly the unfused bound
        g = chain()
        b = gopt.lower_bound(g, "v100x2")
        one = gopt.simulate(g, "v100x1")
        self.assertAlmostEqual(b["unfused_path"], one.step_time_ms, places=9)
        self.assertAlmostEqual(b["unfused_work"], one.step_time_ms / 2, places=9)
        self.assertEqual(b["unfused"], max(b["unfused_path"], b["unfused_work"]))
        self.assertLessEqual(b["any_plan"], b["valid_plan"])
        self.assertLessEqual(b["valid_plan"], b["unfused"])
        self.assertEqual(b["valid_plan"], max(b["valid_plan_path"], b["valid_plan_work"]))
        self.assertEqual(b["valid_plan"], max(b["valid_plan_compute"], b["valid_plan_traffic"]))
        for m in ("human", "m-etf"):
            self.assertGreaterEqual(gopt.place(g, "v100x2", m, fusion="xla").step_time_ms, b["valid_plan"])
        with self.assertRaisesRegex(gopt.Error, "unknown cost source"):
            gopt.lower_bound(g, "v100x2", cost="flops")

    def test_two_devices_move_bytes(self):
        g = chain(4)
        r = gopt.simulate(g, "v100x2", gopt.Plan(device=[0, 0, 1, 1]))
        self.assertEqual(r.transfers, 1)
        self.assertEqual(r.transfer_bytes, 4 << 20)
        self.assertGreater(r.busy_time_ms[1], 0)
        # the step is the two devices' work plus one transfer of 4 MiB over NVLink (25 GB/s, 20 us)
        self.assertAlmostEqual(r.step_time_ms, r.busy_time_ms.sum() + 0.02 + (4 << 20) / 25e9 * 1e3, places=6)

    def test_invalid_plans_are_results(self):
        g = chain()
        r = gopt.simulate(g, "v100x2", gopt.Plan(device=[0, 2, 0]))
        self.assertFalse(r.valid)
        self.assertEqual(r.status, "bad_device")
        self.assertIn("is placed on device 2 but the cluster has 2 device(s)", r.reason)
        self.assertEqual(r.step_time_ms, math.inf)
        huge = gopt.Graph.from_arrays(kinds=["input", "matmul"], edges=[[0, 1]], param_bytes=[0, 20 << 30])
        r = gopt.simulate(huge, "v100x1")
        self.assertFalse(r.valid)
        self.assertEqual(r.status, "out_of_memory")
        self.assertIn("out of memory on device 0", r.reason)
        self.assertTrue(gopt.simulate(huge, "a100x1").valid)  # 40 GB fits

    def test_place_fit_memory(self):
        # three matmuls of 6 GiB of parameters: 18 GiB on device 0 of four V100s of 16 GiB
        g = gopt.Graph.from_arrays(kinds=["input", "matmul", "matmul", "matmul"], edges=[[0, 1], [1, 2], [2, 3]],
                                   param_bytes=[0, 6 << 30, 6 << 30, 6 << 30])
        plain = gopt.place(g, "v100x4", "default")
        self.assertEqual(plain.status, "out_of_memory")
        r = gopt.place(g, "v100x4", "default", fit_memory=True)
        self.assertTrue(r.valid)
        self.assertIn("fitted to memory: 1 op set(s) moved", r.note)
        self.assertTrue((r.peak_memory_bytes <= 16 << 30).all())
        self.assertEqual(len(set(r.plan.device.tolist())), 2)  # one op set moved to one other device
        self.assertAlmostEqual(gopt.simulate(g, "v100x4", r.plan).step_time_ms, r.step_time_ms, places=9)

    def test_unused_arguments_warn(self):
        # an argument the method does not read: a UserWarning naming the methods that do, the run goes on
        g = chain()
        with self.assertWarnsRegex(UserWarning, r"gopt.place: policy is not used by human \(it is read by go, "
                                                r"go-zero-shot, go-one\); ignored"):
            r = gopt.place(g, "v100x2", "human", policy="x.ckpt")
        self.assertTrue(r.valid)
        with self.assertWarnsRegex(UserWarning, "fusion is not used by anneal"):
            gopt.place(g, "v100x2", "anneal", fusion="xla", budget=5)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # none for arguments the method reads, or left at their defaults
            gopt.place(g, "v100x2", "anneal", budget=5, time_limit=10.0)
            gopt.place(g, "v100x2", "human", fusion="xla")
            with self.assertRaisesRegex(UserWarning, "budget is not used by human"):
                gopt.place(g, "v100x2", "human", budget=5)  # warnings as errors: raised
            with self.assertRaisesRegex(UserWarning, r"patience is not used by human \(it is read by go, go-one, "
                                                     r"anchor-search\)"):
                gopt.place(g, "v100x2", "human", patience=2)

    def test_place_patience(self):
        # anchor-search stops after `patience` rounds in a row without a faster plan, as gopt place
        # --patience: the same plan as the search cut at that round without it; a negative count refused
        g = gopt.load_graph("zoo:rnnlm2:seq=4").training_graph()
        p = gopt.place(g, "v100x2", "anchor-search", finetune=30, patience=2)
        self.assertIn("(stopped: 2 updates in a row found no faster plan)", p.note)
        rounds = int(p.note.split("searched ")[1].split()[0])
        self.assertLess(rounds, 30)
        cut = gopt.place(g, "v100x2", "anchor-search", finetune=rounds)
        self.assertEqual(cut.step_time_ms, p.step_time_ms)
        self.assertEqual(cut.simulations, p.simulations)
        with self.assertRaisesRegex(gopt.Error, "patience"):
            gopt.place(g, "v100x2", "anchor-search", patience=-1)

    def test_place_on_update(self):
        # anchor-search calls on_update after each round with its count and the best plan so far; the
        # other methods never call it; an exception it raises ends the call and comes back; a value
        # that is not callable is refused
        g = gopt.load_graph("zoo:rnnlm2:seq=4").training_graph()
        seen = []
        r = gopt.place(g, "v100x2", "anchor-search", finetune=3, on_update=seen.append)
        self.assertEqual([d["update"] for d in seen], [1, 2, 3])
        self.assertEqual({d["updates"] for d in seen}, {3})
        best = [d["best_step_time_ms"] for d in seen]
        self.assertEqual(best, sorted(best, reverse=True))
        self.assertLessEqual(r.step_time_ms, best[-1])
        self.assertTrue(all(d["time_limit"] == 0 for d in seen))
        self.assertLessEqual(seen[-1]["seconds"], r.optimize_seconds)
        seen.clear()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            gopt.place(g, "v100x2", "human", on_update=seen.append)
        self.assertEqual(seen, [])
        self.assertIn("on_update is not used by human", str(w[0].message))

        class Stop(Exception):
            pass

        def stop(d):
            if d["update"] == 2:
                raise Stop("enough")
        with self.assertRaisesRegex(Stop, "enough"):
            gopt.place(g, "v100x2", "anchor-search", finetune=5, on_update=stop)
        with self.assertRaisesRegex(gopt.Error, "on_update takes a callable"):
            gopt.place(g, "v100x2", "anchor-search", finetune=1, on_update=3)

    def test_fit_memory(self):
        # the same graph: any plan fitted as place(..., fit_memory=True) fits a method's, priorities kept
        g = gopt.Graph.from_arrays(kinds=["input", "matmul", "matmul", "matmul"], edges=[[0, 1], [1, 2], [2, 3]],
                                   param_bytes=[0, 6 << 30, 6 << 30, 6 << 30])
        mine = gopt.Plan(device=[0, 0, 0, 0], priority=[3.0, 2.0, 1.0, 0.0])
        r = gopt.fit_memory(g, "v100x4", mine)
        self.assertEqual(r.method, "fit-memory")
        self.assertTrue(r.valid)
        self.assertIn("fitted to memory: 1 op set(s) moved", r.note)
        self.assertEqual(r.plan.priority.tolist(), [3.0, 2.0, 1.0, 0.0])
        self.assertEqual(r.plan.device.tolist(), gopt.place(g, "v100x4", "default", fit_memory=True).plan.device.tolist())
        self.assertEqual(r.simulations, gopt.place(g, "v100x4", "default", fit_memory=True).simulations)
        self.assertAlmostEqual(gopt.simulate(g, "v100x4", r.plan).step_time_ms, r.step_time_ms, places=9)
        self.assertEqual(gopt.fit_memory(g, "v100x4").plan.device.tolist(), r.plan.device.tolist())  # None: device 0
        # a plan that fits, and one device (nothing to move to), come back as they are
        fits = gopt.fit_memory(g, "v100x4", r.plan)
        self.assertEqual((fits.plan, fits.note, fits.simulations), (r.plan, "", 0))
        one = gopt.fit_memory(g, "v100x1", gopt.Plan.single_device(4))
        self.assertEqual((one.valid, one.status, one.note), (False, "out_of_memory", ""))
        # a device the cluster lacks: no move mends it, and the note says why nothing was fitted
        bad = gopt.fit_memory(g, "v100x4", gopt.Plan(device=[0, 0, 0, 7]))
        self.assertFalse(bad.valid)
        self.assertIn("device 7", bad.reason)
        self.assertIn("not fitted to memory: the plan is invalid for another reason (", bad.note)
        self.assertEqual(bad.simulations, 0)
        with self.assertRaisesRegex(gopt.Error, "plan has 2 device entries for a graph of 4 ops"):
            gopt.fit_memory(g, "v100x4", gopt.Plan(device=[0, 1]))

    def test_wrong_plan_length_raises(self):
        g = chain()
        with self.assertRaisesRegex(gopt.Error, "plan has 2 device entries for a graph of 3 ops"):
            gopt.simulate(g, "v100x2", gopt.Plan(device=[0, 1]))
        with self.assertRaisesRegex(gopt.Error, "plan has 1 fusion entries"):
            gopt.simulate(g, "v100x2", gopt.Plan(fusion=[0]))
        with self.assertRaisesRegex(gopt.Error, "plan must be a gopt.Plan"):
            gopt.simulate(g, "v100x2", [0, 1, 0])

    def test_trace(self):
        g = chain()
        r = gopt.simulate(g, "v100x2", gopt.Plan(device=[0, 0, 1]), trace=True)
        t = json.loads(r.trace)
        names = {e.get("name") for e in t["traceEvents"]}
        self.assertIn("op1", names)
        self.assertIn("op2", names)
        self.assertIn("memory gpu1", {e.get("name") for e in t["traceEvents"] if e.get("ph") == "C"} | names)
        self.assertIsNone(gopt.simulate(g, "v100x2", gopt.Plan(device=[0, 0, 1])).trace)

    def test_trace_index(self):
        # a unit's "index" is its op's place in the graph (and the plan's arrays); a transfer's
        # "producer" is its tensor's producer's
        g = gopt.load_graph(RESNET18, training=True)
        p = gopt.place(g, "v100x2", "human").plan
        events = json.loads(gopt.simulate(g, "v100x2", p, trace=True).trace)["traceEvents"]
        units = [e for e in events if e.get("ph") == "X" and e["pid"] == 0]
        transfers = [e for e in events if e.get("ph") == "X" and e["pid"] == 1]
        self.assertGreater(len(units), 0)
        self.assertGreater(len(transfers), 0)
        for e in units:
            self.assertEqual(g.names[e["args"]["index"]], e["name"].split(" +")[0])
            self.assertEqual(p.device[e["args"]["index"]], e["tid"])
        for e in transfers:
            self.assertEqual(g.names[e["args"]["producer"]], e["name"].rsplit(":", 1)[0])

    def test_critical_path(self):
        # go/sim/critical_path.hpp through simulate(..., critical_path=True); tests/test_sim.cpp
        # checks hand-timed steps in C++
        c = gopt.cluster("v100x2")
        self.assertIsNone(gopt.simulate(chain(), c).critical_path)
        # a chain on one device: every unit on the path, each held by its input
        g = chain(5)
        r = gopt.simulate(g, c, gopt.Plan(device=[0] * 5), critical_path=True)
        cp = r.critical_path
        self.assertEqual(list(cp["units"]), [4, 3, 2, 1])  # the input takes no time: not listed
        self.assertEqual(cp["link"], ["data", "data", "data", "data"])
        self.assertAlmostEqual(cp["compute_ms"], r.step_time_ms, places=9)
        self.assertAlmostEqual(cp["end_ms"], r.step_time_ms, places=9)
        # the same chain cut over two devices: one hand-off, its transfer on the path
        r = gopt.simulate(g, c, gopt.Plan(device=[0, 0, 0, 1, 1]), critical_path=True)
        cp = r.critical_path
        self.assertEqual(cp["link"], ["data", "transfer", "data", "data"])
        self.assertGreater(cp["transfers_ms"], 0)
        self.assertAlmostEqual(cp["compute_ms"] + cp["transfers_ms"] + cp["link_wait_ms"] + cp["gaps_ms"],
                               r.step_time_ms, places=9)
        self.assertEqual(len(cp["compute_by_device_ms"]), 2)
        self.assertEqual(set(cp["compute_by_kind_ms"]), {"matmul", "relu"})
        # through an op of no time (a view): its transfer is found
        v = gopt.Graph.from_arrays(kinds=["input", "matmul", "reshape", "relu"], edges=[[0, 1], [1, 2], [2, 3]],
                                   flops=[0, 2e9, 0, 1e6], output_bytes=[4 << 20] * 4)
        cp = gopt.simulate(v, c, gopt.Plan(device=[0, 0, 1, 1]), critical_path=True).critical_path
        self.assertEqual([v.names[i] for i in cp["units"]], ["op3", "op1"])
        self.assertGreater(cp["transfers_ms"], 0)
        # two independent matmuls on one device: the second waits for the first (device order)
        h = gopt.Graph.from_arrays(kinds=["input", "matmul", "matmul"], edges=[[0, 1], [0, 2]],
                                   flops=[0, 2e9, 2e9], output_bytes=[4 << 20] * 3)
        r = gopt.simulate(h, c, gopt.Plan(device=[0, 0, 0]), critical_path=True)
        self.assertEqual(r.critical_path["link"], ["device", "data"])
        self.assertAlmostEqual(r.critical_path["compute_ms"], r.step_time_ms, places=9)
        # on real graphs the parts add up to the step time, and no unit starts before what let it
        for graph in (RESNET18, "zoo:inception_v3:batch=8"):
            g = gopt.load_graph(graph, training=True)
            for method in ("human", "metis", "best-heuristic"):
                r = gopt.simulate(g, c, gopt.place(g, c, method).plan, critical_path=True)
                cp = r.critical_path
                self.assertAlmostEqual(cp["compute_ms"] + cp["transfers_ms"] + cp["link_wait_ms"] + cp["gaps_ms"],
                                       r.step_time_ms, places=6, msg=method)
                self.assertTrue(np.all(cp["start_ms"] >= cp["ready_ms"] - 1e-9), msg=(graph, method))
                self.assertTrue(np.all(cp["finish_ms"][1:] <= cp["start_ms"][:-1] + 1e-9), msg=(graph, method))
                self.assertAlmostEqual(sum(cp["compute_by_device_ms"]), cp["compute_ms"], places=6)

    def test_colocation_option(self):
        g = gopt.Graph.from_arrays(kinds=["input", "relu", "relu"], edges=[[0, 1], [1, 2]], colocation=[-1, 7, 7])
        p = gopt.Plan(device=[0, 0, 1])
        self.assertEqual(gopt.simulate(g, "v100x2", p).status, "colocation_split")
        self.assertTrue(gopt.simulate(g, "v100x2", p, check_colocation=False).valid)

    def test_fusion_rules_option(self):
        # two library kernels (matmuls) never share a kernel (go/graph/fusion_rules.hpp)
        g = gopt.Graph.from_arrays(kinds=["input", "matmul", "matmul"], edges=[[0, 1], [1, 2]], flops=[0, 1e9, 1e9],
                                   output_bytes=[4 << 20] * 3)
        p = gopt.Plan(device=[0, 0, 0], fusion=[-1, 1, 1])
        r = gopt.simulate(g, "v100x1", p)
        self.assertFalse(r.valid)
        self.assertEqual(r.status, "fusion_illegal")
        self.assertTrue(gopt.simulate(g, "v100x1", p, check_fusion_rules=False).valid)
        self.assertNotEqual(p.check(g, gopt.cluster("v100x1")), "")
        self.assertEqual(p.check(g, gopt.cluster("v100x1"), check_fusion_rules=False), "")

    def test_threads_share_a_graph(self):
        g = gopt.load_graph(RESNET18, training=True)
        plans = [gopt.place(g, "v100x2", m).plan for m in ("default", "human", "m-etf")]
        want = [gopt.simulate(g, "v100x2", p).to_dict() for p in plans]
        got, errors = {}, []

        def run(k):
            try:
                for i in range(20):
                    got[(k, i)] = gopt.simulate(g, "v100x2", plans[(k + i) % 3]).to_dict()
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)

        threads = [threading.Thread(target=run, args=(k,)) for k in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        for (k, i), d in got.items():
            self.assertEqual(d, want[(k + i) % 3])


class Place(unittest.TestCase):
    ALL = ["default", "human", "pipeline", "metis", "heft", "m-topo", "m-etf", "m-sct", "random", "anneal", "go",
           "go-zero-shot", "go-one", "best-heuristic", "anneal-anchor", "anchor-search", "hdp", "hdp-tuned", "exact"]

    def test_registry(self):
        self.assertEqual(sorted(gopt.methods()), sorted(self.ALL))
        self.assertEqual(set(gopt.describe_methods()), set(self.ALL))
        self.assertTrue(os.path.isfile(gopt.default_policy()))

    def test_every_method(self):
        g = gopt.load_graph(RESNET18, training=True)
        c = gopt.cluster("v100x2")
        for m in gopt.methods():
            with self.subTest(method=m):
                # exact: a MILP that would run its default 60 s here without a time limit
                try:
                    with warnings.catch_warnings():  # the same arguments for every method: unread ones warn
                        warnings.simplefilter("ignore", UserWarning)
                        r = gopt.place(g, c, m, budget=32, finetune=1, time_limit=2.0 if m == "exact" else 0.0)
                except RuntimeError as e:
                    if m == "exact" and "coinor-libcbc-dev" in str(e):
                        continue  # built without CBC (test_exact says so)
                    raise
                self.assertEqual(r.method, m)
                self.assertTrue(r.valid, r.reason)
                self.assertEqual(len(r.plan), g.num_ops)
                self.assertEqual(r.plan.check(g, c), "")
                self.assertEqual(gopt.simulate(g, c, r.plan).step_time_ms, r.step_time_ms)
                self.assertEqual(r.peak_memory_bytes.shape, (2,))
        self.assertIn("anchor", gopt.place(g, c, "go-zero-shot").note)

    def test_exact(self):
        g = gopt.load_graph(EXAMPLE)
        try:
            r = gopt.place(g, "v100x2", "exact")
        except RuntimeError as e:
            self.assertIn("apt-get install coinor-libcbc-dev", str(e))
            self.skipTest("built without CBC")
        self.assertTrue(r.valid, r.reason)
        self.assertIn("lower bound", r.note)
        self.assertEqual(gopt.simulate(g, "v100x2", r.plan).step_time_ms, r.step_time_ms)

    def test_seeds(self):
        g = gopt.load_graph(RESNET18, training=True)
        a = gopt.place(g, "v100x2", "anneal", seed=5, budget=40)
        b = gopt.place(g, "v100x2", "anneal", seed=5, budget=40)
        self.assertEqual(a.plan, b.plan)
        self.assertEqual(a.step_time_ms, b.step_time_ms)
        self.assertEqual(a.simulations, 40)

    def test_fusion_option(self):
        g = gopt.load_graph(RESNET18)
        r = gopt.place(g, "v100x1", "default", fusion="xla")
        self.assertEqual(len(r.plan.fusion), g.num_ops)
        self.assertLess(r.step_time_ms, gopt.place(g, "v100x1", "default").step_time_ms)

    def test_errors(self):
        g = chain()
        with self.assertRaisesRegex(gopt.Error, "unknown method 'nosuch' \\(known: default, human"):
            gopt.place(g, "v100x2", "nosuch")
        with self.assertRaisesRegex(gopt.Error, "fusion"):
            gopt.place(g, "v100x2", "default", fusion="all")
        with self.assertRaisesRegex(gopt.Error, "policy file '/no/policy.ckpt' not found"):
            gopt.place(g, "v100x2", "go-zero-shot", policy="/no/policy.ckpt")
        with self.assertRaisesRegex(gopt.Error, "handles at most"):
            gopt.place(g, "v100x16", "go-zero-shot")
        # -1 is the documented default (budget / 193 updates); other negative counts are errors
        with self.assertRaisesRegex(gopt.Error, "finetune must be >= 0 updates \\(or -1: the budget / 193, the most simulations of one update\\), got -7"):
            gopt.place(g, "v100x2", "go", finetune=-7)
        with self.assertRaisesRegex(gopt.Error, "go: the budget must be at least 1 simulation, got 0"):
            gopt.place(g, "v100x2", "go", budget=0)
        # integers out of range or of the wrong type: one line naming the argument, not pybind's listing
        for kwargs, message in [
                (dict(budget=-5), "gopt.place: budget is -5; it must be 0 to 9223372036854775807"),
                (dict(budget=10**20), "gopt.place: budget is 100000000000000000000; it must be 0 to"),
                (dict(budget=2.5), "gopt.place: budget must be an integer, got 2.5 \\(float\\)"),
                (dict(budget=True), "gopt.place: budget must be an integer, got True \\(bool\\)"),
                (dict(seed=-1), "gopt.place: seed is -1; a seed is 0 to 18446744073709551615"),
                (dict(seed=2**64), "gopt.place: seed is 18446744073709551616; a seed is 0 to"),
                (dict(finetune="3"), "gopt.place: finetune must be an integer, got '3' \\(str\\)"),
                (dict(expert=gopt.Plan(device=[0, 0, 0])),
                 "expert takes the path of a go-plan file .* got Plan; write the plan first: plan.save\\(path, graph\\)")]:
            with self.subTest(kwargs=kwargs):
                with self.assertRaisesRegex(gopt.Error, message):
                    gopt.place(g, "v100x2", "random", **kwargs)
        # numpy integers are integers; the largest seed is a seed
        self.assertEqual(gopt.place(g, "v100x2", "random", seed=np.uint64(2**64 - 1), budget=np.int32(3)).valid, True)
        with self.assertWarnsRegex(UserWarning, "budget is not used by go-zero-shot"):  # zero-shot takes no budget
            self.assertTrue(gopt.place(g, "v100x2", "go-zero-shot", budget=0).valid)


class Train(unittest.TestCase):
    def test_callback_and_result(self):
        seen = []
        res = gopt.train(EXAMPLE, "v100x2", TINY_CONFIG, callback=seen.append)
        self.assertEqual(res.updates_done, 2)
        self.assertEqual([s["update"] for s in seen], [1, 2])
        self.assertEqual(seen, res.history)
        self.assertEqual(seen[0]["samples"], 4)
        for key in ("lr", "mean_reward", "best_step_time_ms", "entropy", "approx_kl", "grad_norm"):
            self.assertIn(key, seen[0])
        (task,) = res.tasks
        self.assertEqual(task.cluster, "v100x2")
        self.assertEqual(task.samples, 8)
        self.assertIsNotNone(task.best_plan)
        self.assertEqual(task.best_step_time_ms, seen[-1]["best_step_time_ms"])
        self.assertEqual(gopt.simulate(task.graph, "v100x2", task.best_plan).step_time_ms, task.best_step_time_ms)

    def test_stop_and_raise(self):
        res = gopt.train(EXAMPLE, "v100x2", TINY_CONFIG, callback=lambda s: False)
        self.assertEqual(res.updates_done, 1)
        with tempfile.TemporaryDirectory() as d:
            ckpt = os.path.join(d, "run.ckpt")

            def boom(stats):
                raise ValueError("stop at update %d" % stats["update"])

            with self.assertRaisesRegex(ValueError, "stop at update 1"):
                gopt.train(EXAMPLE, "v100x2", TINY_CONFIG, callback=boom, checkpoint=ckpt)
            self.assertTrue(os.path.isfile(ckpt))  # written on the way out

    def test_resume_is_exact(self):
        with tempfile.TemporaryDirectory() as d:
            whole = gopt.train(EXAMPLE, "v100x2", TINY_CONFIG, updates=3, checkpoint=os.path.join(d, "a.ckpt"))
            part = os.path.join(d, "b.ckpt")
            first = gopt.train(EXAMPLE, "v100x2", TINY_CONFIG, updates=3, checkpoint=part,
                               callback=lambda s: s["update"] < 2)
            self.assertEqual(first.updates_done, 2)
            rest = gopt.train(EXAMPLE, "v100x2", checkpoint=part, resume=True)
            self.assertEqual(rest.updates_done, 3)
            self.assertEqual([s["update"] for s in rest.history], [3])
            drop = ("seconds", "samples_per_second", "sample_seconds", "simulate_seconds", "train_seconds")
            strip = lambda s: {k: v for k, v in s.items() if k not in drop}
            self.assertEqual(strip(rest.history[0]), strip(whole.history[2]))
            self.assertEqual(rest.tasks[0].best_plan, whole.tasks[0].best_plan)
            with self.assertRaisesRegex(gopt.Error, "pass config=None"):
                gopt.train(EXAMPLE, "v100x2", TINY_CONFIG, checkpoint=part, resume=True)

    def test_config_file_graphs_and_clusters(self):
        with tempfile.TemporaryDirectory() as d:
            cfg = os.path.join(d, "cfg.json")
            with open(cfg, "w") as f:
                json.dump(TINY_CONFIG, f)
            g = gopt.load_graph(EXAMPLE)
            res = gopt.train([g, "zoo:rnnlm2:seq=2:batch=4:hidden=64:vocab=100"], ["v100x2", gopt.cluster("v100x1")],
                             cfg, updates=1, training=True)
            self.assertEqual([t.cluster for t in res.tasks], ["v100x2", "v100x1"] * 2)
            self.assertTrue(all(t.graph.training for t in res.tasks))

    def test_errors(self):
        with self.assertRaisesRegex(gopt.Error, "\"samples\" is 1"):
            gopt.train(EXAMPLE, "v100x2", dict(TINY_CONFIG, samples=1))
        with self.assertRaisesRegex(gopt.Error, "nosuchkey"):
            gopt.train(EXAMPLE, "v100x2", dict(TINY_CONFIG, nosuchkey=1))
        with self.assertRaisesRegex(gopt.Error, "config: the dict cannot be written as JSON"):
            gopt.train(EXAMPLE, "v100x2", dict(TINY_CONFIG, lr=float("nan")))
        with self.assertRaisesRegex(gopt.Error, "cannot open"):
            gopt.train(EXAMPLE, "v100x2", "/no/config.json")
        with self.assertRaisesRegex(gopt.Error, "config must be"):
            gopt.train(EXAMPLE, "v100x2", 3)
        with self.assertRaisesRegex(gopt.Error, "callback must be callable"):
            gopt.train(EXAMPLE, "v100x2", TINY_CONFIG, callback=3)
        with self.assertRaisesRegex(gopt.Error, "init_policy file not found"):
            gopt.train(EXAMPLE, "v100x2", TINY_CONFIG, init_policy="/no/policy.ckpt")
        with self.assertRaisesRegex(gopt.Error, "resume=True needs checkpoint"):
            gopt.train(EXAMPLE, "v100x2", TINY_CONFIG, resume=True)
        with self.assertRaisesRegex(gopt.Error, "no graphs"):
            gopt.train([], "v100x2", TINY_CONFIG)
        with self.assertRaisesRegex(gopt.Error, "gopt.train: seed is -1; a seed is 0 to"):
            gopt.train(EXAMPLE, "v100x2", TINY_CONFIG, seed=-1)
        with self.assertRaisesRegex(gopt.Error, "gopt.train: updates is -2; it must be 0 to"):
            gopt.train(EXAMPLE, "v100x2", TINY_CONFIG, updates=-2)
        with self.assertRaisesRegex(gopt.Error, "gopt.train: threads must be an integer, got 1.5"):
            gopt.train(EXAMPLE, "v100x2", TINY_CONFIG, threads=1.5)

    def test_callback_must_answer_yes_or_no(self):
        # 0 or "stop" read as neither: a TypeError at the first update, as a callback that raises
        with tempfile.TemporaryDirectory() as d:
            ckpt = os.path.join(d, "run.ckpt")
            with self.assertRaisesRegex(TypeError, "callback must return None, True \\(go on\\) or False \\(stop\\), got 0 \\(int\\)"):
                gopt.train(EXAMPLE, "v100x2", TINY_CONFIG, callback=lambda s: 0, checkpoint=ckpt)
            self.assertTrue(os.path.isfile(ckpt))
        self.assertEqual(gopt.train(EXAMPLE, "v100x2", TINY_CONFIG, callback=lambda s: True).updates_done, 2)
        # numpy's bool, as a comparison of numpy values gives, answers as bool does
        self.assertEqual(gopt.train(EXAMPLE, "v100x2", TINY_CONFIG, callback=lambda s: np.bool_(False)).updates_done, 1)
        self.assertEqual(gopt.train(EXAMPLE, "v100x2", TINY_CONFIG, callback=lambda s: np.bool_(True)).updates_done, 2)


def anchor_placements(more=""):
    """The anchor's heuristic placements (METIS where the build has it), then `more`."""
    names = "default,human,pipeline,metis,m-etf,m-sct,heft"
    return (names if "metis" in gopt.methods() else names.replace(",metis", "")) + more


@unittest.skipUnless(CLI and os.access(CLI, os.X_OK), "GOPT_CLI is not the gopt binary")
class CliEquality(unittest.TestCase):
    """The module and the gopt binary of the same build give the same numbers for the same inputs."""

    def cli(self, *args):
        out = subprocess.run([CLI, *args], check=True, capture_output=True, text=True)
        return out.stdout

    def test_info(self):
        j = json.loads(self.cli("info", RESNET18, "--training", "--json"))
        g = gopt.load_graph(RESNET18, training=True)
        self.assertEqual(j["nodes"], g.num_ops)
        self.assertEqual(j["edges"], g.num_edges)
        self.assertAlmostEqual(j["flops"], g.flops.sum(), delta=1e-9 * j["flops"])

    def test_anchor_search(self):
        # GO's fine-tuning search without the policy: no policy file read, never worse than the
        # anchor it starts from, the same numbers as gopt place for the same seed and rounds
        g = gopt.load_graph("zoo:inception_v3:batch=8", training=True)
        bh = gopt.place(g, "v100x2", "best-heuristic")
        s = gopt.place(g, "v100x2", "anchor-search", finetune=2, seed=1)
        self.assertLessEqual(s.step_time_ms, bh.step_time_ms)
        self.assertIn("searched 2 rounds x 128 block moves", s.note)
        self.assertNotIn("zero-shot", s.note)
        j = json.loads(self.cli("place", "zoo:inception_v3:batch=8", "--training", "--cluster", "v100x2", "--method",
                                "anchor-search", "--finetune", "2", "--seed", "1", "--json"))
        self.assertEqual(s.step_time_ms, j["step_time_ms"])
        self.assertEqual(s.simulations, j["simulations"])

    def test_anchor_ties(self):
        # the orders GO's anchor is chosen from, as gopt place --anchor-ties; the others are tried as
        # answers only, so on this graph latest-first is the answer either way; a bad list is a gopt.Error
        g = gopt.load_graph("zoo:rnnlm2", training=True)
        ties = "program,first-ready,latest"
        plain = gopt.place(g, "v100x2", "best-heuristic")
        latest = gopt.place(g, "v100x2", "best-heuristic", anchor_ties=ties)
        j = json.loads(self.cli("place", "zoo:rnnlm2", "--training", "--cluster", "v100x2", "--method",
                                "best-heuristic", "--anchor-ties", ties, "--json"))
        self.assertEqual(latest.step_time_ms, j["step_time_ms"])
        for r in (plain, latest):
            self.assertIn("latest-first order", r.note)
        self.assertEqual(latest.step_time_ms, plain.step_time_ms)
        self.assertEqual(latest.simulations, plain.simulations)
        zs = gopt.place(g, "v100x2", "go-zero-shot")
        zs_latest = gopt.place(g, "v100x2", "go-zero-shot", anchor_ties=ties)
        anchor = lambda r: r.note.split(";")[0]  # the anchor the policy reads
        self.assertNotIn("latest-first", anchor(zs))
        self.assertIn("other tie order human + xla fusion + latest-first order", zs.note)
        self.assertIn("latest-first order", anchor(zs_latest))
        self.assertLessEqual(zs.step_time_ms, plain.step_time_ms)
        with self.assertRaisesRegex(gopt.Error, "anchor_ties has 'last'"):
            gopt.place(g, "v100x2", "best-heuristic", anchor_ties="program,last")

    def test_anchor_placements(self):
        # the placements GO's anchor starts from, as gopt place --anchor-placements: on Transformer-XL
        # (4 devices) the best one with its positional encodings spread over the devices is faster,
        # and go-zero-shot starts from the same anchor
        g = gopt.load_graph("zoo:transformer_xl4:segments=8", training=True)
        others = anchor_placements()
        plain = gopt.place(g, "v100x4", "best-heuristic", anchor_placements=others)
        spread = gopt.place(g, "v100x4", "best-heuristic", anchor_placements=others + ",spread")
        self.assertNotIn("fan-out spread", plain.note)
        self.assertEqual(spread.note, plain.note.split(" + ")[0] + " + fan-out spread" +
                         plain.note[len(plain.note.split(" + ")[0]):])
        self.assertLess(spread.step_time_ms, plain.step_time_ms)
        self.assertEqual(spread.simulations, plain.simulations + 1)
        self.assertEqual(gopt.simulate(g, "v100x4", spread.plan).step_time_ms, spread.step_time_ms)
        # every placement (the default): the two best and the spread one also pipelined, which
        # is faster still here (the human placement's)
        full = gopt.place(g, "v100x4", "best-heuristic")
        self.assertEqual(full.simulations, spread.simulations + 3)
        self.assertEqual(full.note, "human + xla fusion into main producers + depth-first order")
        self.assertLess(full.step_time_ms, spread.step_time_ms)
        self.assertEqual(gopt.simulate(g, "v100x4", full.plan).step_time_ms, full.step_time_ms)
        zs = gopt.place(g, "v100x4", "go-zero-shot", anchor_placements=others)
        self.assertTrue(zs.note.startswith("anchor " + plain.note + " "))
        j = json.loads(self.cli("place", "zoo:transformer_xl4:segments=8", "--training", "--cluster", "v100x4",
                                "--method", "best-heuristic", "--anchor-placements", others, "--json"))
        self.assertEqual(j["step_time_ms"], plain.step_time_ms)
        with self.assertRaisesRegex(gopt.Error, "anchor_placements has 'fanout'"):
            gopt.place(g, "v100x4", "best-heuristic", anchor_placements="human,fanout")

    def test_anchor_relabel(self):
        # the anchor's last candidate: its devices relabelled for the links. On v100x8 (NVLink inside
        # each quad and between GPU i and i + 4) GNMT's layer i on device i mod 8 hands off over PCIe
        # until relabelled; on v100x4 (every pair alike) nothing is tried
        g = gopt.load_graph("zoo:gnmt8:seq=4", training=True)
        without = anchor_placements(",spread,depth-first")
        plain = gopt.place(g, "v100x8", "best-heuristic", anchor_placements=without)
        relabelled = gopt.place(g, "v100x8", "best-heuristic", anchor_placements=without + ",relabel")
        self.assertEqual(relabelled.note, plain.note + " + devices relabelled")
        self.assertLess(relabelled.step_time_ms, plain.step_time_ms)
        self.assertEqual(relabelled.simulations, plain.simulations + 1)
        self.assertEqual(gopt.simulate(g, "v100x8", relabelled.plan).step_time_ms, relabelled.step_time_ms)
        # the same op sets on other devices, the same priorities and fusion
        to = {}
        for a, b in zip(plain.plan.device, relabelled.plan.device):
            self.assertEqual(to.setdefault(int(a), int(b)), int(b))
        self.assertEqual(len(set(to.values())), len(to))
        self.assertTrue(np.array_equal(plain.plan.fusion, relabelled.plan.fusion))
        self.assertTrue(np.array_equal(plain.plan.priority, relabelled.plan.priority))
        four = gopt.place(g, "v100x4", "best-heuristic", anchor_placements=without + ",relabel")
        self.assertEqual(four.simulations, gopt.place(g, "v100x4", "best-heuristic", anchor_placements=without).simulations)
        self.assertNotIn("relabelled", four.note)

    def test_place_and_simulate(self):
        g = gopt.load_graph(RESNET18, training=True)
        with tempfile.TemporaryDirectory() as d:
            for m, extra in (("default", []), ("human", []), ("metis", ["--seed", "3"]), ("heft", []),
                             ("m-etf", ["--fusion", "xla"]), ("m-sct", []), ("random", ["--budget", "30"]),
                             ("anneal", ["--budget", "30", "--seed", "2"]), ("go-zero-shot", []),
                             ("go", ["--finetune", "1"])):
                with self.subTest(method=m):
                    out = os.path.join(d, m + ".json")
                    j = json.loads(self.cli("place", RESNET18, "--training", "--cluster", "v100x4", "--method", m,
                                            "--json", "--out", out, *extra))
                    opts = dict(zip([a.lstrip("-") for a in extra[::2]], extra[1::2]))
                    r = gopt.place(g, "v100x4", m, seed=int(opts.get("seed", 0)), budget=int(opts.get("budget", 1000)),
                                   fusion=opts.get("fusion", "none"), finetune=int(opts.get("finetune", -1)))
                    self.assertEqual(r.step_time_ms, j["step_time_ms"])
                    self.assertEqual(r.valid, j["valid"])
                    self.assertEqual(r.simulations, j["simulations"])
                    # the note's stages and trace (samples:seconds:ms) hold wall seconds, which differ between runs
                    no_seconds = lambda n: re.sub(r"(trainer|policy|decisions|fine-tuning) [0-9.]+", r"\1",
                                                  re.sub(r" (\d+):[0-9.]+:", r" \1::", n))
                    self.assertEqual(no_seconds(r.note), no_seconds(j.get("note", "")))
                    self.assertEqual(r.peak_memory_bytes.tolist(), j["peak_memory_bytes"])
                    self.assertEqual(r.plan, gopt.Plan.load(out, g))
                    # and the CLI simulates the Python plan to the same numbers
                    r.plan.save(out, g)
                    s = json.loads(self.cli("simulate", RESNET18, "--training", "--cluster", "v100x4", "--plan", out,
                                            "--json"))
                    mine = gopt.simulate(g, "v100x4", r.plan).to_dict()
                    for k in ("step_time_ms", "valid", "status", "busy_time_ms", "peak_memory_bytes",
                              "resident_memory_bytes", "transfer_bytes", "transfers", "kernel_launches", "units",
                              "memory_traffic_bytes"):
                        self.assertEqual(mine[k], s[k], k)
                    self.assertEqual(gopt.lower_bound(g, "v100x4"), s["lower_bound_ms"])
                    self.assertGreaterEqual(r.step_time_ms, s["lower_bound_ms"]["valid_plan"])

    def test_train(self):
        with tempfile.TemporaryDirectory() as d:
            cfg = os.path.join(d, "cfg.json")
            with open(cfg, "w") as f:
                json.dump(TINY_CONFIG, f)
            self.cli("train", "--graphs", EXAMPLE, "--cluster", "v100x2", "--config", cfg, "--out",
                     os.path.join(d, "cli.ckpt"), "--metrics", os.path.join(d, "cli.csv"), "--quiet")
            gopt.train(EXAMPLE, "v100x2", cfg, checkpoint=os.path.join(d, "py.ckpt"), metrics=os.path.join(d, "py.csv"))

            def rows(path):  # the metrics without the wall-clock columns
                with open(path) as f:
                    lines = [l.strip().split(",") for l in f if l.strip()]
                wall = ("seconds", "samples_per_second", "sample_seconds", "simulate_seconds", "train_seconds")
                keep = [i for i, h in enumerate(lines[0]) if h not in wall]
                return [[l[i] for i in keep] for l in lines]

            self.assertEqual(len(rows(os.path.join(d, "cli.csv"))), 3)
            self.assertEqual(rows(os.path.join(d, "py.csv")), rows(os.path.join(d, "cli.csv")))
            with open(os.path.join(d, "cli.ckpt"), "rb") as a, open(os.path.join(d, "py.ckpt"), "rb") as b:
                self.assertEqual(a.read(), b.read())  # the same weights, Adam state and config


if __name__ == "__main__":
    unittest.main()
