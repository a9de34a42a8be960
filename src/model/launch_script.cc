// Launch-script reader: runs the static parts of a bash script (assignments, export,
// source, sbatch heredocs) over the tokens of launch_script_lex.cc and keeps the last
// training command. No command is executed.
#include "memtune/model/launch_script.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "model/launch_script_internal.h"

namespace memtune::model {
namespace {

using script::AssignedName;
using script::Counts;
using script::Expansion;
using script::HeredocText;
using script::IsAssignment;
using script::RawCommand;
using script::RawWord;

constexpr std::size_t kMaxScriptBytes = 1 << 20;
constexpr std::size_t kMaxAssignments = 100000;  // recorded for lint; the rest dropped

std::string At(int line) { return " (line " + std::to_string(line) + ")"; }

// The training command as found, before it becomes a LaunchScript.
struct Found {
  std::vector<std::string> fields;
  std::vector<std::pair<std::size_t, UnresolvedVariable>> unresolved;  // at field index
  std::map<std::string, std::string> env;
  std::vector<std::string> notes;
  std::size_t script = 0;         // index of the .py field
  std::vector<ScriptWord> words;  // one per field
  ScriptPosition at;
  std::size_t assigned = 0;                 // assignments met up to and including the command's own
  std::pair<std::size_t, std::size_t> own;  // the command's own prefixes in the assignments
};

class Reader {
 public:
  explicit Reader(const ScriptOptions& options) : options_(options) {
    shell_.fixed = &options.variables;
    files_.push_back(options.file_name);
  }

  Status Run(std::string_view text, int depth, int first_line = 1) {
    if (text.size() > kMaxScriptBytes) return InvalidInput("JOB", "script larger than 1 MiB");
    shell_.total_bytes += text.size();
    if (shell_.total_bytes > script::kMaxTotalBytes) {
      return InvalidInput("JOB", "scripts and expansions larger than 64 MiB in all");
    }
    if (depth > script::kMaxDepth) {
      return InvalidInput("JOB", "source nested deeper than 32 levels");
    }
    MEMTUNE_TRY(const script::Tokens tokens, script::Tokenize(text, first_line));
    Sbatch(tokens.sbatch);
    for (const RawCommand& command : tokens.commands) {
      MEMTUNE_RETURN_IF_ERROR(Command(command, depth));
    }
    return OkStatus();
  }

  Result<LaunchScript> Finish();

 private:
  void Note(std::string note) {
    if (!note_set_.insert(note).second) return;
    if (notes_.size() < script::kMaxNotes) {
      notes_.push_back(std::move(note));
    } else {
      ++notes_left_out_;
    }
  }

  // The #SBATCH lines' counts, and the SLURM_* variables sbatch sets from them (Slurm's
  // sbatch man page, "OUTPUT ENVIRONMENT VARIABLES"), unless the script sets them.
  void Sbatch(const std::vector<std::pair<std::string, int>>& lines) {
    if (lines.empty()) return;
    for (const auto& [line, number] : lines) {
      std::vector<std::string> words;
      std::size_t pos = 0;
      while ((pos = line.find_first_not_of(" \t\r", pos)) != std::string::npos) {
        const std::size_t end = std::min(line.find_first_of(" \t\r", pos), line.size());
        words.push_back(line.substr(pos, end - pos));
        pos = end;
      }
      script::ReadCounts(words, sbatch_);
    }
    const std::pair<const char*, const std::optional<int>*> kSet[] = {
        {"SLURM_JOB_NUM_NODES", &sbatch_.nodes},
        {"SLURM_NNODES", &sbatch_.nodes},
        {"SLURM_GPUS_PER_NODE", &sbatch_.gpus},
        {"SLURM_NTASKS_PER_NODE", &sbatch_.procs}};
    std::string set;
    for (const auto& [name, value] : kSet) {
      if (!value->has_value() || shell_.vars.contains(name)) continue;
      shell_.vars[name] = script::StringVariable(std::to_string(**value));
      set += std::string(set.empty() ? "" : " ") + name + "=" + std::to_string(**value);
    }
    if (!set.empty()) Note("#SBATCH lines set " + set);
  }

