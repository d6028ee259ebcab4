#pragma once
// `gopt info <graph> [--training] [--json] [--device NAME]`: summary of a computational graph.
#include <CLI/CLI.hpp>

// Registers the `info` subcommand on `app`. On a bad graph it prints one line
// `gopt info: <file>: <problem>` to stderr and the program exits with status 1.
void add_info_command(CLI::App& app);
