#pragma once
// `gopt eval --graphs <g1,g2,...> --cluster C --methods <m1,m2,...> [--training] [--seed S]
//            [--budget N] [--fusion none|xla] [--cost measured|roofline] [--csv out.csv]`: every
// method on every graph. Prints a markdown table: one row per graph, one column per method with the
// simulated step time in ms (or OOM) and the seconds the method took to optimize, and a last row
// with each method's geometric-mean ratio of step time to `human` over the graphs where both fit.
// `zoo:all` in --graphs stands for every zoo workload. --csv writes one line per (graph, method).
// Errors: `gopt eval: <problem>`.
#include <CLI/CLI.hpp>

namespace gopt {

void add_eval_command(CLI::App& app);

}  // namespace gopt
