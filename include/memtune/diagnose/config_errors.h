// Configuration failures: setting combinations that Megatron-Core, Megatron-Bridge or
// PyTorch's allocator-config parser reject (or warn they ignore), each with its exact fix.
// Sources: docs/diagnose.md (section "config_conflict") and docs/lint-rules.md.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace memtune::diagnose {

struct ConfigError {
  std::string id;         // stable, e.g. "megatron.pp-cpu-offload"
  std::string what;       // the conflict in words
  std::string fix;        // the exact change that removes it
  bool ignored = false;   // a warning that a setting is silently ignored (not an error)
  int line = 0;           // 1-based
  std::string line_text;  // excerpt
};

// Every known configuration failure in `text`, once per id, in line order.
std::vector<ConfigError> FindConfigErrors(std::string_view text);

}  // namespace memtune::diagnose
