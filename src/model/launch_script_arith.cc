// Launch-script integer arithmetic, the subset of bash's $((...)) (bash manual 6.5 Shell
// Arithmetic) that launch scripts use: 64-bit integers, names, + - * / % and parentheses.
// Bash's other operators (comparisons, ?:, **, shifts) are reported as unsupported.
#include <algorithm>
#include <cctype>
#include <cstdint>

#include "model/launch_script_internal.h"

namespace memtune::model::script {
namespace {

class Parser {
 public:
  Parser(std::string_view expr, int line, const Shell& shell,
         std::vector<UnresolvedVariable>& unresolved)
      : expr_(expr), line_(line), shell_(shell), unresolved_(unresolved) {}

  Result<std::int64_t> Run() {
    MEMTUNE_TRY(const std::int64_t value, Sum(0));
    SkipBlanks();
    if (pos_ != expr_.size()) return Fail("unsupported arithmetic at '" + Rest() + "'");
    return value;
  }

 private:
  Error Fail(const std::string& message) const {
    return InvalidInput("line " + std::to_string(line_), message);
  }
  std::string Rest() const { return std::string(expr_.substr(pos_, 20)); }
  void SkipBlanks() {
    while (pos_ < expr_.size() && std::isspace(static_cast<unsigned char>(expr_[pos_]))) ++pos_;
  }
  bool Take(char c) {
    SkipBlanks();
    if (pos_ < expr_.size() && expr_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  Result<std::int64_t> Sum(int depth) {
    MEMTUNE_TRY(std::int64_t value, Product(depth));
    while (true) {
      const bool plus = Take('+');
      if (!plus && !Take('-')) return value;
      MEMTUNE_TRY(const std::int64_t rhs, Product(depth));
      if (plus ? __builtin_add_overflow(value, rhs, &value)
               : __builtin_sub_overflow(value, rhs, &value)) {
        return Fail("arithmetic overflow");
      }
    }
  }

  Result<std::int64_t> Product(int depth) {
    MEMTUNE_TRY(std::int64_t value, Unary(depth));
    while (true) {
      SkipBlanks();
      const char op = pos_ < expr_.size() ? expr_[pos_] : '\0';
      if (op != '*' && op != '/' && op != '%') return value;
      if (pos_ + 1 < expr_.size() && expr_[pos_ + 1] == '*') return Fail("unsupported '**'");
      ++pos_;
      MEMTUNE_TRY(const std::int64_t rhs, Unary(depth));
      if (op == '*') {
        if (__builtin_mul_overflow(value, rhs, &value)) return Fail("arithmetic overflow");
        continue;
      }
      if (rhs == 0) return Fail("division by zero");
      if (value == INT64_MIN && rhs == -1) return Fail("arithmetic overflow");
      value = op == '/' ? value / rhs : value % rhs;
    }
  }

  Result<std::int64_t> Unary(int depth) {
    if (depth > kMaxDepth) return Fail("arithmetic nested deeper than 32 levels");
    if (Take('-')) {
      MEMTUNE_TRY(const std::int64_t value, Unary(depth + 1));
      if (value == INT64_MIN) return Fail("arithmetic overflow");
      return -value;
    }
    if (Take('+')) return Unary(depth + 1);
    if (Take('(')) {
      MEMTUNE_TRY(const std::int64_t value, Sum(depth + 1));
      if (!Take(')')) return Fail("missing ')' in arithmetic");
      return value;
    }
    return Atom();
  }

  Result<std::int64_t> Atom() {
    SkipBlanks();
    const std::size_t start = pos_;
    while (pos_ < expr_.size() &&
           (std::isalnum(static_cast<unsigned char>(expr_[pos_])) || expr_[pos_] == '_')) {
      ++pos_;
    }
    const std::string word(expr_.substr(start, pos_ - start));
    if (word.empty()) return Fail("unsupported arithmetic at '" + Rest() + "'");
    if (std::isdigit(static_cast<unsigned char>(word[0]))) return Number(word);
    Variable scratch;
    const Variable* var = FindVariable(shell_, word, scratch);
    if (var == nullptr || var->values.empty()) {
      unresolved_.push_back({word, line_});
      return 0;  // bash: an unset name is 0
    }
    for (const UnresolvedVariable& u : var->taint) unresolved_.push_back(u);
    std::string text = var->values[0];
    while (!text.empty() && text.back() == ' ') text.pop_back();
    if (text.empty()) return 0;
    if (!std::all_of(text.begin(), text.end(), ::isdigit)) {
      return Fail(word + " = '" + text.substr(0, 20) + "' is not an integer");
    }
    return Number(text);
  }

  Result<std::int64_t> Number(const std::string& digits) {
    std::int64_t value = 0;
    for (char c : digits) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return Fail("bad number '" + digits + "'");
      if (__builtin_mul_overflow(value, 10, &value) ||
          __builtin_add_overflow(value, c - '0', &value)) {
        return Fail("arithmetic overflow");
      }
    }
    return value;
  }

  std::string_view expr_;
  int line_;
  const Shell& shell_;
  std::vector<UnresolvedVariable>& unresolved_;
  std::size_t pos_ = 0;
};

}  // namespace

Result<std::int64_t> EvaluateArithmetic(std::string_view expr, int line, const Shell& shell,
                                        std::vector<UnresolvedVariable>& unresolved) {
  return Parser(expr, line, shell, unresolved).Run();
}

}  // namespace memtune::model::script
