// The table of configuration failures and their fixes.
#include "memtune/diagnose/config_errors.h"

#include <set>

#include "diagnose/text_scan.h"

namespace memtune::diagnose {
namespace {

struct Rule {
  const char* needle;   // matched as is
  const char* needle2;  // also required on the line, or nullptr
  const char* id;
  const char* what;
  const char* fix;
  bool ignored;
};

// Messages as the sources raise them (docs/lint-rules.md cites file and line for each).
constexpr Rule kRules[] = {
    {"Currently there is no support for Pipeline parallelism with CPU offloading", nullptr,
     "megatron.pp-cpu-offload", "CPU offloading with pipeline parallelism (PP > 1)",
     "disable CPU offloading (cpu_offloading=False) or set pipeline_model_parallel_size=1", false},
    {"CPU offloading does not work when activation recomputation is enabled", nullptr,
     "megatron.cpu-offload-recompute", "CPU offloading with activation recompute",
     "turn off activation recompute (recompute_granularity=None) or CPU offloading", false},
    {"CPU offloading can be done only for layers less than", nullptr, "megatron.cpu-offload-layers",
     "cpu_offloading_num_layers is not below num_layers",
     "set cpu_offloading_num_layers below num_layers", false},
    {"is currently not supported with nccl_ub", nullptr, "megatron.nccl-ub-expandable",
     "--use-nccl-ub (ddp.nccl_ub) with expandable_segments:True",
     "remove expandable_segments:True from PYTORCH_CUDA_ALLOC_CONF or drop --use-nccl-ub", false},
    {"NCCL_GRAPH_REGISTER", "expandable_segments", "megatron.cudagraph-nccl-graph-register",
     "CUDA graphs with expandable_segments:True and NCCL graph registration on",
     "export NCCL_GRAPH_REGISTER=0", false},
    {"Unrecognized CachingAllocator option", nullptr, "torch.alloc-conf-unknown-option",
     "an allocator option this PyTorch does not know (expandable_segments needs >= 2.1)",
     "remove the option from PYTORCH_CUDA_ALLOC_CONF or upgrade PyTorch", false},
    {"Expected a single True/False argument for", nullptr, "torch.alloc-conf-bool",
     "an allocator option that takes True or False got something else",
     "write the value as True or False (capitalised), e.g. expandable_segments:True", false},
    {"Error parsing CachingAllocator settings", nullptr, "torch.alloc-conf-syntax",
     "PYTORCH_CUDA_ALLOC_CONF does not parse",
     "write key:value pairs separated by commas, e.g. "
     "expandable_segments:True,max_split_size_mb:512",
     false},
    {"Expected closing bracket ']' in ConfigTokenizer", nullptr, "torch.alloc-conf-bracket",
     "an unclosed roundup_power2_divisions list",
     "close the list: roundup_power2_divisions:[256:1,>:4]", false},
    {"max_split_size_mb too small, must be", nullptr, "torch.alloc-conf-max-split",
     "max_split_size_mb below the 20 MiB minimum", "set max_split_size_mb to at least 21", false},
    {"garbage_collect_threshold", "set it", "torch.alloc-conf-gc-threshold",
     "garbage_collection_threshold outside (0, 1)",
     "set garbage_collection_threshold strictly between 0 and 1, e.g. 0.8", false},
    {"For roundups, the", nullptr, "torch.alloc-conf-roundup",
     "roundup_power2_divisions needs powers of 2",
     "use powers of 2 (or 0) for the divisions and power-of-2 interval starts", false},
    {"expandable_segments not supported on this platform", nullptr, "torch.expandable-unsupported",
     "expandable_segments:True is ignored on this platform",
     "drop expandable_segments (the driver or platform has no virtual memory management)", true},
    {"backend:cudaMallocAsync ignores", nullptr, "torch.malloc-async-ignores",
     "backend:cudaMallocAsync ignores the native allocator's options",
     "remove max_split_size_mb / roundup_power2_divisions / garbage_collection_threshold or use "
     "the native backend",
     true},
};

}  // namespace

std::vector<ConfigError> FindConfigErrors(std::string_view text) {
  std::vector<ConfigError> out;
  std::set<std::string> seen;
  for (const Line& line : SplitLines(text)) {
    for (const Rule& r : kRules) {
      if (line.text.find(r.needle) == std::string_view::npos) continue;
      if (r.needle2 && line.text.find(r.needle2) == std::string_view::npos) continue;
      if (!seen.insert(r.id).second) continue;
      out.push_back({r.id, r.what, r.fix, r.ignored, line.number, Excerpt(line.text)});
    }
  }
  return out;
}

}  // namespace memtune::diagnose
