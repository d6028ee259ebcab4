#pragma once
// All autograd ops.
#include "go/autograd/aggregate.hpp"
#include "go/autograd/attention.hpp"
#include "go/autograd/ops_elementwise.hpp"
#include "go/autograd/ops_linear.hpp"
#include "go/autograd/ops_norm.hpp"
#include "go/autograd/ops_reduce.hpp"
#include "go/autograd/ops_sample.hpp"
#include "go/autograd/ops_shape.hpp"
#include "go/autograd/variable.hpp"
