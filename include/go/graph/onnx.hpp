#pragma once
// ONNX importer (libonnx protobuf classes), compiled into libgo (src/graph/onnx/). One op per ONNX node plus one `input` op per data input.
//
// Shapes come from value_info, graph inputs/outputs and initializers; a node output without a
// recorded type is inferred for the common operators (Conv, pooling, Gemm/MatMul, broadcasting
// elementwise ops, Concat, Flatten, Reshape, Transpose, reductions, Gather, Slice, Split, Pad, LSTM,
// GRU, ...), else its shape stays unknown (0 bytes, FLOPs from what is known). An op that reads such
// an unknown shape and cannot infer its own is an error naming where the shapes stopped (an
// operator go does not know, attributes it cannot apply, a graph input without a shape): every op
// after it would otherwise count 0 FLOPs and 0 bytes. Shapes that contradict each other are an
// error naming the node: a recorded output shape that the node's inputs do not give (an input of
// batch 1e9 with outputs recorded at batch 32), a convolution whose weight's channels, rank or
// group do not fit its input, product operands of different inner sizes, operands that do not
// broadcast. A size that was symbolic (dim_param, OnnxOptions::symbolic_dim stands in for it) is
// not compared, nor is any size inferred from a tensor with one, nor the recorded outputs of a
// node that reads one; the concrete sizes of a dynamic-batch export (its channels, features and
// weights) are checked.
// Shape computations done at run time (Shape -> Gather -> Concat -> Reshape, as exporters emit
// for x.shape) are folded at import time (onnx_fold.hpp, onnx_proto.hpp has the protobuf helpers);
// folded nodes stay as ops with 0 FLOPs, like Shape and Constant.
//
// Parameters. Initializers are parameters. Models exported without weights carry them as graph
// inputs: a graph input is a parameter unless it is the first graph input or one of its uses
// (following Identity/Transpose/Cast/Reshape/Unsqueeze chains) is a data operand (weight operands:
// Conv/ConvTranspose/Gemm 1-2, MatMul 1, normalization scale/bias/statistics, RNN weights, Gather 0,
// PRelu 1, Sub/Div 1; either operand of the commutative Add/Mul/Sum/Max/Min/Mean, which exporters
// emit in both orders, is no evidence either way). An Identity of a parameter is a parameter of its own (exporters
// de-duplicate equal weights behind Identity nodes) and produces no op. Each parameter belongs to
// the first op that reads it (its param_bytes); later readers read it for free, like a variable.
//
// FLOPs (2 per multiply-accumulate): Conv 2*out*Cin/g*prod(k) (+out for a bias); ConvTranspose
// 2*in*Cout/g*prod(k); Gemm/MatMul 2*out*K (+out for Gemm's C); BatchNormalization 2/elem;
// LayerNormalization 8/elem; Relu/Clip/LeakyRelu 1, Sigmoid/Tanh/Erf 4, Gelu 8 per elem; binary
// elementwise 1 per output elem per extra operand; Max/AveragePool out*prod(kernel); global pooling
// and reductions 1 per input elem; Softmax 5/elem; LSTM seq*batch*dirs*(8H(I+H)+20H), GRU
// seq*batch*dirs*(6H(I+H)+16H); Gather, Concat, Slice, Split, Pad, Transpose and shape ops 0.
//
// Where it lives (src/graph/onnx/): importer.hpp (the Importer and its per-node helpers),
// import.cpp (reading the protobuf message, classifying inputs, building the graph),
// shapes.cpp (shape inference), flops.cpp (FLOP counting).
#include <cstdint>
#include <string>
#include <string_view>

#include "go/graph/graph.hpp"

namespace go {

struct OnnxOptions {
  // Value used for symbolic dimensions (dim_param, e.g. a dynamic batch).
  std::int64_t symbolic_dim = 1;
};

// Parses ONNX protobuf bytes; errors name `source`.
OpGraph parse_onnx(std::string_view bytes, const std::string& source, const OnnxOptions& opts = {});

OpGraph load_onnx(const std::string& path, const OnnxOptions& opts = {});

}  // namespace go
