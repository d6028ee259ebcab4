// gopt: the command-line front end of the go library.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "calibrate.hpp"
#include "demo.hpp"
#include "eval.hpp"
#include "format.hpp"
#include "info.hpp"
#include "place.hpp"
#include "simulate.hpp"
#include "train.hpp"
#include "go/core/error.hpp"
#include "go/rl/place_go.hpp"
#include "go/version.hpp"

#ifndef GO_DEFAULT_POLICY
#define GO_DEFAULT_POLICY ""
#endif

int main(int argc, char** argv) {
  CLI::App app{"gopt: learn placement, scheduling and fusion of ML dataflow graphs for multi-GPU machines"};
  app.set_version_flag("--version", std::string("gopt ") + GO_VERSION_STRING);
  app.require_subcommand(0, 1);
  gopt::one_line_parse_errors(app);
  // the RL methods join the baselines in `place` and `eval`; GO_POLICY overrides the shipped policy
  const char* env_policy = std::getenv("GO_POLICY");
  go::rl::register_go_methods(env_policy && *env_policy ? env_policy : GO_DEFAULT_POLICY);
  add_info_command(app);
  gopt::add_simulate_command(app);
  gopt::add_place_command(app);
  gopt::add_eval_command(app);
  gopt::add_train_command(app);
  gopt::add_calibrate_command(app);
  gopt::add_demo_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const go::Error& e) {
    std::fprintf(stderr, "gopt: %s\n", e.what());
    return 1;
  }
  if (app.get_subcommands().empty()) std::fputs(app.help().c_str(), stdout);
  return 0;
}
