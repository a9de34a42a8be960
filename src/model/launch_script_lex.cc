// Launch-script tokenizer: text -> simple commands of raw words (quotes kept for the
// expander), #SBATCH lines and heredoc bodies. Follows the GNU Bash Reference Manual:
// 3.1.2 Quoting, 3.2.2 Pipelines / 3.2.4 Lists (the separators), 3.6 Redirections and
// 3.6.6 Here Documents.
#include <cctype>

#include "model/launch_script_internal.h"

namespace memtune::model::script {
namespace {

bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\r'; }
bool IsOperator(char c) {
  return c == ';' || c == '&' || c == '|' || c == '(' || c == ')' || c == '<' || c == '>';
}
bool IsAllDigits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// "NAME=" or "NAME+=" (NAME an identifier): the start of an assignment word.
bool IsAssignmentPrefix(const std::string& s) {
  if (s.size() < 2 || s.back() != '=') return false;
  std::size_t end = s.size() - 1;
  if (s[end - 1] == '+') --end;
  if (end == 0 || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (std::size_t i = 0; i < end; ++i) {
    if (!std::isalnum(static_cast<unsigned char>(s[i])) && s[i] != '_') return false;
  }
  return true;
}

Error Unterminated(int line, const std::string& what) {
  return InvalidInput("line " + std::to_string(line), "unterminated " + what);
}

struct PendingHeredoc {
  std::string delimiter;
  bool strip_tabs = false;
  bool quoted = false;
  std::size_t command = 0;  // index into Tokens::commands
};

class Lexer {
 public:
  Lexer(std::string_view text, int first_line) : text_(text), line_(first_line) {}

  Result<Tokens> Run() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (IsBlank(c)) {
        ++pos_;
      } else if (c == '\n') {
        EndCommand();
        ++pos_;
        ++line_;
        MEMTUNE_RETURN_IF_ERROR(ReadHeredocs());
      } else if (c == '\\' && Peek(1) == '\n') {
        pos_ += 2;
        ++line_;
      } else if (c == '#') {
        Comment();
      } else if (c == '<' || c == '>') {
        MEMTUNE_RETURN_IF_ERROR(Redirect());
      } else if (IsOperator(c)) {
        EndCommand();
        ++pos_;
      } else {
        MEMTUNE_TRY(RawWord word, Word());
        AddWord(std::move(word));
      }
    }
    EndCommand();
    if (!pending_.empty()) return Unterminated(line_, "heredoc '" + pending_[0].delimiter + "'");
    return std::move(tokens_);
  }

 private:
  char Peek(std::size_t ahead) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }

  void AddWord(RawWord word) {
    if (current_.words.empty()) current_.line = word_line_;
    current_.words.push_back(std::move(word));
  }
  void EndCommand() {
    if (!current_.words.empty()) tokens_.commands.push_back(std::move(current_));
    current_ = RawCommand{};
  }

  void Comment() {
    const std::size_t end = std::min(text_.find('\n', pos_), text_.size());
    const std::string_view body = text_.substr(pos_, end - pos_);
    if (body.rfind("#SBATCH", 0) == 0) tokens_.sbatch.emplace_back(body.substr(7), line_);
    pos_ = end;
  }

  // A redirection operator and its target word are dropped; `<<` registers a heredoc.
  Status Redirect() {
    if (pos_ > 0 && !IsBlank(text_[pos_ - 1]) && !current_.words.empty() &&
        !current_.words.back().is_array && IsAllDigits(current_.words.back().text)) {
      current_.words.pop_back();  // the file descriptor of "2>"
    }
    const bool heredoc = text_.compare(pos_, 2, "<<") == 0 && Peek(2) != '<';
    const bool strip_tabs = heredoc && Peek(2) == '-';
    while (pos_ < text_.size() && (IsOperator(text_[pos_]) || text_[pos_] == '-')) {
      if (text_[pos_] == '-' && !heredoc) break;
      ++pos_;
    }
    while (pos_ < text_.size() && IsBlank(text_[pos_])) ++pos_;
    if (pos_ >= text_.size() || text_[pos_] == '\n') return OkStatus();
    MEMTUNE_TRY(const RawWord target, Word());
    if (!heredoc) return OkStatus();
    PendingHeredoc h{Unquote(target.text), strip_tabs, target.text != Unquote(target.text)};
    if (current_.words.empty()) current_.line = line_;
    h.command = tokens_.commands.size();  // the command being read now
    pending_.push_back(std::move(h));
    if (!current_.heredoc) current_.heredoc = "";  // filled when its body is read
    return OkStatus();
  }

