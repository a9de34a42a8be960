// Typed reading of collected Megatron-LM flags (private to megatron_args_*.cc).
#pragma once

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "memtune/core/result.h"
#include "memtune/core/suggest.h"
#include "model/megatron_args.h"

namespace memtune::model::internal {

// Typed access to the collected flags; the last occurrence of a flag wins, as in argparse.
class FlagReader {
 public:
  explicit FlagReader(const MegatronFlags& flags) : flags_(flags) {}

  bool Switch(std::string_view name) const {
    return std::find(flags_.switches.begin(), flags_.switches.end(), name) != flags_.switches.end();
  }
  const std::string* Value(std::string_view name) const {
    const std::string* found = nullptr;
    for (const auto& [key, value] : flags_.values) {
      if (key == name) found = &value;
    }
    return found;
  }
  const std::vector<std::string>* List(std::string_view name) const {
    const std::vector<std::string>* found = nullptr;
    for (const auto& [key, value] : flags_.lists) {
      if (key == name) found = &value;
    }
    return found;
  }
  Result<std::optional<std::int64_t>> Int(std::string_view name) const {
    const std::string* text = Value(name);
    if (text == nullptr) return std::optional<std::int64_t>();
    std::int64_t value = 0;
    const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
    if (ec != std::errc() || end != text->data() + text->size()) {
      return InvalidInput("--" + std::string(name), "expects an integer, got '" + *text + "'");
    }
    return std::optional<std::int64_t>(value);
  }
  Result<std::optional<double>> Float(std::string_view name) const {
    const std::string* text = Value(name);
    if (text == nullptr) return std::optional<double>();
    try {
      std::size_t used = 0;
      const double value = std::stod(*text, &used);
      if (used == text->size()) return std::optional<double>(value);
    } catch (const std::exception&) {
    }
    return InvalidInput("--" + std::string(name), "expects a number, got '" + *text + "'");
  }
  Result<std::optional<std::string>> Choice(std::string_view name,
                                            const std::vector<std::string>& allowed) const {
    const std::string* text = Value(name);
    if (text == nullptr) return std::optional<std::string>();
    if (std::find(allowed.begin(), allowed.end(), *text) != allowed.end()) {
      return std::optional<std::string>(*text);
    }
    return InvalidInput("--" + std::string(name), "'" + *text + "' is not allowed",
                        "allowed: " + JoinNames(allowed));
  }

 private:
  const MegatronFlags& flags_;
};

// out[field] = the flag's integer, when given.
inline Status CopyInt(const FlagReader& r, YAML::Node& out, const char* flag, const char* field) {
  MEMTUNE_TRY(auto value, r.Int(flag));
  if (value) out[field] = *value;
  return OkStatus();
}

inline Status CopyChoice(const FlagReader& r, YAML::Node& out, const char* flag, const char* field,
                         const std::vector<std::string>& allowed) {
  MEMTUNE_TRY(auto value, r.Choice(flag, allowed));
  if (value) out[field] = *value;
  return OkStatus();
}

}  // namespace memtune::model::internal
