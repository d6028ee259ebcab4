#pragma once
// Hyper-parameters of the GO policy network, readable from and printable as JSON:
//
//   { "type": "go_policy", "hidden": 128, "sage_layers": 2, "aggregation": "max",
//     "heads": 4, "segment_length": 128, "memory_length": 128, "causal": true,
//     "layers_per_task": 1, "ffn_dim": 512, "max_devices": 8, "priority_levels": 8,
//     "superposition": true, "chain": "hidden", "value_hidden": 128, "head_gain": 0.01, "anchor": true,
//     "anchor_bias": 4.0, "seed": 1 }
//
// Every key is optional (the defaults above); an unknown key or a value out of
// range is a go::Error naming it.
#include <cstdint>
#include <string>
#include <type_traits>

#include <nlohmann/json_fwd.hpp>

#include "go/core/error.hpp"
#include "go/core/file.hpp"
#include "go/kernels/aggregate.hpp"

namespace go::policy {

struct PolicyConfig {
  std::int64_t hidden = 128;        // node embedding width everywhere
  int sage_layers = 2;              // GraphSAGE layers
  std::string aggregation = "max";  // GraphSAGE aggregator: max (pooling), mean or sum
  int heads = 4;                    // attention heads (hidden % heads == 0)
  std::int64_t segment_length = 128;
  std::int64_t memory_length = 128; // cached rows before each segment (stop-gradient)
  bool causal = true;               // node i attends only to nodes <= i in topological order
  int layers_per_task = 1;          // attention blocks of each of the three tasks
  std::int64_t ffn_dim = 512;       // feed-forward width of the attention blocks
  int max_devices = 8;              // device embeddings: any 1..max_devices devices per call
  int priority_levels = 8;          // P
  bool superposition = true;        // graph-conditioned gates on every attention block's input
  // How the tasks chain (go/policy/policy.hpp): "hidden", through hidden states only (one pass
  // serves every sample), or "action", through the embedding of each sampled action too (the
  // priority and fusion blocks run once per sample). Files saved before this key existed are
  // "action" (legacy_policy_json).
  std::string chain = "hidden";
  std::int64_t value_hidden = 128;  // the value head's hidden layer
  float head_gain = 0.01f;          // initial scale of the action heads (near-uniform first policy)
  // Anchor plan (go/rl/anchor.hpp): the decision of a cheap heuristic per row, read as an input
  // (device embedding) and as a learned bias on the logit of the anchor's action in each task,
  // starting at anchor_bias. It breaks the device symmetry and starts PPO at a good plan.
  bool anchor = true;
  float anchor_bias = 4.f;
  std::uint64_t seed = 1;           // parameter initialization

  kernels::Reduce reduce() const {
    if (aggregation == "max") return kernels::Reduce::max;
    if (aggregation == "mean") return kernels::Reduce::mean;
    return kernels::Reduce::sum;
  }

  void validate() const {
    GO_CHECK(hidden >= 1, "policy config: \"hidden\" is ", hidden, ", must be >= 1");
    GO_CHECK(heads >= 1 && hidden % heads == 0, "policy config: \"heads\" ", heads, " must divide \"hidden\" ",
             hidden);
    GO_CHECK(sage_layers >= 0, "policy config: \"sage_layers\" is ", sage_layers, ", must be >= 0");
    GO_CHECK(aggregation == "max" || aggregation == "mean" || aggregation == "sum",
             "policy config: \"aggregation\" is '", aggregation, "', expected max, mean or sum");
    GO_CHECK(segment_length >= 1, "policy config: \"segment_length\" is ", segment_length, ", must be >= 1");
    GO_CHECK(memory_length >= 0, "policy config: \"memory_length\" is ", memory_length, ", must be >= 0");
    GO_CHECK(layers_per_task >= 1, "policy config: \"layers_per_task\" is ", layers_per_task, ", must be >= 1");
    GO_CHECK(ffn_dim >= 1, "policy config: \"ffn_dim\" is ", ffn_dim, ", must be >= 1");
    GO_CHECK(max_devices >= 1 && max_devices <= 4096, "policy config: \"max_devices\" is ", max_devices,
             ", must be in [1, 4096]");
    GO_CHECK(priority_levels >= 1, "policy config: \"priority_levels\" is ", priority_levels, ", must be >= 1");
    GO_CHECK(chain == "hidden" || chain == "action", "policy config: \"chain\" is '", chain,
             "', expected hidden or action");
    GO_CHECK(value_hidden >= 1, "policy config: \"value_hidden\" is ", value_hidden, ", must be >= 1");
    GO_CHECK(head_gain > 0.f, "policy config: \"head_gain\" is ", head_gain, ", must be > 0");
    GO_CHECK(anchor_bias >= 0.f && anchor_bias <= 50.f, "policy config: \"anchor_bias\" is ", anchor_bias,
             ", must be in [0, 50]");
  }

  // Reading and writing the JSON above (src/policy/config.cpp).
  nlohmann::json to_json() const;
  static PolicyConfig from_json(const nlohmann::json& j, const std::string& where = "policy config");
  // A policy config saved in a parameter file or checkpoint: files written before "chain" existed
  // were trained with the sampled actions chaining the tasks.
  static nlohmann::json legacy_policy_json(nlohmann::json j);
  static PolicyConfig parse(const std::string& text, const std::string& where = "policy config");
  static PolicyConfig load(const std::string& path) { return parse(read_file(path), path); }
};

}  // namespace go::policy
