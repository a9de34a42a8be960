// Reading a bash launch script the way bash would for its static forms, without running it.
//
// Megatron-LM's example scripts build the training command in bash: `VAR=value`, arrays
// `ARR=(...)` used as `${ARR[@]}`, defaults `${VAR:-default}`, `$((...))` arithmetic,
// `export`, line continuations, `source` of a sibling file and sbatch heredocs. This reader
// performs those expansions (following the GNU Bash Reference Manual, sections 3.1.2 Quoting,
// 3.4 Shell Parameters, 3.5 Shell Expansions, 3.6.6 Here Documents, 6.5 Shell Arithmetic
// and 6.7 Arrays) and finds the training command. Nothing is ever executed: `$(...)` and
// backticks are reported, never run; the only file access is the caller's `read_file`.
//
// What it does not do: loops are not run and `if` blocks are read straight through (every
// branch's assignments, the later one wins); functions are not called; pattern operators
// (`${VAR%/*}`, `${VAR/a/b}`) are reported as unresolved.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "memtune/core/result.h"

namespace memtune::model {

// The inputs of ReadLaunchScript besides the script text.
struct ScriptOptions {
  // Variables the caller sets (the CLI's --env NAME=VALUE). They win over the script's own
  // assignments, and over positional parameters ("1" sets $1). Default: none.
  std::map<std::string, std::string> variables;
  // Reads the file named by `source FILE` / `. FILE`, with FILE as written after expansion
  // (the caller resolves it against the script's folder). nullptr (default): sourcing is not
  // done and is named in `notes`; the variables it would set then show up as unresolved.
  std::function<Result<std::string>(const std::string& path)> read_file;
  // The script's name in ScriptPosition::file (a sourced file is named as `source` wrote
  // it). Default: "".
  std::string file_name;
  // False: a script without a training command is not an error; `command` is then empty
  // and every assignment is before it (lint reads environment files this way). Default: true.
  bool require_command = true;
};

// Where a word was written: the file (ScriptOptions::file_name, or the path a `source`
// named), its 1-based line and 1-based column in bytes. Words of an `eval`, `bash -c` or
// heredoc body count their columns within that text.
struct ScriptPosition {
  std::string file;
  int line = 0;
  int column = 0;
};

// One variable assignment the reader met, in script order (`memtune lint` reads these).
struct ScriptAssignment {
  std::string name;
  std::string value;           // expanded; "" when not static
  bool is_static = true;       // false when the value needs a $(...) or an unset variable
  bool exported = false;       // `export NAME=v`, `declare -x`, or `export NAME` (value as set)
  bool prefix = false;         // `NAME=v cmd` (also `env NAME=v cmd`): only cmd sees it
  bool of_command = false;     // a prefix of the training command
  bool after_command = false;  // met after the training command, so it does not see it
  ScriptPosition at;           // of the assignment word
};

// One word of the training command and where it was written: `text` is the expanded
// field; `raw` the word as written (e.g. "${ARGS[@]}", which gives several fields).
struct ScriptWord {
  std::string text;
  std::string raw;
  ScriptPosition at;
};

// A variable (or a `$(...)` substitution) the training command needs but the script never
// sets. `line` is 1-based, in the file where it was used.
struct UnresolvedVariable {
  std::string name;  // "NUM_LAYERS", "1" for $1, or "$(hostname)" for a substitution
  int line = 0;
};

// What ReadLaunchScript found.
struct LaunchScript {
  // The training command, static expansions done, on one line, every word quoted so that
  // MegatronArgsToJobNode reads back the same words. Command-prefix assignments are in
  // `env`, not here. Example: "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 96".
  std::string command;
  // Exported variables at the training command, and its `VAR=value` prefix assignments.
  // Values that would need a `$(...)` are left out (and named in `notes`).
  std::map<std::string, std::string> env;
  // Node count and processes (GPUs) per node, from the launcher (torchrun --nnodes /
  // --nproc_per_node, deepspeed --num_nodes / --num_gpus, srun -N / --ntasks-per-node),
  // else from #SBATCH --nodes / --gpus-per-node / --ntasks-per-node. nullopt = not given.
  std::optional<int> nnodes, nproc_per_node;
  // Every `$X` the training command uses whose value the script never sets, in the order
  // they appear (a variable assigned from an unset one names the unset one).
  std::vector<UnresolvedVariable> unresolved;
  // What was read approximately or skipped, one line each:
  // "$(hostname) not expanded (line 12)", "if/fi block read straight through (line 30)".
  std::vector<std::string> notes;
  // Where the training command starts (line 0 when there is none, see require_command).
  ScriptPosition command_at;
  // The command's words, one per word of `command` (prefix assignments left out).
  std::vector<ScriptWord> words;
  // Every assignment met, in script order, with where it was written.
  std::vector<ScriptAssignment> assignments;
};

// True when `text` looks like a shell script rather than a YAML/JSON job: it starts with
// "#!", or a line starts with a launcher (torchrun, deepspeed, srun, python ...) or runs a
// pretrain_*.py script.
bool LooksLikeLaunchScript(std::string_view text);

// Reads `text` as a bash script and returns its last training command: the last command
// that runs a Python training script (pretrain_*.py, or any *.py followed by --flags) with
// torchrun, python -m torch.distributed.run|launch, srun [opts] python, deepspeed or python.
// Words launcher flags such as --master_addr need are not required to resolve (a note).
// Errors: kInvalidInput with field "JOB" when no training command is found, the script is
// over 1 MiB, an expansion nests deeper than 32 levels (also `source`) or grows over 1 MiB
// (64 MiB over the whole script), or a quote, `$(`, `${`, array or heredoc is not closed
// (field "line N").
//
// Example:
//   auto s = ReadLaunchScript("L=4\nARGS=(--num-layers $L)\n"
//                             "torchrun --nproc_per_node 8 pretrain_gpt.py ${ARGS[@]}\n", {});
//   s->command == "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 4"
//   *s->nproc_per_node == 8
Result<LaunchScript> ReadLaunchScript(std::string_view text, const ScriptOptions& options);

}  // namespace memtune::model
