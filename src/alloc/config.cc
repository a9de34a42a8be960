// ParseAllocatorConfig and the helpers both parser families share.
#include "memtune/alloc/config.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <string>

#include "alloc/config_tokens.h"

namespace memtune::alloc {
namespace internal {

std::vector<std::string> TokenizeAllocConf(std::string_view settings, bool drop_all_whitespace) {
  std::vector<std::string> tokens;
  std::string word;
  for (char ch : settings) {
    if (ch == ',' || ch == ':' || ch == '[' || ch == ']') {
      if (!word.empty()) tokens.push_back(std::move(word));
      word.clear();
      tokens.emplace_back(1, ch);
    } else if (drop_all_whitespace ? !std::isspace(static_cast<unsigned char>(ch)) : ch != ' ') {
      word += ch;
    }
  }
  if (!word.empty()) tokens.push_back(std::move(word));
  return tokens;
}

std::optional<std::uint64_t> ParseLeadingUnsigned(std::string_view token, std::uint64_t max_value) {
  std::size_t i = 0;
  while (i < token.size() && std::isspace(static_cast<unsigned char>(token[i]))) ++i;
  if (i < token.size() && token[i] == '+') ++i;
  if (i >= token.size() || !std::isdigit(static_cast<unsigned char>(token[i]))) return std::nullopt;
  std::uint64_t value = 0;
  for (; i < token.size() && std::isdigit(static_cast<unsigned char>(token[i])); ++i) {
    const std::uint64_t digit = static_cast<std::uint64_t>(token[i] - '0');
    if (value > (max_value - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  return value;
}

std::optional<double> ParseLeadingDouble(std::string_view token) {
  const std::string text(token);
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || errno == ERANGE) return std::nullopt;
  return value;
}

int Log2Floor(std::uint64_t v) { return 63 - __builtin_clzll(v); }

Error ConfigError(std::string field, std::string pytorch_text, std::string hint) {
  while (!pytorch_text.empty() && pytorch_text.back() == ' ') pytorch_text.pop_back();
  return InvalidConfig(std::move(field), std::move(pytorch_text), std::move(hint));
}

Error NumberError(const std::string& field, const std::string& token, const char* function) {
  return ConfigError(field, "'" + token + "' is not a valid number for " + field,
                     std::string("PyTorch fails here with std::invalid_argument or "
                                 "std::out_of_range from ") +
                         function);
}

void ApplyRoundupEntry(AllocatorConfig& cfg, bool is_gt, std::uint64_t interval_mb,
                       std::int64_t value, bool& first, int& last_index) {
  auto& table = cfg.roundup_power2_divisions;
  if (is_gt) {
    // PyTorch <= 2.8 fills from last_index itself; 2.9+ from the entry after it.
    const int start = cfg.rules().roundup_gt_fills_after_last ? last_index + 1 : last_index;
    for (int k = start; k < kRoundupIntervals; ++k) table[static_cast<std::size_t>(k)] = value;
    return;
  }
  int index = Log2Floor(interval_mb);
  if (index > kRoundupIntervals - 1) index = kRoundupIntervals - 1;
  if (first) {
    for (int k = 0; k < index; ++k) table[static_cast<std::size_t>(k)] = value;
    first = false;
  }
  table[static_cast<std::size_t>(index)] = value;
  last_index = index;
}

void NoteNotSimulated(AllocatorConfig& cfg, const std::string& key, const std::string& value) {
  std::string why;
  if (key == "backend") {
    why = "memtune simulates the native caching allocator; cudaMallocAsync pools are not modelled";
  } else if (key.rfind("pinned_", 0) == 0) {
    why = "host pinned-memory allocator; no effect on device memory";
  } else if (key.rfind("release_lock_on_", 0) == 0) {
    why = "lock handling only; no effect on memory";
  } else {
    why = "CUDA graph capture is not simulated";
  }
  cfg.not_simulated.push_back(key + ":" + value + " (" + why + ")");
}

}  // namespace internal

Result<AllocatorConfig> ParseAllocatorConfig(std::string_view settings, TorchVersion version) {
  AllocatorConfig cfg;
  cfg.torch_version = version;
  cfg.settings = std::string(settings);
  const VersionRules rules = RulesFor(version);
  const auto tokens = internal::TokenizeAllocConf(settings, rules.core_config_parser);
  const Status status = rules.core_config_parser ? internal::ParseCore(tokens, cfg)
                                                 : internal::ParseLegacy(tokens, cfg);
  if (!status.has_value()) return status.error();
  return cfg;
}

}  // namespace memtune::alloc
