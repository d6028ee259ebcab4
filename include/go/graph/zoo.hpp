#pragma once
// The workload zoo: the paper's workloads (GO, Zhou et al. 2020, and the device-placement work
// before it) as op-level dataflow graphs, named `zoo:<name>`:
//
//   rnnlm2  rnnlm4  rnnlm8               L-layer LSTM language model, unrolled over time
//   gnmt2   gnmt4   gnmt8                GNMT: bidirectional + residual LSTM encoder, attention decoder
//   transformer_xl2/4/8                  Transformer-XL: relative attention over segments + memory
//   inception_v3                         Inception-v3 (torchvision layout), conv + batchnorm + relu
//   amoebanet                            AmoebaNet-A (N=6, F=190), normal and reduction cells
//   wavenet2  wavenet4                   WaveNet: 2 stacks x 18 layers, 4 stacks x 36 layers
//
// The number in a name is the model's depth: layers (rnnlm, gnmt, transformer_xl) or stacks (wavenet).
//
// FORWARD OR TRAINING. make_zoo_graph / load_graph("zoo:<name>") return the FORWARD graph, like every
// other graph source (ONNX, JSON, PipeDream); commands expand it with `--training`
// (make_training_graph, which also picks the optimizer and so the update ops' state). The sizes this
// file promises are those of the TRAINING graph, which is what the simulator and the optimizer see:
// the training graphs of gnmt8, transformer_xl8 and wavenet4 have between 40,000 and 100,000 ops,
// like the graphs of the paper (table in bench/README.md, "The workload zoo"; tests/test_graph_zoo.cpp checks them).
//
// OP GRANULARITY. One op per kernel a framework launches (TensorFlow without XLA): every LSTM gate
// activation, dropout, sequence mask, residual add, batchnorm and relu is its own op; biases are
// operands of their matmul/conv; reshapes that move no data are left out. Weights shared across time
// steps / segments / chunks are held by `constant` variable ops (param_bytes = the weight) that every
// step reads, so a placement pays to move weights away from their variable; convolution weights of
// the image models are owned by the conv op itself (param_bytes on the op). All tensors are f32.
//
// WORKLOADS AND DEFAULTS (ZooOptions overrides; every default is justified where it is set):
//   rnnlm<L>         batch 64, 40 steps, 2048 LSTM units, 32k vocabulary, dropout on layer inputs.
//   gnmt<L>          tensorflow/nmt GNMT: batch 128, 64 steps per side, 1024 units, 32k BPE vocab;
//                    layer 0 of the encoder is bidirectional, residual connections from layer 2,
//                    normalized Bahdanau attention on the bottom decoder layer whose context feeds
//                    every decoder layer; dropout and sequence-length masks on every cell.
//   transformer_xl<L> enwik8 sizes: d_model 512, 8 heads, d_inner 2048, 204 classes; 128-token
//                    segments with a 128-token memory per layer (the previous segment's layer input),
//                    96 segments per step (2 streams); relative positional attention
//                    (AC + rel_shift(BD)), dropout, post-layernorm, a softmax per segment.
//                    Gradients flow through the memory (make_training_graph has no stop-gradient).
//   inception_v3     torchvision Inception3 at 299x299, batch 64: stem, 3x Inception-A (mixed_5b-d),
//                    reduction-A (mixed_6a), 4x Inception-B with 1x7/7x1 factorized convs
//                    (mixed_6b-e), reduction-B (mixed_7a), 2x Inception-C (mixed_7b-c), pool, fc,
//                    and the auxiliary head (training); 5.71 G multiply-accumulates per image.
//   amoebanet        AmoebaNet-A (Real et al. 2019; tensorflow/tpu amoeba_net), N=6 normal cells per
//                    stage, F=190, 331x331, batch 32, ImageNet stem (conv + 2 reduction cells),
//                    drop-path, auxiliary head. Cells: zoo/amoebanet.hpp.
//   wavenet<S>       S stacks of 18 (wavenet2) or 36 (wavenet4) dilated causal gated layers, dilation
//                    2^(i mod 10), 64 residual channels, 256 skip channels, 256 mu-law classes;
//                    batch 2 x 16,384 samples (about 1 s at 16 kHz, longer than the 12.5k-sample
//                    receptive field of wavenet4) cut into 16 chunks of 1,024: each layer's chunk
//                    reads the last `dilation` samples of the previous chunk (a halo), so time is a
//                    pipeline dimension as in the recurrent models.
//
// HUMAN-EXPERT PLACEMENT. zoo_human_placement(g, k) gives each op a device in [0, k) by the rules of
// the literature, for the forward graph and for the training graph made from it:
//   rnnlm, gnmt      layer i on device i mod k (tensorflow/nmt: GNMT's bidirectional layer and the
//                    embeddings on device 0, attention with decoder layer 0), softmax on device L
//                    (L-1 when L >= k);
//   transformer_xl   contiguous blocks of layers (embedding with the first, softmax with the last);
//   wavenet          contiguous blocks of layers in stack order (stack s on device s when k = stacks);
//   inception_v3, amoebanet  the branches of every module (inception branches, cell blocks) split
//                    across distinct devices, heaviest first to the least-loaded one by estimated
//                    compute (the other literature choice, one device, is the all-zeros baseline).
// Forward ops are placed from their names (the generators' naming scheme), so a graph saved and
// reloaded keeps its human placement. Backward and update ops follow their forward op by name, as
// make_training_graph names them: `<op>/grad` and `<op>/grad_sum<k>` go to <op>'s device,
// `<param>/update` to the device of the op owning the parameter; ops in one colocation group share
// the device of its forward member; anything left (the loss) goes with its producer.
// default_human_placement(g, k) is the generic rule for any graph: forward ops ordered by topological
// depth, cut into k contiguous blocks of equal estimated compute, training ops following as above.
//
// FILES. This header is the entry point: it declares make_zoo_graph, which builds a workload by name
// and is compiled once into libgo (src/graph/zoo.cpp, so that a program does not compile every
// generator again). The parts live in go/graph/zoo/: common.hpp (ZooOptions, names, defaults, the
// graph-construction helpers), one generator per family (recurrent.hpp: rnnlm and gnmt;
// transformer_xl.hpp; wavenet.hpp; inception_v3.hpp; amoebanet.hpp, with its cells; include one to
// call its generator directly), and placement.hpp (zoo_human_placement, default_human_placement).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "go/core/error.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/zoo/common.hpp"
#include "go/graph/zoo/placement.hpp"

namespace go {

// Builds the forward graph of zoo workload `name` (see zoo_names()); make_training_graph expands it.
// Unknown names and bad options are go::Errors naming the workload, and so are sizes that would make
// more than opts.max_ops ops (kMaxGeneratedOps by default) or an option above it.
OpGraph make_zoo_graph(std::string_view name, const ZooOptions& opts = {});

// A zoo workload from a spec "<name>[:<option>=<value>...]", e.g. "gnmt2:seq=16:batch=32" (what
// follows "zoo:" in a graph path; options as in ZooOptions). Malformed specs are go::Errors.
OpGraph make_zoo_graph_from_spec(std::string_view spec);

}  // namespace go