  static std::string Unquote(const std::string& word) {
    std::string out;
    for (char c : word) {
      if (c != '\'' && c != '"' && c != '\\') out.push_back(c);
    }
    return out;
  }

  // Reads the bodies of the heredocs opened on the line just ended, in order.
  Status ReadHeredocs() {
    for (const PendingHeredoc& h : pending_) {
      std::string body;
      const int start = line_;
      bool closed = false;
      while (pos_ < text_.size() && !closed) {
        const std::size_t end = std::min(text_.find('\n', pos_), text_.size());
        std::string_view line = text_.substr(pos_, end - pos_);
        pos_ = std::min(end + 1, text_.size());
        ++line_;
        if (h.strip_tabs) line.remove_prefix(std::min(line.find_first_not_of('\t'), line.size()));
        closed = line == h.delimiter;
        if (!closed) body.append(line).push_back('\n');
      }
      if (!closed) return Unterminated(start - 1, "heredoc '" + h.delimiter + "'");
      if (h.command >= tokens_.commands.size()) continue;  // `<<EOF` with no command
      RawCommand& owner = tokens_.commands[h.command];
      if (owner.heredoc && owner.heredoc->empty()) {
        owner.heredoc = std::move(body);
        owner.heredoc_quoted = h.quoted;
        owner.heredoc_line = start;
      }
    }
    pending_.clear();
    return OkStatus();
  }

  // The 1-based column of pos_. Positions only grow, so the scan back is amortized O(1).
  int Column() {
    for (std::size_t i = pos_; i > scanned_; --i) {
      if (text_[i - 1] == '\n') {
        line_start_ = i;
        break;
      }
    }
    scanned_ = pos_;
    return static_cast<int>(pos_ - line_start_) + 1;
  }

  Result<RawWord> Word() {
    RawWord word;
    word.line = word_line_ = line_;
    word.column = Column();
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (IsBlank(c) || c == '\n') break;
      if (c == '(' && IsAssignmentPrefix(word.text)) return Array(std::move(word));
      if (IsOperator(c)) break;
      MEMTUNE_RETURN_IF_ERROR(Piece(word.text));
    }
    return word;
  }

  // One character, quoted string or expansion, appended as written.
  Status Piece(std::string& out) {
    const char c = text_[pos_];
    std::size_t end = pos_ + 1;
    if (c == '\\') {
      end = std::min(pos_ + 2, text_.size());
    } else if (c == '\'') {
      end = text_.find('\'', pos_ + 1);
      if (end == std::string_view::npos) return Unterminated(line_, "' quote");
      ++end;
    } else if (c == '"' || c == '`' || (c == '$' && (Peek(1) == '(' || Peek(1) == '{'))) {
      end = FindClose(text_, pos_);
      if (end == std::string_view::npos) {
        return Unterminated(line_, c == '$' ? std::string("$") + Peek(1) : std::string(1, c));
      }
    }
    const std::string_view piece = text_.substr(pos_, end - pos_);
    for (char p : piece) line_ += p == '\n' ? 1 : 0;
    out.append(piece);
    pos_ = end;
    return OkStatus();
  }

  // NAME=( element... ): elements span lines; comments inside are skipped.
  Result<RawWord> Array(RawWord word) {
    const int start = line_;
    word.is_array = true;
    ++pos_;
    while (true) {
      while (pos_ < text_.size() && (IsBlank(text_[pos_]) || text_[pos_] == '\n')) {
        line_ += text_[pos_++] == '\n' ? 1 : 0;
      }
      if (pos_ >= text_.size()) return Unterminated(start, "array '" + word.text + "('");
      if (text_[pos_] == ')') break;
      if (text_[pos_] == '#') {
        Comment();
      } else if (text_[pos_] == '\\' && Peek(1) == '\n') {
        pos_ += 2;
        ++line_;
      } else {
        std::string element;
        word.element_lines.push_back(line_);
        while (pos_ < text_.size() && !IsBlank(text_[pos_]) && text_[pos_] != '\n' &&
               text_[pos_] != ')') {
          MEMTUNE_RETURN_IF_ERROR(Piece(element));
        }
        word.elements.push_back(std::move(element));
      }
    }
    ++pos_;
    return word;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  int line_;
  int word_line_ = 0;
  std::size_t scanned_ = 0;     // Column(): text before this was searched for newlines
  std::size_t line_start_ = 0;  // Column(): where the line holding `scanned_` starts
  RawCommand current_;
  Tokens tokens_;
  std::vector<PendingHeredoc> pending_;
};

}  // namespace

