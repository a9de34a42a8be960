// Private pieces of the launch-script reader: the tokenizer (launch_script_lex.cc), the word
// expander (launch_script_expand.cc) and integer arithmetic (launch_script_arith.cc).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "memtune/core/result.h"
#include "memtune/model/launch_script.h"

namespace memtune::model::script {

inline constexpr int kMaxDepth = 32;                        // nested ${...} / source levels
inline constexpr std::size_t kMaxWordBytes = 1 << 20;       // one word or variable
inline constexpr std::size_t kMaxTotalBytes = 64ull << 20;  // everything expanded, in total
inline constexpr int kMaxSourced = 256;                     // `source` commands followed
inline constexpr std::size_t kMaxNotes = 50;                // notes kept; the rest counted

// One word as written (quotes and `$` kept). An array assignment `NAME=(a b)` has
// text "NAME=" and its element words in `elements`.
struct RawWord {
  std::string text;
  int line = 0;    // where the word starts
  int column = 0;  // 1-based, in bytes, on `line`
  bool is_array = false;
  std::vector<std::string> elements;
  std::vector<int> element_lines;  // where each element starts
};

// One simple command: the words between separators (newline ; & && || |).
struct RawCommand {
  std::vector<RawWord> words;
  int line = 0;                        // of the first word
  std::optional<std::string> heredoc;  // the body of the first `<<WORD` of this command
  bool heredoc_quoted = false;         // `<<'EOF'`: the body is not expanded
  int heredoc_line = 0;                // of the body's first line
};

// A tokenized script: its commands and its `#SBATCH` comment lines (text after "#SBATCH").
struct Tokens {
  std::vector<RawCommand> commands;
  std::vector<std::pair<std::string, int>> sbatch;
};

// Splits a script into commands (bash manual 3.2 Shell Commands, 3.1.2 Quoting, 3.6.6).
// Redirections and their targets are dropped. Errors: kInvalidInput "line N" for an
// unterminated quote, `$(`, `${`, backtick, array or heredoc. Lines count from `first_line`.
Result<Tokens> Tokenize(std::string_view text, int first_line = 1);

// A shell variable: a string is a one-element array (bash manual 6.7).
struct Variable {
  std::vector<std::string> values;
  bool is_array = false;
  std::vector<UnresolvedVariable> taint;  // what its value needed but could not resolve
  std::size_t bytes = 0;                  // of all values, one separator byte each
};

inline Variable StringVariable(std::string value) {
  Variable v;
  v.bytes = value.size() + 1;
  v.values.push_back(std::move(value));
  return v;
}

// The state expansions read and write.
struct Shell {
  std::map<std::string, Variable> vars;
  const std::map<std::string, std::string>* fixed = nullptr;  // caller's variables: win
  std::size_t total_bytes = 0;                                // expanded so far
};

// The fields one word expands to, and what it could not resolve.
struct Expansion {
  std::vector<std::string> fields;
  std::vector<UnresolvedVariable> unresolved;
  std::vector<std::string> notes;
};

// Expands one raw word: parameters, arithmetic, quote removal and word splitting of
// unquoted results (bash manual 3.5). `$(...)` and backticks become empty text plus an
// unresolved entry. `${VAR:=x}` assigns in `shell`. Errors: nesting deeper than kMaxDepth,
// a result over kMaxWordBytes or a total over kMaxTotalBytes.
Result<Expansion> ExpandWord(const std::string& raw, int line, Shell& shell);

// Expands a word as an assignment value: no word splitting, fields joined by a space.
Result<Expansion> ExpandValue(const std::string& raw, int line, Shell& shell);

// Looks a variable up: the caller's fixed value first, then the script's. nullptr = unset.
const Variable* FindVariable(const Shell& shell, const std::string& name, Variable& scratch);

// Evaluates `expr` (its $ expansions already done) as integer arithmetic: literals, names
// (their values read as integers), + - * / % and parentheses (bash manual 6.5). Unset names
// count as 0 and are added to `unresolved`. Errors: kInvalidInput for anything else,
// division by zero or 64-bit overflow.
Result<std::int64_t> EvaluateArithmetic(std::string_view expr, int line, const Shell& shell,
                                        std::vector<UnresolvedVariable>& unresolved);

// Node and per-node process counts read from launcher or #SBATCH words.
struct Counts {
  std::optional<int> nodes;  // --nnodes, --num_nodes, --nodes, -N
  std::optional<int> procs;  // --nproc_per_node, --num_gpus, --ntasks-per-node
  std::optional<int> gpus;   // --gpus-per-node, --gres=gpu:N (used when procs is not given)
};

// Reads the count flags among `words` ("--nnodes=2", "--nnodes 2", "-N2", "--gres=gpu:8");
// a later flag wins. Returns the indices of the words holding a count flag or its value.
std::vector<std::size_t> ReadCounts(const std::vector<std::string>& words, Counts& counts);

// The index of the Python training script in an expanded command, or nullopt when the
// command is not a training command (see ReadLaunchScript).
std::optional<std::size_t> FindTrainingScript(const std::vector<std::string>& fields);

// The words joined by spaces, each quoted when SplitShellWords would otherwise change it.
std::string QuoteWords(const std::vector<std::string>& words);

// "NAME=", "NAME+=" (append = true) at the start of `text` -> NAME; "" when `text` does not
// start an assignment (bash manual 3.4).
std::string AssignedName(const std::string& text, bool& append);
bool IsAssignment(const RawWord& word);

// An unquoted heredoc body as the script it submits: the backslash of \$, \` and \\ removed
// and \<newline> joined (bash manual 3.6.6). Its $ expansions are left to the reader.
std::string HeredocText(const std::string& body);

// The index one past the matching close of an opening at `open` (`$(` -> `)`, `${` -> `}`,
// `$((` -> `))`, a backtick), skipping quoted text; npos when unterminated.
std::size_t FindClose(std::string_view text, std::size_t open);

}  // namespace memtune::model::script
