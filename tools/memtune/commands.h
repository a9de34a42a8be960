// Entry points of the subcommands, one per cmd_<name>.cc. argv[0] is the subcommand name.
#pragma once

namespace memtune::cli {

int RunUnits(int argc, char** argv);

}  // namespace memtune::cli
