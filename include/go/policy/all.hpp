#pragma once
// The GO policy: configuration, graph features, the network, decoding.
#include "go/policy/config.hpp"
#include "go/policy/decode.hpp"
#include "go/policy/features.hpp"
#include "go/policy/policy.hpp"
