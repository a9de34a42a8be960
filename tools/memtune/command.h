// The subcommand table entry and the helpers every subcommand shares: exit codes, the
// one-line error at the CLI edge, --format, and CLI11 parsing with friendly errors.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <string_view>

#include "memtune/core/result.h"

namespace memtune::cli {

// Process exit codes (docs/cli.md).
enum ExitCode : int {
  kExitOk = 0,        // success; for check/lint: no findings
  kExitFindings = 1,  // violations found, or --fail-if-oom and the job does not fit
  kExitUsage = 2,     // usage or input error
  kExitInternal = 3,  // a bug in memtune
};

// One row of the subcommand table in main.cc.
struct Command {
  const char* name;
  const char* summary;                // one line for `memtune --help`
  int (*run)(int argc, char** argv);  // argv[0] is the subcommand name
};

enum class OutputFormat { kText, kJson };

// A CLI11 check refusing NaN and infinities (CLI::Range lets NaN through: no comparison holds).
CLI::Validator FiniteNumber();

// Adds `--format text|json` (default text).
void AddFormatOption(CLI::App& app, OutputFormat& format);

// Parses argv into `app` (named "memtune <command>"). Returns -1 when the command should go on;
// otherwise the exit code to return: 0 after printing --help to stdout, kExitUsage after printing
// one error line (with a did-you-mean for unknown options) to stderr.
int ParseArgs(CLI::App& app, int argc, char** argv);

// Prints "memtune <command>: error: <field: message>[; <hint>]" to stderr and returns the
// exit code for the error (kExitInternal for ErrorCode::kInternal, else kExitUsage). Words
// over kMaxMessageWordChars (a huge quoted value) are cut by ElideLongWords, here and in the
// error LastError returns.
int PrintError(std::string_view command, const Error& error);

// Prints "memtune <command>: warning: <text>" to stderr, long words cut as by PrintError.
void PrintWarning(std::string_view command, std::string_view text);

}  // namespace memtune::cli
