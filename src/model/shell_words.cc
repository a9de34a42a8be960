// POSIX-shell word splitting (quotes, escapes, line continuations, comments).
#include "model/shell_words.h"

namespace memtune::model {
namespace {

bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Characters a backslash escapes inside double quotes (POSIX 2.2.3).
bool EscapableInDoubleQuotes(char c) {
  return c == '$' || c == '`' || c == '"' || c == '\\' || c == '\n';
}

class Splitter {
 public:
  explicit Splitter(std::string_view text) : text_(text) {}

  Result<std::vector<std::string>> Run() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (IsBlank(c)) {
        EndWord();
        ++pos_;
      } else if (c == '#' && !in_word_) {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else if (c == '\\') {
        Backslash();
      } else if (c == '\'') {
        MEMTUNE_RETURN_IF_ERROR(SingleQuoted());
      } else if (c == '"') {
        MEMTUNE_RETURN_IF_ERROR(DoubleQuoted());
      } else {
        Append(c);
        ++pos_;
      }
    }
    EndWord();
    return words_;
  }

 private:
  void Append(char c) {
    word_.push_back(c);
    in_word_ = true;
  }
  void EndWord() {
    if (in_word_) words_.push_back(word_);
    word_.clear();
    in_word_ = false;
  }
  void Backslash() {
    ++pos_;
    if (pos_ >= text_.size()) return;
    if (text_[pos_] != '\n') Append(text_[pos_]);  // backslash-newline: continuation
    ++pos_;
  }
  Status SingleQuoted() {
    const std::size_t end = text_.find('\'', pos_ + 1);
    if (end == std::string_view::npos) return InvalidInput("command line", "unterminated ' quote");
    in_word_ = true;
    word_.append(text_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return OkStatus();
  }
  Status DoubleQuoted() {
    in_word_ = true;
    for (++pos_; pos_ < text_.size(); ++pos_) {
      const char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        return OkStatus();
      }
      if (c == '\\' && pos_ + 1 < text_.size() && EscapableInDoubleQuotes(text_[pos_ + 1])) {
        ++pos_;
        if (text_[pos_] != '\n') word_.push_back(text_[pos_]);
        continue;
      }
      word_.push_back(c);
    }
    return InvalidInput("command line", "unterminated \" quote");
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  std::string word_;
  bool in_word_ = false;
  std::vector<std::string> words_;
};

}  // namespace

Result<std::vector<std::string>> SplitShellWords(std::string_view text) {
  return Splitter(text).Run();
}

}  // namespace memtune::model
