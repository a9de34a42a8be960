// AllocatorConfigFromEnv and WithExpandableSegments: the environment as PyTorch reads it.
#include "memtune/alloc/env_config.h"

#include <string>

namespace memtune::alloc {
namespace {

const std::string* Find(const std::map<std::string, std::string>& env, std::string_view var) {
  auto it = env.find(std::string(var));
  return it == env.end() ? nullptr : &it->second;
}

Result<AllocatorConfig> ParseVar(const std::string& text, std::string_view var,
                                 TorchVersion version, std::string_view prefix) {
  auto config = ParseAllocatorConfig(text, version);
  if (!config) {
    Error e = config.error();
    e.field = std::string(prefix) + std::string(var) + " (" + e.field + ")";
    return e;
  }
  return config;
}

std::string_view TrimSpaces(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

}  // namespace

Result<EnvAllocatorConfig> AllocatorConfigFromEnv(const std::map<std::string, std::string>& env,
                                                  TorchVersion version,
                                                  std::string_view field_prefix) {
  const std::string* cuda = Find(env, kCudaAllocConfVar);
  const std::string* generic =
      RulesFor(version).core_config_parser ? Find(env, kAllocConfVar) : nullptr;
  EnvAllocatorConfig out;
  if (generic == nullptr && cuda == nullptr) {
    MEMTUNE_TRY(out.config, ParseAllocatorConfig("", version));
    return out;
  }
  // Device-generic options: PYTORCH_ALLOC_CONF first. CUDA-specific: PYTORCH_CUDA_ALLOC_CONF first.
  const std::string_view generic_var = generic != nullptr ? kAllocConfVar : kCudaAllocConfVar;
  const std::string_view cuda_var = cuda != nullptr ? kCudaAllocConfVar : kAllocConfVar;
  out.source_var = std::string(generic_var);
  out.cuda_source_var = std::string(cuda_var);
  MEMTUNE_TRY(out.config,
              ParseVar(generic != nullptr ? *generic : *cuda, generic_var, version, field_prefix));
  if (generic != nullptr && cuda != nullptr && *generic != *cuda) {
    MEMTUNE_TRY(const AllocatorConfig cuda_config,
                ParseVar(*cuda, cuda_var, version, field_prefix));
    out.config.backend = cuda_config.backend;
    out.config.per_process_memory_fraction = cuda_config.per_process_memory_fraction;
  }
  return out;
}

AllocatorConfig WithExpandableSegments(const AllocatorConfig& config, bool enabled) {
  AllocatorConfig out = config;
  out.expandable_segments = enabled;
  const std::string value = enabled ? "True" : "False";
  std::string settings;
  bool replaced = false;
  std::string_view rest = config.settings;
  while (true) {
    const std::size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    const std::size_t colon = item.find(':');
    if (colon != std::string_view::npos &&
        TrimSpaces(item.substr(0, colon)) == "expandable_segments") {
      settings += "expandable_segments:" + value;
      replaced = true;
    } else {
      settings += item;
    }
    if (comma == std::string_view::npos) break;
    settings += ',';
    rest = rest.substr(comma + 1);
  }
  if (!replaced) {
    settings = config.settings.empty() ? "expandable_segments:" + value
                                       : config.settings + ",expandable_segments:" + value;
  }
  out.settings = std::move(settings);
  return out;
}

}  // namespace memtune::alloc
