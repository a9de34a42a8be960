// Where findings point: the script word of a flag, the assignment of a variable, or the
// line of a job document that names a field.
#include <cctype>

#include "lint/lint_internal.h"

namespace memtune::lint {
namespace {

// Flags whose Megatron-LM spelling is not "--" + the field name with '-' for '_'.
const std::map<std::string, std::vector<std::string>>& FlagAliases() {
  static const std::map<std::string, std::vector<std::string>> kAliases = {
      {"ddp.nccl_ub", {"--use-nccl-ub"}},
      {"memtune.world_size", {"--nproc_per_node", "--nproc-per-node", "--nnodes"}},
      {"memtune.gpus_per_node", {"--nproc_per_node", "--nproc-per-node"}},
      {"mixed_precision", {"--bf16", "--fp16", "--fp8-format"}},
      {"model.fp8", {"--fp8-format"}},
      {"model.cuda_graph_impl", {"--cuda-graph-impl", "--enable-cuda-graph"}},
  };
  return kAliases;
}

bool IsFlagChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
}

// The first place `literal` appears in `text` as a whole word outside a comment.
std::optional<Place> FindLiteral(const std::string& file, std::string_view text,
                                 const std::string& literal) {
  int line = 1;
  std::size_t line_start = 0;
  bool comment = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
      comment = false;
      continue;
    }
    if (text[i] == '#' && (i == line_start || !IsFlagChar(text[i - 1]))) comment = true;
    if (comment || text.compare(i, literal.size(), literal) != 0) continue;
    const bool starts = i == 0 || !IsFlagChar(text[i - 1]);
    const std::size_t end = i + literal.size();
    const bool ends = end >= text.size() || !IsFlagChar(text[end]);
    if (starts && ends) return Place{file, line, static_cast<int>(i - line_start) + 1, literal};
  }
  return std::nullopt;
}

std::vector<std::string> FlagsFor(const std::string& path) {
  const auto alias = FlagAliases().find(path);
  if (alias != FlagAliases().end()) return alias->second;
  std::string name = path.substr(path.rfind('.') + 1);
  for (char& ch : name) ch = ch == '_' ? '-' : ch;
  return {"--" + name};
}

// The command word for `path`: a flag ("--num-layers", "--num-layers=4") or a dotted
// override ("model.num_layers=4", "+model.num_layers=4").
std::optional<Place> CommandWordPlace(const Context& c, const std::string& path) {
  const std::vector<model::ScriptWord>& words = c.script.words;
  for (std::size_t k = 0; k < words.size(); ++k) {
    const std::string& w = words[k].text;
    for (const std::string& literal : FlagsFor(path)) {
      const bool flag = w == literal || w.starts_with(literal + "=");
      const bool dotted = w.starts_with(path + "=") || w.starts_with("+" + path + "=");
      if (!flag && !dotted) continue;
      const std::string written = dotted ? path : literal;
      std::string shown = w;
      if (w == literal && k + 1 < words.size() && !words[k + 1].text.starts_with("--")) {
        shown += " " + words[k + 1].text;
      }
      if (words[k].raw.find(written) == std::string::npos) {
        // From a variable or array: point at where the literal is written.
        std::optional<Place> at = FindLiteral(c.file, c.text, written);
        if (at) return Place{at->file, at->line, at->column, shown};
      }
      const model::ScriptPosition& at = words[k].at;
      return Place{at.file.empty() ? c.file : at.file, at.line, at.column, shown};
    }
  }
  return std::nullopt;
}

}  // namespace

Place CommandPlace(const Context& c) {
  const model::ScriptPosition& at = c.script.command_at;
  if (!c.is_script || at.line == 0) return Place{c.file, 0, 0, ""};
  std::string text = c.script.words.empty() ? "" : c.script.words[0].text;
  return Place{at.file.empty() ? c.file : at.file, at.line, at.column, text};
}

Place EnvPlace(const Context& c, const std::string& name) {
  const auto value = c.env.find(name);
  const std::string shown = name + "=" + (value == c.env.end() ? "" : value->second);
  if (!c.is_script) {
    std::optional<Place> at = FindLiteral(c.file, c.text, name);
    return at ? Place{c.file, at->line, at->column, shown} : Place{c.file, 0, 0, shown};
  }
  const auto& all = c.script.assignments;
  for (std::size_t k = all.size(); k-- > 0;) {
    const model::ScriptAssignment& a = all[k];
    const bool other_prefix = a.prefix && !a.of_command && c.script.command_at.line != 0;
    if (a.name != name || a.after_command || other_prefix) continue;
    return Place{a.at.file.empty() ? c.file : a.at.file, a.at.line, a.at.column, shown};
  }
  return Place{c.file, 0, 0, shown};
}

std::optional<Place> FieldPlace(const Context& c, const std::string& path) {
  static const std::string kEnv = "memtune.env.";
  if (path.starts_with(kEnv)) {
    const std::string name = path.substr(kEnv.size());
    if (!c.env.contains(name)) return std::nullopt;
    return EnvPlace(c, name);
  }
  const std::string key = path.substr(path.rfind('.') + 1);
  if (c.is_script) {
    std::optional<Place> word = CommandWordPlace(c, path);
    if (word || c.config_file.empty()) return word;
    std::optional<Place> at = FindLiteral(c.config_file, c.config_text, key);
    if (at) at->text = path;
    return at;
  }
  std::optional<Place> at = FindLiteral(c.file, c.text, key);
  if (at) at->text = path;
  return at;
}

}  // namespace memtune::lint
