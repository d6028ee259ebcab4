#pragma once
// Training graphs: forward + backward + parameter update, as a framework's autodiff builds them.
//
// From a forward graph:
//   - the forward ops are kept (same ids, names and edges);
//   - a `loss` op reads the forward sinks that need gradients and `loss/grad` seeds the backward pass;
//   - every forward op that needs a gradient (it owns parameters, e.g. a variable op whose weight
//     tensor several ops read, or one of its data inputs comes from an op that needs one) gets a gradient op `<name>/grad` (same kind, role backward). It
//     reads the gradient of each of its outputs, and the forward activations its kind needs
//     (conv/matmul/normalization/mul/div/gather/other: inputs; relu/sigmoid/tanh/softmax/dropout:
//     outputs; max_pool/rnn: both; add/sub/concat/split/slice/pad/transpose/views/avg pooling: none),
//     so those activations stay alive until the backward pass. It writes one gradient per input that
//     needs one (same shape and bytes) and one per parameter;
//   - a tensor read by several ops that need gradients gets an `accumulate` op summing their
//     contributions (AddN) before its producer's gradient op reads it;
//   - one `update` op per parameter (role update) reads that parameter's gradient; it owns the
//     optimizer state (momentum: 1x the parameter bytes, Adam: 2x, SGD: none) and is colocated with
//     the forward op that owns the parameter (ops owning parameters without a colocation group get
//     a fresh one), since the weights live there. Optimizer::none adds no update ops: the default
//     for NeuSight profiles (GraphInfo::format "neusight"), whose measured step is forward +
//     backward only and whose backward times already hold the weight-gradient accumulation;
//   - an op whose outputs are all integer or boolean (sizes, indices, masks) gets no gradient: none
//     flows through such values, and counting their readers as gradient contributions would add
//     accumulate ops that no framework runs.
// FLOPs: conv/matmul/rnn gradients cost one forward FLOP count per operand gradient (input and/or
// weights, so about 2x the forward); normalization and softmax 2x; other kinds 1x; accumulation one
// FLOP per element per extra operand; updates 2 (SGD), 4 (momentum) or 12 (Adam) FLOPs per weight.
// Times: a PipeDream backward_time becomes the gradient op's measured time; otherwise a forward op
// with a measured time gives its gradient op that time times its FLOP factor; the rest use the
// roofline. A graph that already has backward ops (dnn-partitioning training graphs) is returned
// unchanged. Compiled once into libgo (src/graph/training.cpp).
#include <cstdint>
#include <optional>

#include "go/graph/graph.hpp"

namespace go {

enum class Optimizer : std::uint8_t { sgd, momentum, adam, none };

struct TrainingOptions {
  std::optional<Optimizer> optimizer;  // unset: none for NeuSight profiles, else momentum
};

// The training graph of forward graph `fwd` (the rules above).
OpGraph make_training_graph(const OpGraph& fwd, const TrainingOptions& opts = {});

}  // namespace go
