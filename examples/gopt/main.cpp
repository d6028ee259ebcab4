// gopt: the command-line front end of the go library.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <string>

#include "demo.hpp"
#include "eval.hpp"
#include "info.hpp"
#include "place.hpp"
#include "simulate.hpp"
#include "train.hpp"
#include "go/core/error.hpp"
#include "go/version.hpp"

int main(int argc, char** argv) {
  CLI::App app{"gopt: learn placement, scheduling and fusion of ML dataflow graphs for multi-GPU machines"};
  app.set_version_flag("--version", std::string("gopt ") + GO_VERSION_STRING);
  app.require_subcommand(0, 1);
  add_info_command(app);
  gopt::add_simulate_command(app);
  gopt::add_place_command(app);
  gopt::add_eval_command(app);
  gopt::add_train_command(app);
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