// "NAME=", "NAME+=" -> NAME; "" when `text` does not start an assignment.
std::string AssignedName(const std::string& text, bool& append) {
  std::size_t i = 0;
  while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_'))
    ++i;
  if (i == 0 || std::isdigit(static_cast<unsigned char>(text[0]))) return "";
  append = text.compare(i, 2, "+=") == 0;
  if (!append && (i >= text.size() || text[i] != '=')) return "";
  return text.substr(0, i);
}

// An unquoted heredoc body as the script it submits: bash removes the backslash of \$, \`
// and \\ and joins \<newline> (bash manual 3.6.6). Its $ expansions are left for the script
// reader, which shares the variables, so they come out as bash's outer expansion would.
std::string HeredocText(const std::string& body) {
  std::string out;
  for (std::size_t i = 0; i < body.size(); ++i) {
    const char next = i + 1 < body.size() ? body[i + 1] : '\0';
    if (body[i] == '\\' && (next == '$' || next == '`' || next == '\\' || next == '\n')) {
      if (next != '\n') out.push_back(next);
      ++i;
      continue;
    }
    out.push_back(body[i]);
  }
  return out;
}

bool IsAssignment(const RawWord& word) {
  bool append = false;
  return !AssignedName(word.text, append).empty();
}

std::size_t FindClose(std::string_view text, std::size_t open) {
  std::string stack;  // the closing characters expected, innermost last
  std::size_t i = open;
  if (text[i] == '`') {
    for (++i; i < text.size(); ++i) {
      if (text[i] == '\\')
        ++i;
      else if (text[i] == '`')
        return i + 1;
    }
    return std::string_view::npos;
  }
  if (text[i] == '"') {
    stack.push_back('"');
    ++i;
  } else {
    stack.push_back(text[i + 1] == '{' ? '}' : ')');
    i += 2;
  }
  for (; i < text.size(); ++i) {
    const char c = text[i];
    const bool in_dquote = stack.back() == '"';
    if (c == '\\') {
      ++i;
    } else if (c == stack.back()) {
      stack.pop_back();
      if (stack.empty()) return i + 1;
    } else if (c == '$' && i + 1 < text.size() && (text[i + 1] == '(' || text[i + 1] == '{')) {
      stack.push_back(text[++i] == '{' ? '}' : ')');
    } else if (c == '`') {
      const std::size_t end = FindClose(text, i);
      if (end == std::string_view::npos) return end;
      i = end - 1;
    } else if (in_dquote) {
      continue;
    } else if (c == '\'') {
      i = text.find('\'', i + 1);
      if (i == std::string_view::npos) return i;
    } else if (c == '"') {
      stack.push_back('"');
    } else if (c == '(') {
      stack.push_back(')');
    }
  }
  return std::string_view::npos;
}

Result<Tokens> Tokenize(std::string_view text, int first_line) {
  return Lexer(text, first_line).Run();
}

}  // namespace memtune::model::script
