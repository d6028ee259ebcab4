#pragma once
#include "go/core/device.hpp"
#include "go/core/dtype.hpp"
#include "go/core/error.hpp"
#include "go/core/host_device.hpp"
#include "go/core/rng.hpp"
#include "go/core/shape.hpp"
#include "go/core/tensor.hpp"
