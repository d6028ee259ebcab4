#pragma once
#include <CLI/CLI.hpp>

namespace gopt {
// `gopt demo`: trains a small graph network (GraphSAGE aggregation + segment
// attention) on a synthetic op graph with the library's autodiff and Adam.
void add_demo_command(CLI::App& app);
}  // namespace gopt
