// go::policy::PolicyConfig to and from JSON (go/policy/config.hpp).
#include <string>

#include <nlohmann/json.hpp>

#include "go/core/error.hpp"
#include "go/core/json_field.hpp"
#include "go/policy/config.hpp"

namespace go::policy {

nlohmann::json PolicyConfig::to_json() const {
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

PolicyConfig PolicyConfig::from_json(const nlohmann::json& j, const std::string& where) {
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
  try {  // a value out of range names the config it came from
    c.validate();
  } catch (const Error& e) {
    GO_FAIL(where, ": ", e.what());
  }
  return c;
}

nlohmann::json PolicyConfig::legacy_policy_json(nlohmann::json j) {
  if (j.is_object() && !j.contains("chain")) j["chain"] = "action";
  return j;
}

PolicyConfig PolicyConfig::parse(const std::string& text, const std::string& where) {
  return from_json(parse_json_config(text, where), where);
}

}  // namespace go::policy
