#pragma once
// `gopt simulate <graph> --cluster <preset|file> [--plan plan.json] [--training] [--trace out.json]
//                [--repeat N] [--cost measured|roofline] [--json] [--no-colocation]`: one simulated step of a graph on a cluster.
#include <CLI/CLI.hpp>

namespace gopt {

// Registers the `simulate` subcommand on `app`. On a go::Error (a bad graph, cluster or plan file)
// it prints one line `gopt simulate: <problem>` to stderr and the program exits with status 1. An
// invalid plan (out of memory, bad fusion, ...) is a result, not an error: it is printed with its
// reason and the exit status is 0.
void add_simulate_command(CLI::App& app);

}  // namespace gopt
