// A tiny evaluator for the Python list expressions Megatron-LM accepts in --moe-layer-freq.
#include "model/moe_freq_pattern.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "model/job_schema.h"

namespace memtune::model {
namespace {

// One entry per layer: a list longer than the layer limit can never match --num-layers.
constexpr std::size_t kMaxPatternLength = static_cast<std::size_t>(internal::kMaxLayers);
constexpr long long kMaxNumber = 1'000'000'000;  // bounds integer products

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
  // Why Parse failed when a limit (depth or length) stopped it; empty for a syntax error.
  const std::string& limit_error() const { return limit_error_; }

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
      if (left->list.size() > kMaxPatternLength) return TooLong();
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
  std::optional<Value> TooLong() {
    limit_error_ = "lists more than " + std::to_string(kMaxPatternLength) +
                   " entries (one per layer; the layer limit)";
    return std::nullopt;
  }
  std::optional<Value> Multiply(const Value& a, const Value& b) {
    if (!a.is_list && !b.is_list) {
      if (a.number > kMaxNumber / std::max(b.number, 1LL)) return std::nullopt;
      return Value{false, a.number * b.number, {}};
    }
    const Value& list = a.is_list ? a : b;
    const long long times = a.is_list ? b.number : a.number;
    if (times < 0) return std::nullopt;
    if (list.list.size() * static_cast<std::size_t>(times) > kMaxPatternLength) return TooLong();
    Value out{true, 0, {}};
    for (long long i = 0; i < times; ++i)
      out.list.insert(out.list.end(), list.list.begin(), list.list.end());
    return out;
  }
  // Parentheses recurse (Atom -> Sum -> Product -> Atom); the depth budget bounds the stack.
  std::optional<Value> Atom() {
    if (Eat('(')) {
      if (++depth_ > kMaxMoeFreqDepth) {
        limit_error_ = "nests parentheses deeper than " + std::to_string(kMaxMoeFreqDepth) +
                       " levels (the limit)";
        return std::nullopt;
      }
      auto inner = Sum();
      --depth_;
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
  int depth_ = 0;
  std::string limit_error_;
};

}  // namespace

Result<MoeFreq> ParseMoeFreq(std::string_view text, std::string_view flag) {
  Parser parser(text);
  const std::optional<Value> value = parser.Parse();
  if (!parser.limit_error().empty()) {
    return InvalidInput(std::string(flag), "the expression " + parser.limit_error());
  }
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
