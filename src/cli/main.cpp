// Entry point of the `sluice` command line: builds the CLI11 app from the subcommands in
// commands.hpp and maps every way a command can end onto an exit code, so scripts can tell a bad
// input (1) from a bad invocation (2) without parsing messages.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <iostream>
#include <new>

#include "cli/commands.hpp"
#include "cli/console.hpp"
#include "sluice/core/error.hpp"

namespace {

int run(int argc, char** argv) {
  CLI::App app{"sluice: image data loading for training, fused, inside a memory budget",
               "sluice"};
  app.set_version_flag("--version", std::string("sluice ") + SLUICE_VERSION);
  app.require_subcommand(1);
  app.fallthrough(false);

  sluice::cli::add_prepare_command(app);
  sluice::cli::add_inspect_command(app);
  sluice::cli::add_bench_command(app);
  sluice::cli::add_sweep_command(app);
  sluice::cli::add_train_command(app);
  sluice::cli::add_plan_command(app);

  try {
    app.parse(argc, argv);  // runs the chosen subcommand's callback
  } catch (const CLI::ParseError& e) {
    // CLI11 prints help/version (exit 0) or the usage error; its own codes are 100+, and callers
    // expect the POSIX convention of 2 for a bad invocation.
    const int code = app.exit(e);
    return code == 0 ? 0 : sluice::cli::kExitUsage;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Commands print long reports line by line; full buffering of stdout keeps that cheap when it
  // is a pipe, and errors go to unbuffered stderr after stdout is flushed.
  std::ios::sync_with_stdio(false);
  int code = 0;
  try {
    code = run(argc, argv);
  } catch (const sluice::Error& e) {
    std::cout.flush();
    std::cerr << "sluice: " << e.what() << '\n';
    code = e.code() == sluice::ErrorCode::kCancelled ? sluice::cli::InterruptGuard::exit_status()
                                                     : sluice::cli::kExitFailure;
  } catch (const std::bad_alloc&) {
    std::cout.flush();
    std::cerr << "sluice: out of memory\n";
    code = sluice::cli::kExitFailure;
  } catch (const std::exception& e) {
    std::cout.flush();
    std::cerr << "sluice: " << e.what() << '\n';
    code = sluice::cli::kExitFailure;
  }
  std::cout.flush();
  return code;
}
