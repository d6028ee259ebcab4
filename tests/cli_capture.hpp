#pragma once
// Runs gopt subcommands in-process with stdout/stderr captured (for the CLI tests): the caller
// registers the subcommands it links (e.g. add_place_command from examples/gopt/place.cpp).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "format.hpp"  // gopt's, on the include path of gopt_commands (examples/gopt)

namespace go::test {

struct CliResult {
  int code = 0;
  std::string out, err;
};

inline std::string slurp_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// `gopt <args...>` with the subcommands `add` registers; the exit code is what gopt's main returns.
inline CliResult run_cli(const std::function<void(CLI::App&)>& add, const std::vector<std::string>& args) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path();
  const std::string tag = std::to_string(std::random_device{}());
  const fs::path out_path = dir / ("go_cli_out_" + tag), err_path = dir / ("go_cli_err_" + tag);
  std::fflush(stdout);
  std::fflush(stderr);
  std::cout.flush();
  const int saved_out = dup(1), saved_err = dup(2);
  FILE* fo = std::fopen(out_path.c_str(), "w");
  FILE* fe = std::fopen(err_path.c_str(), "w");
  dup2(fileno(fo), 1);
  dup2(fileno(fe), 2);
  CliResult r;
  {
    CLI::App app{"gopt"};
    app.require_subcommand(0, 1);
    gopt::one_line_parse_errors(app);  // as gopt's main
    add(app);
    std::vector<std::string> argv_s{"gopt"};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<const char*> argv;
    for (auto& s : argv_s) argv.push_back(s.c_str());
    try {
      app.parse(static_cast<int>(argv.size()), argv.data());
    } catch (const CLI::ParseError& e) {
      r.code = app.exit(e);
    }
  }
  std::cout.flush();
  std::fflush(stdout);
  std::fflush(stderr);
  dup2(saved_out, 1);
  dup2(saved_err, 2);
  close(saved_out);
  close(saved_err);
  std::fclose(fo);
  std::fclose(fe);
  r.out = slurp_file(out_path);
  r.err = slurp_file(err_path);
  fs::remove(out_path);
  fs::remove(err_path);
  return r;
}

}  // namespace go::test
