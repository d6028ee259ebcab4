#pragma once
// `gopt place <graph> --cluster C --method M [--seed S] [--budget N] [--fusion none|xla]
//             [--training] [--cost measured|roofline] [--out plan.json] [--json]`: run one placement
// optimizer (include/go/baselines/place.hpp; `--method` help lists the registered methods), simulate its plan
// and write it as a go-plan. A plan that does not fit is reported (valid: no, with the reason) and
// still written; exit status 0. Bad inputs: one line `gopt place: <problem>` on stderr, status 1.
#include <CLI/CLI.hpp>

namespace gopt {

void add_place_command(CLI::App& app);

}  // namespace gopt
