// A SAX handler over nlohmann's parser that builds the document and stops at the first
// duplicate key or past the depth budget, so nothing deeper is ever built.
#include "memtune/model/strict_json.h"

#include <vector>

namespace memtune::model {
namespace {

using nlohmann::json;

class StrictBuilder : public json::json_sax_t {
 public:
  bool null() override { return Put(json(nullptr)); }
  bool boolean(bool v) override { return Put(json(v)); }
  bool number_integer(json::number_integer_t v) override { return Put(json(v)); }
  bool number_unsigned(json::number_unsigned_t v) override { return Put(json(v)); }
  bool number_float(json::number_float_t v, const std::string&) override { return Put(json(v)); }
  bool string(json::string_t& v) override { return Put(json(std::move(v))); }
  bool binary(json::binary_t& v) override { return Put(json::binary(std::move(v))); }
  bool start_object(std::size_t) override { return Open(json::object()); }
  bool start_array(std::size_t) override { return Open(json::array()); }
  bool end_object() override { return Close(); }
  bool end_array() override { return Close(); }
  bool key(json::string_t& k) override {
    if (stack_.back()->contains(k)) {
      error_ = "duplicate key " + JsonEcho(json(k), 60) +
               " in one object; allowed: each key once per object";
      return false;
    }
    key_ = std::move(k);
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const json::exception& e) override {
    error_ = std::string("is not valid JSON: ") + e.what();
    return false;
  }

  json root;
  std::string error_;

 private:
  // Adds `v` at the current place; returns the stored value.
  json* Insert(json v) {
    if (stack_.empty()) {
      root = std::move(v);
      return &root;
    }
    json& top = *stack_.back();
    if (top.is_array()) {
      top.push_back(std::move(v));
      return &top.back();
    }
    return &(top[key_] = std::move(v));
  }
  bool Put(json v) {
    Insert(std::move(v));
    return true;
  }
  bool Open(json container) {
    if (static_cast<int>(stack_.size()) >= kMaxJsonDepth) {
      error_ = "nests objects and arrays deeper than " + std::to_string(kMaxJsonDepth) +
               " levels (the limit)";
      return false;
    }
    stack_.push_back(Insert(std::move(container)));
    return true;
  }
  bool Close() {
    stack_.pop_back();
    return true;
  }

  std::vector<json*> stack_;
  std::string key_;
};

}  // namespace

Result<nlohmann::json> ParseStrictJson(std::string_view text, std::string_view field) {
  StrictBuilder builder;
  bool ok = false;
  try {
    ok = json::sax_parse(text.begin(), text.end(), &builder);
  } catch (const json::exception& e) {
    return InvalidInput(std::string(field), std::string("is not valid JSON: ") + e.what());
  }
  if (!ok) {
    return InvalidInput(std::string(field),
                        builder.error_.empty() ? "is not valid JSON" : builder.error_);
  }
  return std::move(builder.root);
}

std::string JsonEcho(const nlohmann::json& value, std::size_t max_chars) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > max_chars) text = text.substr(0, max_chars) + "...";
  return text;
}

}  // namespace memtune::model
