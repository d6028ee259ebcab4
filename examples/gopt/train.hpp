#pragma once
// `gopt train --graphs <g1,g2,...> --cluster C [--config cfg.json] [--updates N] [--out ckpt]
//             [--resume] [--metrics m.csv] [--plan-out best.json] [--training] [--seed S]
//             [--threads T] [--quiet]`:
// PPO training of the GO policy (include/go/rl): one graph from scratch, or pre-training on a set.
// A progress line per update (update, best step time and speed-up over the reference, mean reward,
// entropy, samples/s, ETA) on stderr; metrics per update to CSV (default <out>.csv); a checkpoint
// (policy + Adam + counters + config + best plans) every "checkpoint_every" updates and at the end;
// --resume continues from <out> and ends identical to an uninterrupted run with the same --updates
// (the learning-rate schedule spans them; the hidden --stop-after N interrupts a run for tests). Bad inputs: one line
// `gopt train: <problem>` on stderr, status 1.
#include <CLI/CLI.hpp>

namespace gopt {

void add_train_command(CLI::App& app);

}  // namespace gopt
