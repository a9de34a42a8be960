// The memtune command line as a function: the binary (main.cc) and the Python extension
// (python/core.cc) run the same subcommand table through it.
#pragma once

#include <optional>

#include "memtune/core/result.h"

namespace memtune::cli {

// Runs `memtune argv[1] argv[2] ...` (argv[0] is the program name): prints to std::cout and
// std::cerr, reads std::cin for '-', and returns the exit code (command.h's ExitCode). An
// exception out of a subcommand is reported as "memtune: internal error" and kExitInternal.
// Not thread-safe: the subcommands share the standard streams and LastError().
int RunCli(int argc, char** argv);

// The error the last subcommand reported through PrintError (command.h), or nothing; RunCli
// clears it first. Callers that need the fields (the Python JobError) read it after RunCli.
const std::optional<Error>& LastError();
void ClearLastError();

}  // namespace memtune::cli
