// gopt: the command-line front end of the go library.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <string>

#include "go/version.hpp"

int main(int argc, char** argv) {
  CLI::App app{"gopt: learn placement, scheduling and fusion of ML dataflow graphs for multi-GPU machines"};
  app.set_version_flag("--version", std::string("gopt ") + GO_VERSION_STRING);
  app.require_subcommand(0, 1);
  CLI11_PARSE(app, argc, argv);
  if (app.get_subcommands().empty()) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  }
  return 0;
}
