// Launch-script word expansion: parameters (bash manual 3.5.3), arithmetic (3.5.5), word
// splitting of unquoted results on blanks (3.5.7) and quote removal (3.5.9). Command
// substitution (3.5.4) is never performed: it is reported instead.
#include <cctype>

#include "model/launch_script_internal.h"

namespace memtune::model::script {
namespace {

bool IsNameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool IsIfsBlank(char c) { return c == ' ' || c == '\t' || c == '\n'; }

std::string Join(const std::vector<std::string>& values) {
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i) out += (i ? " " : "") + values[i];
  return out;
}

std::string Shorten(std::string_view text) {
  return text.size() <= 40 ? std::string(text) : std::string(text.substr(0, 37)) + "...";
}

// Variables bash itself sets when a script runs (bash manual 5.2 Bash Variables) whose value
// does not change memory: paths and seeds. Their stand-in value, or nullptr.
const char* BashSetsAtRunTime(const std::string& name) {
  if (name == "PWD") return ".";
  if (name == "RANDOM") return "0";
  if (name == "HOSTNAME") return "localhost";
  return nullptr;
}

// `$(dirname "$0")`, `$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)` and the like: the
// script's own folder, which `source` paths are resolved against anyway.
bool IsScriptFolder(std::string_view text) {
  std::string s;
  for (char c : text) {
    if (std::string_view("\"'{} \t").find(c) == std::string_view::npos) s.push_back(c);
  }
  for (const std::string_view noise : {"&>/dev/null", ">/dev/null", "2>&1", "--", "-P"}) {
    for (std::size_t at; (at = s.find(noise)) != std::string::npos;) s.erase(at, noise.size());
  }
  for (const std::string_view self : {"$0", "$BASH_SOURCE[0]", "$BASH_SOURCE"}) {
    const std::string dirname = "$(dirname" + std::string(self) + ")";
    if (s == dirname || s == "$(cd" + dirname + "&&pwd)") return true;
  }
  return s == "$(pwd)" || s == "`pwd`";  // the current folder: the script's, for memtune
}

// A parsed ${...}: NAME, optional [INDEX], optional operator and word.
struct Parameter {
  std::string name;
  std::string index;  // "", "@", "*" or an integer expression
  std::string op;     // "", ":-", "-", ":=", "=", ":+", "+", ":?", "?"
  std::string word;
  bool length = false;  // ${#NAME}
  bool valid = true;
};

Parameter Named(std::string_view name) {
  Parameter p;
  p.name = std::string(name);
  return p;
}

Parameter ParseParameter(std::string_view inner) {
  Parameter p;
  std::size_t i = 0;
  if (inner.size() > 1 && inner[0] == '#') p.length = true, i = 1;
  const std::size_t start = i;
  if (i < inner.size() && (inner[i] == '@' || inner[i] == '*')) {
    ++i;
  } else {
    while (i < inner.size() && IsNameChar(inner[i])) ++i;
  }
  p.name = std::string(inner.substr(start, i - start));
  if (i < inner.size() && inner[i] == '[') {
    const std::size_t close = inner.find(']', i);
    if (close == std::string_view::npos) {
      p.valid = false;
      return p;
    }
    p.index = std::string(inner.substr(i + 1, close - i - 1));
    i = close + 1;
  }
  static constexpr std::string_view kOps[] = {":-", ":=", ":+", ":?", "-", "=", "+", "?"};
  for (std::string_view op : kOps) {
    if (!p.length && inner.compare(i, op.size(), op) == 0) {
      p.op = std::string(op);
      p.word = std::string(inner.substr(i + op.size()));
      return p;
    }
  }
  p.valid = !p.name.empty() && i == inner.size();
  return p;
}

class Expander {
 public:
  Expander(Shell& shell, int line, int depth, bool split, Expansion& out)
      : shell_(shell), line_(line), depth_(depth), split_(split), out_(out) {}

