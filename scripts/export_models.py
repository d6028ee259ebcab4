#!/usr/bin/python3
"""Exports the transformer models of data/models/ to ONNX without weights.

    scripts/export_models.py [OUT_DIR]        (default: data/models)

Needs Debian's python3-torch, python3-torchvision and python3-onnx (PyTorch 1.13, torchvision
0.14, onnx 1.12: /usr/bin/python3, not a virtual environment). Writes

  swin_t.onnx     torchvision Swin-T, batch 32, 3x224x224 (published 4.49 GMACs per image)
  vit_b_16.onnx   torchvision ViT-B/16, batch 32, 3x224x224 (published 17.56 GMACs per image)
  bert_base.onnx  torch.nn.TransformerEncoder shaped like BERT-base (12 layers, d_model 768,
                  12 heads, feed-forward 3072, GELU), batch 8, sequence 128

with torch.onnx.export at opset 17 and export_params=False: every weight is a graph input with its
shape and no data, so the files are small and the importer still sees the parameter shapes.
The batch axis is dynamic (dynamic_axes), as deployment exports are, and the value_info the
exporter records is dropped: the importer must infer every shape itself, through the run-time
shape computations (Shape -> Gather -> Concat -> Reshape) that Swin's window padding and
PyTorch's multi-head attention emit. go reads the dynamic batch as OnnxOptions::symbolic_dim
(1), so `gopt info` gives per-image counts directly.
"""
import os
import sys

import onnx
import torch
import torchvision


class BertLike(torch.nn.Module):
    """A BERT-base encoder stack without embeddings: 12 x (self-attention + GELU feed-forward)."""

    def __init__(self):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(
            d_model=768, nhead=12, dim_feedforward=3072, dropout=0.0, activation="gelu", batch_first=True
        )
        self.encoder = torch.nn.TransformerEncoder(layer, num_layers=12, enable_nested_tensor=False)

    def forward(self, x):
        return self.encoder(x)


def shorten_tensor_names(graph):
    """Renames node outputs ('/features/features.1/.../Shape_1_output_0') to 't<k>': they repeat the
    node names and are two thirds of the file. Graph inputs, outputs and parameters keep theirs."""
    keep = {v.name for v in graph.input} | {v.name for v in graph.output}
    new = {}
    for node in graph.node:
        for k, name in enumerate(node.output):
            if name and name not in keep:
                new[name] = f"t{len(new)}"
                node.output[k] = new[name]
        for k, name in enumerate(node.input):
            node.input[k] = new.get(name, name)


def export(model, example, path):
    model.eval()
    # Gradients stay enabled: under no_grad nn.MultiheadAttention takes its fused fast path
    # (aten::_native_multi_head_attention), which has no ONNX export.
    torch.onnx.export(
        model,
        example,
        path,
        export_params=False,
        opset_version=17,
        input_names=["input"],
        output_names=["output"],
        dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}},
        do_constant_folding=True,
    )
    m = onnx.load(path)
    del m.graph.value_info[:]  # the importer infers shapes itself (see the docstring)
    shorten_tensor_names(m.graph)
    onnx.checker.check_model(m)
    onnx.save(m, path)
    print(f"{path}: {os.path.getsize(path)} bytes, {len(m.graph.node)} nodes")


def main(argv):
    out = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "data", "models")
    torch.manual_seed(0)
    image = torch.randn(32, 3, 224, 224)
    export(torchvision.models.swin_t(weights=None), image, os.path.join(out, "swin_t.onnx"))
    export(torchvision.models.vit_b_16(weights=None), image, os.path.join(out, "vit_b_16.onnx"))
    export(BertLike(), torch.randn(8, 128, 768), os.path.join(out, "bert_base.onnx"))


if __name__ == "__main__":
    main(sys.argv)
