#pragma once
// go/rl: PPO training of the GO policy (config, trainer, checkpoints, metrics).
#include "go/rl/config.hpp"
#include "go/rl/path_moves.hpp"
#include "go/rl/anchor.hpp"
#include "go/rl/metrics.hpp"
#include "go/rl/place_go.hpp"
#include "go/rl/ppo.hpp"
#include "go/rl/ppo_loss.hpp"