  Status Run(std::string_view raw) {
    if (depth_ > kMaxDepth) {
      return InvalidInput(Where(),
                          "expansion nested deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    for (std::size_t i = 0; i < raw.size();) {
      const char c = raw[i];
      if (c == '\'') {
        const std::size_t end = raw.find('\'', i + 1);
        if (end == std::string_view::npos) return InvalidInput(Where(), "unterminated ' quote");
        MEMTUNE_RETURN_IF_ERROR(Literal(raw.substr(i + 1, end - i - 1)));
        i = end + 1;
      } else if (c == '"') {
        const std::size_t end = FindClose(raw, i);
        if (end == std::string_view::npos) return InvalidInput(Where(), "unterminated \" quote");
        MEMTUNE_RETURN_IF_ERROR(DoubleQuoted(raw.substr(i + 1, end - i - 2)));
        i = end;
      } else if (c == '\\') {
        if (i + 1 < raw.size() && raw[i + 1] != '\n') {
          MEMTUNE_RETURN_IF_ERROR(Literal(raw.substr(i + 1, 1)));
        }
        i += 2;
      } else {
        MEMTUNE_TRY(i, Special(raw, i, /*quoted=*/false));
      }
    }
    if (has_ || !cur_.empty()) out_.fields.push_back(std::move(cur_));
    return OkStatus();
  }

 private:
  std::string Where() const { return "line " + std::to_string(line_); }

  // Kept up to kMaxNotes, so that a value built from itself line after line stays small.
  void Unresolved(UnresolvedVariable u) {
    if (out_.unresolved.size() < kMaxNotes) out_.unresolved.push_back(std::move(u));
  }

  Status DoubleQuoted(std::string_view body) {
    has_ = true;
    for (std::size_t i = 0; i < body.size();) {
      const char c = body[i];
      if (c == '\\' && i + 1 < body.size() &&
          std::string_view("$`\"\\\n").find(body[i + 1]) != std::string_view::npos) {
        if (body[i + 1] != '\n') MEMTUNE_RETURN_IF_ERROR(Literal(body.substr(i + 1, 1)));
        i += 2;
      } else {
        MEMTUNE_TRY(i, Special(body, i, /*quoted=*/true));
      }
    }
    return OkStatus();
  }

  // `$...`, a backtick, or one literal character at `i`; returns the index after it.
  Result<std::size_t> Special(std::string_view raw, std::size_t i, bool quoted) {
    const char c = raw[i];
    const char next = i + 1 < raw.size() ? raw[i + 1] : '\0';
    if (c == '`' || (c == '$' && next == '(')) {
      const std::size_t end = FindClose(raw, i);
      if (end == std::string_view::npos) return InvalidInput(Where(), "unterminated $(");
      if (raw.compare(i, 3, "$((") == 0 && raw.substr(0, end).ends_with("))")) {
        MEMTUNE_RETURN_IF_ERROR(Arithmetic(raw.substr(i + 3, end - i - 5)));
      } else {
        MEMTUNE_RETURN_IF_ERROR(Substitution(raw.substr(i, end - i)));
      }
      return end;
    }
    if (c == '$' && next == '{') {
      const std::size_t end = FindClose(raw, i);
      if (end == std::string_view::npos) return InvalidInput(Where(), "unterminated ${");
      MEMTUNE_RETURN_IF_ERROR(Braced(raw.substr(i + 2, end - i - 3), quoted));
      return end;
    }
    if (c == '$' && (IsNameStart(next) || std::isdigit(static_cast<unsigned char>(next)))) {
      std::size_t end = i + 2;
      while (IsNameStart(next) && end < raw.size() && IsNameChar(raw[end])) ++end;
      MEMTUNE_RETURN_IF_ERROR(Expand(Named(raw.substr(i + 1, end - i - 1)), quoted));
      return end;
    }
    if (c == '$' && next != '\0' && std::string_view("@*#?$!-").find(next) != std::string::npos) {
      MEMTUNE_RETURN_IF_ERROR(Expand(Named(raw.substr(i + 1, 1)), quoted));
      return i + 2;
    }
    MEMTUNE_RETURN_IF_ERROR(Literal(raw.substr(i, 1)));
    return i + 1;
  }

  Status Substitution(std::string_view text) {
    if (IsScriptFolder(text)) {
      out_.notes.push_back(std::string(text) + " read as the script's folder (line " +
                           std::to_string(line_) + ")");
      return Literal(".");
    }
    const std::string name = Shorten(text);
    Unresolved({name, line_});
    out_.notes.push_back(name + " not expanded (line " + std::to_string(line_) + ")");
    has_ = true;
    return OkStatus();
  }

  Status Arithmetic(std::string_view expr) {
    MEMTUNE_TRY(const std::string text, Sub(expr));
    std::vector<UnresolvedVariable> unset;
    Result<std::int64_t> value = EvaluateArithmetic(text, line_, shell_, unset);
    for (UnresolvedVariable& u : unset) Unresolved(std::move(u));
    if (!value) {
      MEMTUNE_RETURN_IF_ERROR(Substitution("$((" + std::string(expr) + "))"));
      out_.notes.back() += ": " + value.error().message;
      return OkStatus();
    }
    return Emit({std::to_string(*value)}, true, false);
  }

  // Expands `text` one level deeper, as a value (no splitting).
  Result<std::string> Sub(std::string_view text) {
    Expansion inner;
    MEMTUNE_RETURN_IF_ERROR(Expander(shell_, line_, depth_ + 1, false, inner).Run(text));
    for (auto& u : inner.unresolved) Unresolved(std::move(u));
    for (auto& n : inner.notes) out_.notes.push_back(std::move(n));
    return Join(inner.fields);
  }

  Status Braced(std::string_view inner, bool quoted) {
    const Parameter p = ParseParameter(inner);
    if (!p.valid) {
      return Substitution("${" + std::string(inner) + "}");
    }
    return Expand(p, quoted);
  }

  Status Expand(const Parameter& p, bool quoted) {
    if (p.name == "@" || p.name == "*") {
      out_.notes.push_back("$" + p.name + " (the script's arguments) taken as empty (line " +
                           std::to_string(line_) + ")");
      has_ = has_ || quoted;
      return OkStatus();
    }
    if (p.name == "#" && p.op.empty()) return Emit({"0"}, true, false);
    Variable scratch;
    const Variable* var = FindVariable(shell_, p.name, scratch);
    const bool colon = !p.op.empty() && p.op[0] == ':';
    const bool set = var != nullptr && !(colon && Join(var->values).empty());
    const char op = p.op.empty() ? '\0' : p.op.back();
    if ((op == '-' || op == '=') && !set) {
      MEMTUNE_TRY(const std::string word, Sub(p.word));
      if (op == '=' && (shell_.fixed == nullptr || !shell_.fixed->contains(p.name)))
        shell_.vars[p.name] = StringVariable(word);
      return Emit({word}, quoted, false);
    }
    if (op == '+') {
      if (!set) return OkStatus();
      MEMTUNE_TRY(const std::string word, Sub(p.word));
      return Emit({word}, quoted, false);
    }
    if (var == nullptr) {
      if (const char* value = BashSetsAtRunTime(p.name)) {
        out_.notes.push_back("$" + p.name + " taken as '" + value + "' (bash sets it when the " +
                             "script runs; line " + std::to_string(line_) + ")");
        return Emit({value}, quoted, false);
      }
    }
    if (var == nullptr || (op == '?' && !set)) {
      Unresolved({p.name, line_});
      has_ = has_ || quoted;
      return OkStatus();
    }
    for (const UnresolvedVariable& u : var->taint) Unresolved(u);
    return Values(p, *var, quoted);
  }

  Status Values(const Parameter& p, const Variable& var, bool quoted) {
    if (p.length) {
      const bool all = p.index == "@" || p.index == "*";
      const std::size_t n = all ? var.values.size() : Join(var.values).size();
      return Emit({std::to_string(n)}, true, false);
    }
    if (p.index == "@" || p.index == "*") return Emit(var.values, quoted, p.index == "@");
    std::int64_t index = 0;
    if (!p.index.empty()) {
      std::vector<UnresolvedVariable> unset;
      MEMTUNE_TRY(index, EvaluateArithmetic(p.index, line_, shell_, unset));
    }
    if (index < 0 || static_cast<std::size_t>(index) >= var.values.size()) {
      return Emit({""}, quoted, false);
    }
    return Emit({var.values[static_cast<std::size_t>(index)]}, quoted, false);
  }

  Status Literal(std::string_view text) {
    has_ = true;
    cur_.append(text);
    return Check(text.size());
  }

  // Adds expansion results: quoted ones join the current field ("${A[@]}" keeps one field
  // per element); unquoted ones are split on blanks.
  Status Emit(const std::vector<std::string>& values, bool quoted, bool at_style) {
    std::size_t bytes = 0;
    for (const std::string& v : values) bytes += v.size() + 1;
    if (!split_) quoted = true, at_style = false;
    for (std::size_t n = 0; n < values.size(); ++n) {
      if (quoted) {
        if (n > 0) at_style ? Break() : cur_.push_back(' ');
        cur_.append(values[n]);
        has_ = true;
        continue;
      }
      if (n > 0) Break();
      for (char c : values[n]) IsIfsBlank(c) ? Break() : cur_.push_back(c);
    }
    return Check(bytes);
  }

  void Break() {
    if (has_ || !cur_.empty()) out_.fields.push_back(std::move(cur_));
    cur_.clear();
    has_ = false;
  }

  Status Check(std::size_t added) {
    shell_.total_bytes += added;
    if (cur_.size() > kMaxWordBytes || shell_.total_bytes > kMaxTotalBytes) {
      return InvalidInput(Where(), "expansion larger than " +
                                       std::string(cur_.size() > kMaxWordBytes ? "1" : "64") +
                                       " MiB");
    }
    return OkStatus();
  }

  Shell& shell_;
  int line_;
  int depth_;
  bool split_;
  Expansion& out_;
  std::string cur_;
  bool has_ = false;  // the current field exists even if empty ("" was written)
};

}  // namespace

const Variable* FindVariable(const Shell& shell, const std::string& name, Variable& scratch) {
  if (shell.fixed != nullptr) {
    const auto fixed = shell.fixed->find(name);
    if (fixed != shell.fixed->end()) {
      scratch = StringVariable(fixed->second);
      return &scratch;
    }
  }
  const auto it = shell.vars.find(name);
  return it == shell.vars.end() ? nullptr : &it->second;
}

Result<Expansion> ExpandWord(const std::string& raw, int line, Shell& shell) {
  Expansion out;
  MEMTUNE_RETURN_IF_ERROR(Expander(shell, line, 0, true, out).Run(raw));
  return out;
}

Result<Expansion> ExpandValue(const std::string& raw, int line, Shell& shell) {
  Expansion out;
  MEMTUNE_RETURN_IF_ERROR(Expander(shell, line, 0, false, out).Run(raw));
  out.fields = {Join(out.fields)};
  return out;
}

}  // namespace memtune::model::script
