// memtune: the command-line tool. The command table lives in the memtune_cli library (cli.h),
// which the Python extension (python/) runs too.
#include "cli.h"

int main(int argc, char** argv) { return memtune::cli::RunCli(argc, argv); }
