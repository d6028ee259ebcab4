#pragma once
// The whole graph layer: IR, importers, JSON format, cost model, fusion rules, training-graph expansion.
#include "go/graph/cost.hpp"
#include "go/graph/dnn_partitioning.hpp"
#include "go/graph/fusion_rules.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/io.hpp"
#include "go/graph/json.hpp"
#include "go/graph/load.hpp"
#include "go/graph/onnx.hpp"
#include "go/graph/op_kind.hpp"
#include "go/graph/pipedream.hpp"
#include "go/graph/training.hpp"
#include "go/graph/zoo.hpp"