  Status Command(const RawCommand& command, int depth);
  Status Builtin(const std::string& name, const RawCommand& command, std::size_t i, int depth);
  Status Source(const RawCommand& command, std::size_t i, int depth);
  Status Eval(const RawCommand& command, std::size_t i, int depth);
  Status Assign(const RawWord& word, int line, std::map<std::string, std::string>* env,
                bool exported = false);
  ScriptPosition PositionOf(const RawWord& word) const {
    return {files_.back(), word.line, word.column};
  }
  void Record(ScriptAssignment a) {
    if (assignments_.size() < kMaxAssignments) assignments_.push_back(std::move(a));
  }
  Status Store(const std::string& name, bool append, const script::Variable& value, int line);
  Status Candidate(const RawCommand& command, std::size_t i, std::map<std::string, std::string> env,
                   int depth);
  Status ShellDashC(const std::vector<std::string>& fields, int line, int depth);
  void RecordExport(const RawWord& word);
  std::map<std::string, std::string> ExportedEnv(std::vector<std::string>& notes) const;

  const ScriptOptions& options_;
  script::Shell shell_;
  std::set<std::string> exported_;
  Counts sbatch_;
  std::vector<std::string> notes_;
  std::set<std::string> note_set_;
  std::size_t notes_left_out_ = 0;
  int sourced_ = 0;
  std::optional<Found> found_;
  std::vector<std::string> files_;  // the file being read, innermost last
  std::vector<ScriptAssignment> assignments_;
  std::pair<std::size_t, std::size_t> prefixes_;  // assignments_ range of the last prefixes
};

Status Reader::Command(const RawCommand& command, int depth) {
  static const std::set<std::string> kPrefixes = {"then", "else", "do", "{", "}", "!", "time"};
  static const std::set<std::string> kSkipped = {
      "if", "elif", "while", "until", "for", "case", "select", "function", "fi", "done", "esac"};
  std::size_t i = 0;
  const auto& words = command.words;
  while (i < words.size() && !words[i].is_array && kPrefixes.contains(words[i].text)) ++i;
  if (i < words.size() && kSkipped.contains(words[i].text)) {
    if (words[i].text == "if") Note("if/fi block read straight through" + At(command.line));
    return OkStatus();
  }
  const std::size_t first = i;
  while (i < words.size() && IsAssignment(words[i])) ++i;
  if (i == words.size()) {
    for (std::size_t a = first; a < i; ++a) {
      MEMTUNE_RETURN_IF_ERROR(Assign(words[a], command.line, nullptr));
    }
    return OkStatus();
  }
  return Builtin(words[i].text, command, i, depth);
}

Status Reader::Builtin(const std::string& name, const RawCommand& command, std::size_t i,
                       int depth) {
  const auto& words = command.words;
  if (name == "export" || name == "declare" || name == "typeset" || name == "local" ||
      name == "readonly") {
    bool exported = name == "export";
    for (std::size_t j = i + 1; j < words.size(); ++j) {
      const std::string& text = words[j].text;
      if (!words[j].is_array && text.rfind('-', 0) == 0) {
        exported = exported || text.find('x') != std::string::npos;
        continue;
      }
      bool append = false;
      const std::string var = AssignedName(text, append);
      if (var.empty() && !text.empty()) {
        if (exported) RecordExport(words[j]);
        continue;
      }
      MEMTUNE_RETURN_IF_ERROR(Assign(words[j], command.line, nullptr, exported));
      if (exported) exported_.insert(var);
    }
    return OkStatus();
  }
  if (name == "unset") {
    for (std::size_t j = i + 1; j < words.size(); ++j) shell_.vars.erase(words[j].text);
    return OkStatus();
  }
  if ((name == "source" || name == ".") && i + 1 < words.size()) {
    return Source(command, i, depth);
  }
  if (name == "eval") return Eval(command, i, depth);
  if (name == "sbatch" && command.heredoc) {
    return Run(command.heredoc_quoted ? *command.heredoc : HeredocText(*command.heredoc), depth + 1,
               command.heredoc_line);
  }
  std::map<std::string, std::string> env;
  prefixes_.first = assignments_.size();
  for (std::size_t a = 0; a < i; ++a) {
    if (IsAssignment(words[a])) MEMTUNE_RETURN_IF_ERROR(Assign(words[a], command.line, &env));
  }
  prefixes_.second = assignments_.size();
  return Candidate(command, i, std::move(env), depth);
}

Status Reader::Source(const RawCommand& command, std::size_t i, int depth) {
  MEMTUNE_TRY(const Expansion path,
              script::ExpandValue(command.words[i + 1].text, command.line, shell_));
  const std::string& file = path.fields[0];
  if (!path.unresolved.empty()) {
    Note("source " + command.words[i + 1].text + " not read: its path is not static" +
         At(command.line));
    return OkStatus();
  }
  if (!options_.read_file) {
    Note("source " + file + " not read" + At(command.line));
    return OkStatus();
  }
  Result<std::string> text = options_.read_file(file);
  if (!text) {
    Note("source " + file + " not read: " + text.error().Describe() + At(command.line));
    return OkStatus();
  }
  if (++sourced_ > script::kMaxSourced) {
    return InvalidInput("JOB", "more than " + std::to_string(script::kMaxSourced) +
                                   " files sourced" + At(command.line));
  }
  if (depth + 1 > script::kMaxDepth) {
    return InvalidInput("JOB", "source nested deeper than 32 levels" + At(command.line));
  }
  files_.push_back(file);
  Status status = Run(*text, depth + 1);
  files_.pop_back();
  return status;
}

// `eval WORDS`: the expanded words, joined by spaces, read again as a command (bash manual
// 4.1 Bourne Shell Builtins).
Status Reader::Eval(const RawCommand& command, std::size_t i, int depth) {
  std::string text;
  for (std::size_t w = i + 1; w < command.words.size(); ++w) {
    MEMTUNE_TRY(const Expansion e,
                script::ExpandWord(command.words[w].text, command.words[w].line, shell_));
    for (const UnresolvedVariable& u : e.unresolved) {
      Note("eval of $" + u.name + ", which is not set" + At(u.line));
    }
    for (const std::string& field : e.fields) text += (text.empty() ? "" : " ") + field;
  }
  return Run(text, depth + 1, command.line);
}

// NAME=value, NAME+=value, NAME=(...), NAME+=(...). With `env`, the value goes there (a
// command prefix) instead of the shell. The caller's variables win over the script's.
Status Reader::Assign(const RawWord& word, int line, std::map<std::string, std::string>* env,
                      bool exported) {
  bool append = false;
  const std::string name = AssignedName(word.text, append);
  const std::string raw = word.text.substr(name.size() + (append ? 2 : 1));
  script::Variable value;
  value.is_array = word.is_array;
  std::vector<std::string> notes;
  const auto take = [&](Expansion&& e) {
    for (std::string& field : e.fields) value.values.push_back(std::move(field));
    for (UnresolvedVariable& u : e.unresolved) {
      // A substitution cannot be set with --env; the variable that holds it can.
      const bool substitution = u.name[0] == '$' || u.name[0] == '`';
      value.taint.push_back(substitution ? UnresolvedVariable{name, line} : u);
    }
    for (std::string& n : e.notes) notes.push_back(std::move(n));
  };
  if (word.is_array) {
    for (std::size_t i = 0; i < word.elements.size(); ++i) {
      MEMTUNE_TRY(Expansion e, script::ExpandWord(word.elements[i], word.element_lines[i], shell_));
      take(std::move(e));
    }
  } else {
    MEMTUNE_TRY(Expansion e, script::ExpandValue(raw, line, shell_));
    take(std::move(e));
  }
  ScriptAssignment record;
  record.name = name;
  record.is_static = value.taint.empty();
  record.exported = exported;
  record.prefix = env != nullptr;
  if (record.is_static) {
    for (std::size_t i = 0; i < value.values.size(); ++i)
      record.value += (i ? " " : "") + value.values[i];
  }
  record.at = PositionOf(word);
  if (append && record.is_static) {
    script::Variable scratch;
    const script::Variable* old = script::FindVariable(shell_, name, scratch);
    if (old != nullptr && !old->values.empty() && !old->is_array)
      record.value = old->values[0] + record.value;
  }
  Record(std::move(record));
  if (exported) exported_.insert(name);
  if (shell_.fixed->contains(name)) return OkStatus();
  for (std::string& n : notes) Note(std::move(n));
  if (env != nullptr) {
    if (value.taint.empty()) (*env)[name] = value.values.empty() ? "" : value.values[0];
    return OkStatus();
  }
  return Store(name, append, value, line);
}

// Sets or appends to a shell variable, keeping its size within kMaxWordBytes.
Status Reader::Store(const std::string& name, bool append, const script::Variable& value,
                     int line) {
  script::Variable& var = shell_.vars[name];
  if (!append) var = script::Variable{};
  if (var.values.empty() || value.is_array || var.is_array) {
    for (const std::string& v : value.values) var.bytes += v.size() + 1;
    var.values.insert(var.values.end(), value.values.begin(), value.values.end());
  } else if (!value.values.empty()) {
    var.bytes += value.values[0].size();
    var.values[0] += value.values[0];
  }
  var.is_array = var.is_array || value.is_array;
  if (var.taint.size() < script::kMaxNotes) {
    var.taint.insert(var.taint.end(), value.taint.begin(), value.taint.end());
  }
  if (var.bytes > script::kMaxWordBytes) {
    return InvalidInput("line " + std::to_string(line), name + " grows larger than 1 MiB");
  }
  return OkStatus();
}

// `export NAME` without a value: NAME's current value goes into the environment.
void Reader::RecordExport(const RawWord& word) {
  exported_.insert(word.text);
  script::Variable scratch;
  const script::Variable* var = script::FindVariable(shell_, word.text, scratch);
  ScriptAssignment record;
  record.name = word.text;
  record.is_static = var == nullptr || var->taint.empty();
  record.exported = true;
  if (var != nullptr && record.is_static) {
    for (std::size_t i = 0; i < var->values.size(); ++i)
      record.value += (i ? " " : "") + var->values[i];
  }
  record.at = PositionOf(word);
  Record(std::move(record));
}

std::map<std::string, std::string> Reader::ExportedEnv(std::vector<std::string>& notes) const {
  std::map<std::string, std::string> env;
  for (const std::string& name : exported_) {
    script::Variable scratch;
    const script::Variable* var = script::FindVariable(shell_, name, scratch);
    if (var == nullptr || shell_.fixed->contains(name)) continue;
    if (!var->taint.empty()) {
      notes.push_back("exported " + name + " left out of the environment: not static");
      continue;
    }
    std::string value;
    for (std::size_t i = 0; i < var->values.size(); ++i) value += (i ? " " : "") + var->values[i];
    env[name] = value;
  }
  return env;
}

// `bash -c "STRING"` (also after srun, also `bash -x -c`): STRING read as a script, as
// `eval` is.
Status Reader::ShellDashC(const std::vector<std::string>& fields, int line, int depth) {
  for (std::size_t k = 0; k + 2 < fields.size(); ++k) {
    const std::string& shell = fields[k];
    const bool is_shell =
        shell == "bash" || shell == "sh" || shell.ends_with("/bash") || shell.ends_with("/sh");
    if (!is_shell) continue;
    // Options before the string: `bash -x -c STRING`, `bash -lc STRING`.
    for (std::size_t j = k + 1; j + 1 < fields.size() && fields[j].size() > 1 &&
                                fields[j][0] == '-' && fields[j][1] != '-';
         ++j) {
      if (fields[j].find('c') != std::string::npos) return Run(fields[j + 1], depth + 1, line);
    }
  }
  return OkStatus();
}

Status Reader::Candidate(const RawCommand& command, std::size_t i,
                         std::map<std::string, std::string> env, int depth) {
  Found found;
  for (std::size_t w = i; w < command.words.size(); ++w) {
    if (command.words[w].is_array) continue;
    MEMTUNE_TRY(Expansion e,
                script::ExpandWord(command.words[w].text, command.words[w].line, shell_));
    // An unresolved word keeps its place ('') so the flag before it keeps its value slot.
    if (e.fields.empty() && !e.unresolved.empty()) e.fields.emplace_back();
    for (UnresolvedVariable& u : e.unresolved)
      found.unresolved.emplace_back(found.fields.size(), u);
    for (const std::string& field : e.fields) {
      found.words.push_back({field, command.words[w].text, PositionOf(command.words[w])});
    }
    for (std::string& field : e.fields) found.fields.push_back(std::move(field));
    for (std::string& n : e.notes) found.notes.push_back(std::move(n));
  }
  // `env A=1 torchrun ...`: the assignments after env are prefixes too.
  std::size_t start = 0;
  while (start < found.fields.size() &&
         (found.fields[start] == "env" || found.fields[start] == "exec" ||
          found.fields[start] == "nohup" || found.fields[start].find('=') != std::string::npos)) {
    const std::string& f = found.fields[start];
    const std::size_t eq = f.find('=');
    if (eq != std::string::npos && eq > 0) env[f.substr(0, eq)] = f.substr(eq + 1);
    ++start;
  }
  const std::optional<std::size_t> script = script::FindTrainingScript(found.fields);
  if (!script) return ShellDashC(found.fields, command.line, depth);
  for (std::size_t k = 0; k < start; ++k) {
    const std::string& f = found.fields[k];
    const std::size_t eq = f.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    Record({f.substr(0, eq), f.substr(eq + 1), true, false, true, true, false, found.words[k].at});
  }
  found.own = {prefixes_.first, assignments_.size()};  // its `NAME=v` and `env NAME=v` words
  found.assigned = assignments_.size();
  found.at = PositionOf(command.words[i]);
  found.fields.erase(found.fields.begin(), found.fields.begin() + static_cast<long>(start));
  found.words.erase(found.words.begin(), found.words.begin() + static_cast<long>(start));
  for (auto& [at, u] : found.unresolved) at = at >= start ? at - start : 0;
  found.script = *script - start;
  found.env = ExportedEnv(found.notes);
  for (auto& [name, value] : env) found.env[name] = value;
  found_ = std::move(found);
  return OkStatus();
}

Result<LaunchScript> Reader::Finish() {
  if (!found_ && !options_.require_command) {
    LaunchScript out;
    out.assignments = std::move(assignments_);
    out.notes = notes_;
    return out;
  }
  if (!found_) {
    return InvalidInput("JOB",
                        "no training command found: looked for a command running pretrain_*.py "
                        "or a *.py script followed by --flags, launched by torchrun, python -m "
                        "torch.distributed.run, srun, deepspeed or python");
  }
  LaunchScript out;
  const std::vector<std::string> launcher(
      found_->fields.begin(), found_->fields.begin() + static_cast<long>(found_->script));
  Counts counts;
  const std::vector<std::size_t> count_words = script::ReadCounts(launcher, counts);
  out.command = script::QuoteWords(found_->fields);
  out.env = found_->env;
  out.command_at = found_->at;
  out.words = std::move(found_->words);
  out.assignments = std::move(assignments_);
  for (std::size_t k = 0; k < out.assignments.size(); ++k) {
    out.assignments[k].after_command = k >= found_->assigned;
    out.assignments[k].of_command = k >= found_->own.first && k < found_->own.second;
  }
  out.nnodes = counts.nodes ? counts.nodes : sbatch_.nodes;
  out.nproc_per_node = counts.procs    ? counts.procs
                       : counts.gpus   ? counts.gpus
                       : sbatch_.procs ? sbatch_.procs
                                       : sbatch_.gpus;
  std::set<std::string> seen, launcher_only;
  for (const auto& [at, u] : found_->unresolved) {
    // A launcher word other than a count (--master_addr $HOST) does not change memory.
    const bool count = std::find(count_words.begin(), count_words.end(), at) != count_words.end();
    if (at < found_->script && !count) {
      launcher_only.insert(u.name + " not expanded");
      Note(u.name + " not expanded: a launcher option memory does not depend on" + At(u.line));
      continue;
    }
    if (seen.insert(u.name).second) out.unresolved.push_back(u);
  }
  for (std::string& n : found_->notes) {
    if (!launcher_only.contains(n.substr(0, n.find(" (line")))) Note(std::move(n));
  }
  out.notes = notes_;
  if (notes_left_out_ > 0) out.notes.push_back(std::to_string(notes_left_out_) + " more notes");
  return out;
}

}  // namespace

Result<LaunchScript> ReadLaunchScript(std::string_view text, const ScriptOptions& options) {
  Reader reader(options);
  MEMTUNE_RETURN_IF_ERROR(reader.Run(text, 0));
  return reader.Finish();
}

}  // namespace memtune::model
