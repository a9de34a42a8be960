// memtune: the command-line tool. The command table lives in the memtune_cli library (cli.h),
// which the Python extension (python/) runs too.
#include <iostream>

#include "cli.h"
#include "command.h"

int main(int argc, char** argv) {
  const int code = memtune::cli::RunCli(argc, argv);
  // A full disk or a closed pipe loses the report: say so rather than exit 0.
  if (!std::cout.flush()) {
    std::cerr << "memtune: error: writing standard output failed\n";
    return code == memtune::cli::kExitOk ? memtune::cli::kExitFindings : code;
  }
  return code;
}
