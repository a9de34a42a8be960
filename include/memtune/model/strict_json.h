// Strict JSON reading for untrusted documents (config.json, validation cases, traces of other
// tools): a nesting-depth budget and duplicate keys refused, both while parsing.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "memtune/core/result.h"

namespace memtune::model {

// The nesting limit of a JSON document (objects and arrays, docs/limits.md). Real documents
// nest under 10 deep; the limit keeps every later recursion (dump, comparison, conversion)
// within a small, fixed stack.
inline constexpr int kMaxJsonDepth = 100;

// Parses `text` as one JSON value. nlohmann keeps the last of two equal keys; this refuses
// them, as YAML does, and refuses nesting deeper than kMaxJsonDepth before going deeper.
// Errors: kInvalidInput naming `field`: "is not valid JSON: <parser message>", "duplicate
// key 'k' at byte N; allowed: each key once per object", "nests objects and arrays deeper
// than 100 levels at byte N (the limit)".
// Example: ParseStrictJson(R"({"a": 1, "a": 2})", "x") is an error naming key 'a'.
Result<nlohmann::json> ParseStrictJson(std::string_view text, std::string_view field);

// `value` as compact JSON text for an error message: invalid UTF-8 replaced, cut to
// `max_chars` characters with "..." after a cut.
std::string JsonEcho(const nlohmann::json& value, std::size_t max_chars = 80);

}  // namespace memtune::model
