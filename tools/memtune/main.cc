// memtune: the subcommand table. Each subcommand lives in cmd_<name>.cc.
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "command.h"
#include "commands.h"
#include "memtune/core/suggest.h"

namespace {

using memtune::cli::Command;

constexpr const char* kVersion = "0.1.0";

// The subcommand table: name, one-line summary, entry point.
const Command kCommands[] = {
#define MEMTUNE_COMMAND(name, summary, fn) {name, summary, fn},
#include "commands.inc"
#undef MEMTUNE_COMMAND
};

void PrintUsage(std::ostream& out) {
  out << "memtune " << kVersion
      << ": will this training job fit in GPU memory, why did it run out, what fixes it\n\n"
         "Usage: memtune <command> [options]   (memtune <command> --help for details)\n\n"
         "Commands:\n";
  for (const Command& c : kCommands) {
    std::string name = c.name;
    name.resize(12, ' ');
    out << "  " << name << c.summary << "\n";
  }
  out << "\nExample:\n  memtune check --example llama3-70b-32xh100\n";
}

int Dispatch(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h" ||
      std::string(argv[1]) == "help") {
    PrintUsage(std::cout);
    return argc < 2 ? memtune::cli::kExitUsage : memtune::cli::kExitOk;
  }
  const std::string name = argv[1];
  if (name == "--version" || name == "version") {
    std::cout << "memtune " << kVersion << "\n";
    return memtune::cli::kExitOk;
  }
  std::vector<std::string> names;
  for (const Command& c : kCommands) {
    if (name == c.name) return c.run(argc - 1, argv + 1);
    names.push_back(c.name);
  }
  std::string hint = memtune::DidYouMean(name, names);
  std::cerr << "memtune: error: unknown command '" << name << "'"
            << (hint.empty() ? "" : "; " + hint) << "\n(run 'memtune --help' for the list)\n";
  return memtune::cli::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const int code = Dispatch(argc, argv);
    // A full disk or a closed pipe loses the report: say so rather than exit 0.
    if (!std::cout.flush()) {
      std::cerr << "memtune: error: writing standard output failed\n";
      return code == memtune::cli::kExitOk ? memtune::cli::kExitFindings : code;
    }
    return code;
  } catch (const std::exception& e) {
    std::cerr << "memtune: internal error: " << e.what() << "\n";
    return memtune::cli::kExitInternal;
  }
}
