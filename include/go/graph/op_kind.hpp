#pragma once
// The fixed vocabulary of op kinds, op roles and tensor element types of the graph IR.
// Kinds are small integers so node features can one-hot them (kNumOpKinds).
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace go {

enum class OpKind : std::uint8_t {
  input,        // a graph input (data fed by the host)
  constant,     // a small constant tensor (shapes, scalars)
  conv,         // Conv / ConvTranspose
  matmul,       // MatMul (batched), Gemm, Linear
  batch_norm,
  layer_norm,
  relu,         // Relu, LeakyRelu, PRelu, Clip (relu6)
  sigmoid,
  tanh,
  gelu,
  elementwise,  // other unary/binary math: Erf, Sqrt, Pow, Exp, Cast, Where, ...
  add,          // Add, Sum
  sub,
  mul,
  div,
  max_pool,
  avg_pool,
  global_pool,
  concat,
  split,
  slice,
  softmax,
  reduce,       // ReduceMean / ReduceSum / ...
  rnn,          // LSTM, GRU, RNN
  gather,       // Gather, embedding lookup
  reshape,      // zero-FLOP views: Reshape, Flatten, Squeeze, Unsqueeze, Identity, Shape
  transpose,
  pad,
  dropout,
  accumulate,   // gradient accumulation (AddN) in training graphs
  update,       // parameter update (optimizer step) in training graphs
  other,
};

inline constexpr std::size_t kNumOpKinds = static_cast<std::size_t>(OpKind::other) + 1;

inline constexpr std::array<std::string_view, kNumOpKinds> kOpKindNames = {
    "input",    "constant",  "conv",      "matmul",      "batch_norm", "layer_norm", "relu",
    "sigmoid",  "tanh",      "gelu",      "elementwise", "add",        "sub",        "mul",
    "div",      "max_pool",  "avg_pool",  "global_pool", "concat",     "split",      "slice",
    "softmax",  "reduce",    "rnn",       "gather",      "reshape",    "transpose",  "pad",
    "dropout",  "accumulate", "update",   "other"};

constexpr std::string_view op_kind_name(OpKind k) { return kOpKindNames[static_cast<std::size_t>(k)]; }
constexpr std::size_t op_kind_index(OpKind k) { return static_cast<std::size_t>(k); }

// Which ops fuse into one kernel, by kind and role: go/graph/fusion_rules.hpp.

inline std::optional<OpKind> parse_op_kind(std::string_view s) {
  for (std::size_t i = 0; i < kNumOpKinds; ++i)
    if (kOpKindNames[i] == s) return static_cast<OpKind>(i);
  return std::nullopt;
}

// Kind of an ONNX operator type ("Conv", "MatMul", "LayerNormalization", ...); OpKind::other when
// the type is outside the vocabulary.
inline OpKind onnx_op_kind(std::string_view t) {
  struct Entry {
    std::string_view type;
    OpKind kind;
  };
  static constexpr Entry kTable[] = {
      {"Conv", OpKind::conv}, {"ConvTranspose", OpKind::conv}, {"ConvInteger", OpKind::conv},
      {"QLinearConv", OpKind::conv}, {"MatMul", OpKind::matmul}, {"Gemm", OpKind::matmul},
      {"MatMulInteger", OpKind::matmul}, {"QLinearMatMul", OpKind::matmul}, {"Einsum", OpKind::matmul},
      {"BatchNormalization", OpKind::batch_norm}, {"InstanceNormalization", OpKind::batch_norm},
      {"LayerNormalization", OpKind::layer_norm}, {"GroupNormalization", OpKind::layer_norm},
      {"SkipLayerNormalization", OpKind::layer_norm},
      {"Relu", OpKind::relu}, {"LeakyRelu", OpKind::relu}, {"PRelu", OpKind::relu}, {"Clip", OpKind::relu},
      {"Elu", OpKind::relu}, {"Selu", OpKind::relu}, {"ThresholdedRelu", OpKind::relu},
      {"Sigmoid", OpKind::sigmoid}, {"HardSigmoid", OpKind::sigmoid}, {"HardSwish", OpKind::sigmoid},
      {"Tanh", OpKind::tanh}, {"Gelu", OpKind::gelu}, {"FastGelu", OpKind::gelu}, {"BiasGelu", OpKind::gelu},
      {"Add", OpKind::add}, {"Sum", OpKind::add}, {"Sub", OpKind::sub}, {"Mul", OpKind::mul},
      {"Div", OpKind::div}, {"MaxPool", OpKind::max_pool}, {"AveragePool", OpKind::avg_pool},
      {"LpPool", OpKind::avg_pool}, {"GlobalAveragePool", OpKind::global_pool},
      {"GlobalMaxPool", OpKind::global_pool}, {"GlobalLpPool", OpKind::global_pool},
      {"Concat", OpKind::concat}, {"Split", OpKind::split}, {"Slice", OpKind::slice},
      {"Softmax", OpKind::softmax}, {"LogSoftmax", OpKind::softmax}, {"Hardmax", OpKind::softmax},
      {"ReduceMean", OpKind::reduce}, {"ReduceSum", OpKind::reduce}, {"ReduceMax", OpKind::reduce},
      {"ReduceMin", OpKind::reduce}, {"ReduceProd", OpKind::reduce}, {"ReduceL2", OpKind::reduce},
      {"ReduceL1", OpKind::reduce}, {"ReduceSumSquare", OpKind::reduce}, {"ReduceLogSumExp", OpKind::reduce},
      {"ArgMax", OpKind::reduce}, {"ArgMin", OpKind::reduce},
      {"LSTM", OpKind::rnn}, {"GRU", OpKind::rnn}, {"RNN", OpKind::rnn},
      {"Gather", OpKind::gather}, {"GatherElements", OpKind::gather}, {"GatherND", OpKind::gather},
      {"Reshape", OpKind::reshape}, {"Flatten", OpKind::reshape}, {"Squeeze", OpKind::reshape},
      {"Unsqueeze", OpKind::reshape}, {"Identity", OpKind::reshape}, {"Shape", OpKind::reshape},
      {"Size", OpKind::reshape}, {"Transpose", OpKind::transpose}, {"Pad", OpKind::pad},
      {"Dropout", OpKind::dropout}, {"Constant", OpKind::constant}, {"ConstantOfShape", OpKind::constant},
      {"Erf", OpKind::elementwise}, {"Sqrt", OpKind::elementwise}, {"Pow", OpKind::elementwise},
      {"Exp", OpKind::elementwise}, {"Log", OpKind::elementwise}, {"Neg", OpKind::elementwise},
      {"Abs", OpKind::elementwise}, {"Reciprocal", OpKind::elementwise}, {"Cast", OpKind::elementwise},
      {"Where", OpKind::elementwise}, {"Equal", OpKind::elementwise}, {"Less", OpKind::elementwise},
      {"Greater", OpKind::elementwise}, {"Not", OpKind::elementwise}, {"And", OpKind::elementwise},
      {"Or", OpKind::elementwise}, {"Min", OpKind::elementwise}, {"Max", OpKind::elementwise},
      {"Floor", OpKind::elementwise}, {"Ceil", OpKind::elementwise}, {"Sin", OpKind::elementwise},
      {"Cos", OpKind::elementwise}, {"Softplus", OpKind::elementwise}, {"Expand", OpKind::elementwise},
      {"Tile", OpKind::elementwise}, {"Range", OpKind::elementwise}, {"Resize", OpKind::elementwise},
      {"Upsample", OpKind::elementwise}, {"Mean", OpKind::elementwise},
  };
  for (const auto& e : kTable)
    if (e.type == t) return e.kind;
  return OpKind::other;
}

// Ops that move no data and launch no kernel (views and constants): zero cost.
constexpr bool is_free_op(OpKind k) {
  return k == OpKind::input || k == OpKind::constant || k == OpKind::reshape;
}

// Where an op sits in a training step.
enum class OpRole : std::uint8_t { forward, backward, update };

inline constexpr std::array<std::string_view, 3> kOpRoleNames = {"forward", "backward", "update"};
constexpr std::string_view op_role_name(OpRole r) { return kOpRoleNames[static_cast<std::size_t>(r)]; }
inline std::optional<OpRole> parse_op_role(std::string_view s) {
  for (std::size_t i = 0; i < kOpRoleNames.size(); ++i)
    if (kOpRoleNames[i] == s) return static_cast<OpRole>(i);
  return std::nullopt;
}

// Element type of a graph tensor (wider than the core DType: graphs describe other programs).
enum class ElemType : std::uint8_t { f32, f16, bf16, f64, i8, u8, i16, i32, i64, boolean, other };

inline constexpr std::array<std::string_view, 11> kElemTypeNames = {"f32", "f16", "bf16", "f64", "i8",  "u8",
                                                                    "i16", "i32", "i64",  "bool", "other"};

constexpr std::string_view elem_type_name(ElemType t) { return kElemTypeNames[static_cast<std::size_t>(t)]; }
inline std::optional<ElemType> parse_elem_type(std::string_view s) {
  for (std::size_t i = 0; i < kElemTypeNames.size(); ++i)
    if (kElemTypeNames[i] == s) return static_cast<ElemType>(i);
  return std::nullopt;
}

constexpr std::int64_t elem_size(ElemType t) {
  switch (t) {
    case ElemType::f16:
    case ElemType::bf16:
    case ElemType::i16: return 2;
    case ElemType::f64:
    case ElemType::i64: return 8;
    case ElemType::i8:
    case ElemType::u8:
    case ElemType::boolean: return 1;
    case ElemType::f32:
    case ElemType::i32:
    case ElemType::other: return 4;
  }
  return 4;
}

}  // namespace go
