#pragma once
// The whole public API of the go library.
#include "go/autograd/autograd.hpp"
#include "go/core/core.hpp"
#include "go/core/cuda.hpp"
#include "go/core/file.hpp"
#include "go/nn/module.hpp"
#include "go/nn/serialize.hpp"
#include "go/optim/adam.hpp"
#include "go/version.hpp"
