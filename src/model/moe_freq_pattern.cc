// A tiny evaluator for the Python list expressions Megatron-LM accepts in --moe-layer-freq.
#include "model/moe_freq_pattern.h"

#include <algorithm>
#include <cctype>
#include <optional>

namespace memtune::model {
namespace {

constexpr std::size_t kMaxPatternLength = 1'000'000;  // layers; guards "[1]*999999999"
constexpr long long kMaxNumber = 1'000'000'000;       // bounds integer products

// An expression value: an integer or a list of integers.
struct Value {
  bool is_list = false;
  long long number = 0;
  std::vector<int> list;
};

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  std::optional<Value> Parse() {
    auto value = Sum();
    Skip();
    if (!value || pos_ != text_.size()) return std::nullopt;
    return value;
  }

 private:
  void Skip() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool Eat(char c) {
    Skip();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  std::optional<Value> Sum() {
    auto left = Product();
    while (left && Eat('+')) {
      auto right = Product();
      if (!right || left->is_list != right->is_list) return std::nullopt;
      if (left->is_list) {
        left->list.insert(left->list.end(), right->list.begin(), right->list.end());
      } else {
        left->number += right->number;
      }
      if (left->list.size() > kMaxPatternLength) return std::nullopt;
    }
    return left;
  }
  std::optional<Value> Product() {
    auto left = Atom();
    while (left && Eat('*')) {
      auto right = Atom();
      if (!right || (left->is_list && right->is_list)) return std::nullopt;
      left = Multiply(*left, *right);
    }
    return left;
  }
  static std::optional<Value> Multiply(const Value& a, const Value& b) {
    if (!a.is_list && !b.is_list) {
      if (a.number > kMaxNumber / std::max(b.number, 1LL)) return std::nullopt;
      return Value{false, a.number * b.number, {}};
    }
    const Value& list = a.is_list ? a : b;
    const long long times = a.is_list ? b.number : a.number;
    if (times < 0 || list.list.size() * static_cast<std::size_t>(times) > kMaxPatternLength) {
      return std::nullopt;
    }
    Value out{true, 0, {}};
    for (long long i = 0; i < times; ++i)
      out.list.insert(out.list.end(), list.list.begin(), list.list.end());
    return out;
  }
  std::optional<Value> Atom() {
    if (Eat('(')) {
      auto inner = Sum();
      return inner && Eat(')') ? inner : std::nullopt;
    }
    if (Eat('[')) return ListBody();
    return Number();
  }
  std::optional<Value> ListBody() {
    Value out{true, 0, {}};
    if (Eat(']')) return out;
    do {
      auto item = Number();
      if (!item) return std::nullopt;
      out.list.push_back(static_cast<int>(item->number));
    } while (Eat(','));
    return Eat(']') ? std::optional<Value>(out) : std::nullopt;
  }
  std::optional<Value> Number() {
    Skip();
    const std::size_t start = pos_;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_])) &&
           pos_ - start < 9) {
      ++pos_;
    }
    if (pos_ == start) return std::nullopt;
    return Value{false, std::stoll(std::string(text_.substr(start, pos_ - start))), {}};
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

}  // namespace

Result<MoeFreq> ParseMoeFreq(std::string_view text, std::string_view flag) {
  const std::optional<Value> value = Parser(text).Parse();
  if (!value || (!value->is_list && value->number <= 0)) {
    return InvalidInput(std::string(flag),
                        "expects a positive integer or a Python list expression such as "
                        "([0]*3+[1]*58), got '" +
                            std::string(text) + "'");
  }
  MoeFreq out;
  out.is_list = value->is_list;
  if (value->is_list) {
    out.pattern = value->list;
  } else {
    out.every = static_cast<int>(value->number);
  }
  return out;
}

}  // namespace memtune::model
