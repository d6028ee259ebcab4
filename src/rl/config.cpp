// go::rl::TrainConfig to and from JSON (go/rl/config.hpp).
#include <string>

#include <nlohmann/json.hpp>

#include "go/core/error.hpp"
#include "go/core/json_field.hpp"
#include "go/policy/config.hpp"
#include "go/rl/config.hpp"

namespace go::rl {

nlohmann::json TrainConfig::to_json() const {
  return {{"type", "go_ppo"},
          {"policy", policy.to_json()},
          {"updates", updates},
          {"samples", samples},
          {"graphs_per_update", graphs_per_update},
          {"epochs", epochs},
          {"trainable", trainable},
          {"minibatch", minibatch},
          {"clip", clip},
          {"ratio", ratio},
          {"entropy_coef", entropy_coef},
          {"value_coef", value_coef},
          {"lr", lr},
          {"lr_schedule", lr_schedule},
          {"lr_final", lr_final},
          {"warmup_updates", warmup_updates},
          {"adam_beta1", adam_beta1},
          {"adam_beta2", adam_beta2},
          {"adam_eps", adam_eps},
          {"max_grad_norm", max_grad_norm},
          {"target_kl", target_kl},
          {"baseline", baseline},
          {"baseline_decay", baseline_decay},
          {"normalize_advantages", normalize_advantages},
          {"reward", reward},
          {"min_valid_reward", min_valid_reward},
          {"invalid_reward", invalid_reward},
          {"oom_excess_penalty", oom_excess_penalty},
          {"training", training},
          {"colocate", colocate},
          {"anchor_placements", anchor_placements},
          {"anchor_ties", anchor_ties},
          {"anchor_expert", anchor_expert},
          {"reanchor", reanchor},
          {"block_moves", block_moves},
          {"block_base", block_base},
          {"alt_starts", alt_starts},
          {"alt_start_moves", alt_start_moves},
          {"alt_start_margin", alt_start_margin},
          {"path_moves", path_moves},
          {"path_chains", path_chains},
          {"gather_moves", gather_moves},
          {"threads", threads},
          {"checkpoint_every", checkpoint_every},
          {"seed", seed}};
}

TrainConfig TrainConfig::from_json(const nlohmann::json& j, const std::string& where) {
  GO_CHECK(j.is_object(), where, ": expected a JSON object, got ", j.dump());
  TrainConfig c;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const nlohmann::json& v = it.value();
    const JsonField f{where, k, v};
    if (k == "type") {
      f.type("go_ppo");
    } else if (k == "policy") c.policy = policy::PolicyConfig::from_json(v, where + ": policy");
    else if (k == "updates") f.integer(c.updates);
    else if (k == "samples") f.integer(c.samples);
    else if (k == "graphs_per_update") f.integer(c.graphs_per_update);
    else if (k == "epochs") f.integer(c.epochs);
    else if (k == "trainable") f.string(c.trainable);
    else if (k == "minibatch") f.integer(c.minibatch);
    else if (k == "clip") f.number(c.clip);
    else if (k == "ratio") f.string(c.ratio);
    else if (k == "entropy_coef") f.number(c.entropy_coef);
    else if (k == "value_coef") f.number(c.value_coef);
    else if (k == "lr") f.number(c.lr);
    else if (k == "lr_schedule") f.string(c.lr_schedule);
    else if (k == "lr_final") f.number(c.lr_final);
    else if (k == "warmup_updates") f.integer(c.warmup_updates);
    else if (k == "adam_beta1") f.number(c.adam_beta1);
    else if (k == "adam_beta2") f.number(c.adam_beta2);
    else if (k == "adam_eps") f.number(c.adam_eps);
    else if (k == "max_grad_norm") f.number(c.max_grad_norm);
    else if (k == "target_kl") f.number(c.target_kl);
    else if (k == "baseline") f.string(c.baseline);
    else if (k == "baseline_decay") f.number(c.baseline_decay);
    else if (k == "normalize_advantages") f.boolean(c.normalize_advantages);
    else if (k == "reward") f.string(c.reward);
    else if (k == "min_valid_reward") f.number(c.min_valid_reward);
    else if (k == "invalid_reward") f.number(c.invalid_reward);
    else if (k == "oom_excess_penalty") f.number(c.oom_excess_penalty);
    else if (k == "training") f.boolean(c.training);
    else if (k == "colocate") f.boolean(c.colocate);
    else if (k == "anchor_placements") f.string(c.anchor_placements);
    else if (k == "anchor_ties") f.string(c.anchor_ties);
    else if (k == "anchor_expert") f.string(c.anchor_expert);
    else if (k == "reanchor") f.boolean(c.reanchor);
    else if (k == "block_moves") f.number(c.block_moves);
    else if (k == "block_base") f.string(c.block_base);
    else if (k == "alt_starts") f.integer(c.alt_starts);
    else if (k == "alt_start_moves") f.number(c.alt_start_moves);
    else if (k == "alt_start_margin") f.number(c.alt_start_margin);
    else if (k == "path_moves") f.integer(c.path_moves);
    else if (k == "path_chains") f.integer(c.path_chains);
    else if (k == "gather_moves") f.integer(c.gather_moves);
    else if (k == "threads") f.integer(c.threads);
    else if (k == "checkpoint_every") f.integer(c.checkpoint_every);
    else if (k == "seed") f.seed(c.seed);
    else {
      GO_FAIL(where, ": unknown key \"", k, "\" (known: type, policy, updates, samples, graphs_per_update, epochs, "
                     "trainable, minibatch, clip, ratio, entropy_coef, value_coef, lr, lr_schedule, lr_final, warmup_updates, "
                     "adam_beta1, adam_beta2, adam_eps, max_grad_norm, target_kl, baseline, baseline_decay, "
                     "normalize_advantages, reward, min_valid_reward, invalid_reward, oom_excess_penalty, training, colocate, anchor_placements, anchor_ties, anchor_expert, reanchor, block_moves, block_base, alt_starts, alt_start_moves, alt_start_margin, path_moves, path_chains, gather_moves, "
                     "threads, "
                     "checkpoint_every, seed)");
    }
  }
  try {  // a value out of range names the config it came from
    c.validate();
  } catch (const Error& e) {
    GO_FAIL(where, ": ", e.what());
  }
  return c;
}

TrainConfig TrainConfig::from_saved_json(nlohmann::json j, const std::string& where) {
  if (j.is_object() && j.contains("policy")) j["policy"] = policy::PolicyConfig::legacy_policy_json(j["policy"]);
  return from_json(j, where);
}

TrainConfig TrainConfig::parse(const std::string& text, const std::string& where) {
  return from_json(parse_json_config(text, where, /*comments=*/true), where);
}

}  // namespace go::rl
