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

#include <nlohmann/json.hpp>

#include "go/core/error.hpp"
#include "go/core/file.hpp"
#include "go/core/json_field.hpp"
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

  nlohmann::json to_json() const {
    return {{"type", "go_policy"},
            {"hidden", hidden},
            {"sage_layers", sage_layers},
            {"aggregation", aggregation},
            {"heads", heads},
            {"segment_length", segment_length},
            {"memory_length", memory_length},
            {"causal", causal},
            {"layers_per_task", layers_per_task},
            {"ffn_dim", ffn_dim},
            {"max_devices", max_devices},
            {"priority_levels", priority_levels},
            {"superposition", superposition},
            {"chain", chain},
            {"value_hidden", value_hidden},
            {"head_gain", head_gain},
            {"anchor", anchor},
            {"anchor_bias", anchor_bias},
            {"seed", seed}};
  }

  static PolicyConfig from_json(const nlohmann::json& j, const std::string& where = "policy config") {
    GO_CHECK(j.is_object(), where, ": expected a JSON object, got ", j.dump());
    PolicyConfig c;
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string& k = it.key();
      const JsonField f{where, k, it.value()};
      if (k == "type") {
        f.type("go_policy");
      } else if (k == "hidden") f.integer(c.hidden);
      else if (k == "sage_layers") f.integer(c.sage_layers);
      else if (k == "aggregation") f.string(c.aggregation);
      else if (k == "heads") f.integer(c.heads);
      else if (k == "segment_length") f.integer(c.segment_length);
      else if (k == "memory_length") f.integer(c.memory_length);
      else if (k == "causal") f.boolean(c.causal);
      else if (k == "layers_per_task") f.integer(c.layers_per_task);
      else if (k == "ffn_dim") f.integer(c.ffn_dim);
      else if (k == "max_devices") f.integer(c.max_devices);
      else if (k == "priority_levels") f.integer(c.priority_levels);
      else if (k == "superposition") f.boolean(c.superposition);
      else if (k == "chain") f.string(c.chain);
      else if (k == "value_hidden") f.integer(c.value_hidden);
      else if (k == "head_gain") f.number(c.head_gain);
      else if (k == "anchor") f.boolean(c.anchor);
      else if (k == "anchor_bias") f.number(c.anchor_bias);
      else if (k == "seed") f.seed(c.seed);
      else {
        GO_FAIL(where, ": unknown key \"", k, "\" (known: type, hidden, sage_layers, aggregation, heads, "
                       "segment_length, memory_length, causal, layers_per_task, ffn_dim, max_devices, "
                       "priority_levels, superposition, chain, value_hidden, head_gain, anchor, anchor_bias, seed)");
      }
    }
    c.validate();
    return c;
  }

  // A policy config saved in a parameter file or checkpoint: files written before "chain" existed
  // were trained with the sampled actions chaining the tasks.
  static nlohmann::json legacy_policy_json(nlohmann::json j) {
    if (j.is_object() && !j.contains("chain")) j["chain"] = "action";
    return j;
  }

  static PolicyConfig parse(const std::string& text, const std::string& where = "policy config") {
    return from_json(parse_json_config(text, where), where);
  }
  static PolicyConfig load(const std::string& path) { return parse(read_file(path), path); }
};

}  // namespace go::policy
