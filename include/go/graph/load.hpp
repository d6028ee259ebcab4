#pragma once
// load_graph(path): one entry point for every graph file, choosing the importer by content and
// extension:
//   - JSON (".json", or content starting with '{'): a go-graph document ("format": "go-graph") or a
//     dnn-partitioning graph ("nodes" + "edges" with sourceId/destId);
//   - PipeDream graph.txt (".txt", or a first line "nodeK -- ...");
//   - NeuSight torch.fx profiles (".csv", or a header "op,target,..." with _input_nodes and fw_latency;
//     neusight.hpp): the whole model from one traced layer, its count from the sibling .json or a
//     path suffix ":layers=N" (e.g. gpt2_large-train-1024-1.csv:layers=4);
//   - ONNX protobuf (".onnx", or anything else that parses as a ModelProto);
//   - "zoo:<name>[:<option>=<value>...]": a generated workload (zoo.hpp, zoo_names()) with its default
//     sizes or the given ones (e.g. zoo:gnmt2:seq=16:batch=32), as a FORWARD
//     graph like every other source; make_training_graph (`--training`) expands it to the training
//     graph, whose size is what zoo.hpp documents (gnmt8, transformer_xl8, wavenet4: 40k-100k ops).
// Errors are go::Error with a one-line message starting with the path. Compiled once into libgo
// (src/graph/load.cpp), with every importer and the zoo.
#include <string>
#include <string_view>

#include "go/graph/graph.hpp"

namespace go {

enum class GraphFormat { auto_detect, onnx, json, pipedream, dnn_partitioning, neusight };

// Parses an in-memory graph; `source` names it in errors and picks the format by extension.
OpGraph parse_graph(std::string_view data, const std::string& source, GraphFormat format = GraphFormat::auto_detect);

// Reads a graph file, a NeuSight profile "<file>:layers=N", or a zoo workload "zoo:<spec>".
OpGraph load_graph(const std::string& path, GraphFormat format = GraphFormat::auto_detect);

}  // namespace go
