// Rules on the training command's environment: where memory variables are set (env.*), the
// allocator config as PyTorch parses it (alloc-conf.*, through alloc/env_config.h, the one
// interpretation), Megatron-LM's guards on it, and NCCL variable names.
#include <set>

#include "lint/lint_internal.h"
#include "memtune/alloc/env_config.h"

namespace memtune::lint {
namespace {

const std::string kCuda(alloc::kCudaAllocConfVar);
const std::string kGeneric(alloc::kAllocConfVar);

// Variables whose value changes memory or the allocator (lint-rules.md sections 1 and 2).
bool IsMemoryVariable(const std::string& name) {
  static const std::set<std::string> kNames = {kCuda,
                                               kGeneric,
                                               "PYTORCH_HIP_ALLOC_CONF",
                                               "TORCH_NCCL_AVOID_RECORD_STREAMS",
                                               "NCCL_AVOID_RECORD_STREAMS",
                                               "NCCL_GRAPH_REGISTER",
                                               "NCCL_NVLS_ENABLE",
                                               "CUDA_DEVICE_MAX_CONNECTIONS",
                                               "NVTE_CPU_OFFLOAD_V1"};
  return kNames.contains(name);
}

Place At(const model::ScriptAssignment& a, const std::string& file) {
  return Place{a.at.file.empty() ? file : a.at.file, a.at.line, a.at.column,
               a.name + "=" + a.value};
}

std::string Seen(const Context& c, const std::string& name) {
  const auto it = c.env.find(name);
  return it == c.env.end() ? "runs without " + name : "runs with " + name + "=" + it->second;
}

// The comma-separated item of `value` that starts with `key` ("" when none).
std::string ItemOf(const std::string& value, const std::string& key) {
  std::size_t start = 0;
  while (start <= value.size()) {
    const std::size_t end = std::min(value.find(',', start), value.size());
    std::string item = value.substr(start, end - start);
    const std::size_t first = item.find_first_not_of(" \t");
    if (first != std::string::npos && item.compare(first, key.size(), key) == 0) {
      return item.substr(first);
    }
    start = end + 1;
  }
  return key;
}

// The first item written `key=value` (an `=` before any `:`), or "". PyTorch's tokenizer
// splits on , : [ ] only, so such an item is one unknown key or runs out of tokens.
std::string EqualsItem(const std::string& value) {
  std::size_t start = 0;
  while (start < value.size()) {
    const std::size_t end = std::min(value.find(',', start), value.size());
    const std::string item = value.substr(start, end - start);
    const std::size_t eq = item.find('=');
    if (eq != std::string::npos && eq < item.find(':')) return item;
    start = end + 1;
  }
  return "";
}

// A parse error of `var`'s string, named by its cause.
void ParseError(const Context& c, const std::string& var, const Error& e) {
  const std::string& value = c.env.at(var);
  std::string_view rule = kRuleInvalid;
  const std::string equals = EqualsItem(value);
  if (!equals.empty()) {
    rule = kRuleEquals;
  } else if (e.message.find("True") != std::string::npos &&
             e.message.find("False") != std::string::npos) {
    rule = kRuleBoolCase;
  } else if (e.message.find("Unrecognized") != std::string::npos) {
    rule = kRuleUnknownOption;
  }
  Place place = EnvPlace(c, var);
  place.text = rule == kRuleEquals ? equals : ItemOf(value, e.field);
  std::string fix;
  if (rule == kRuleEquals) {
    std::string item = place.text;
    item[item.find('=')] = ':';
    fix = "write " + item;
  } else if (rule == kRuleBoolCase) {
    const std::size_t colon = place.text.find(':');
    const std::string v = colon == std::string::npos ? "" : place.text.substr(colon + 1);
    const bool on = v == "true" || v == "1" || v == "yes" || v == "TRUE" || v == "on";
    fix = "write " + place.text.substr(0, colon) + (on ? ":True" : ":False");
  }
  c.Add(MakeFinding(rule, place,
                    "PyTorch " + c.torch_version.ToString() + " rejects " + var +
                        " at the first CUDA allocation: " + e.message,
                    fix));
}

// Parses one variable's string as the release does; reports the error or the combination
// findings of a string that parses.
void CheckString(const Context& c, const std::string& var) {
  if (c.env.at(var).find_first_of(" \t") != std::string::npos) {
    c.Add(MakeFinding(kRuleWhitespace, EnvPlace(c, var),
                      var + " holds whitespace: PyTorch drops it, but Megatron-LM's "
                            "nccl_ub and CUDA-graph guards compare items exactly and do not "
                            "see the option"));
  }
  Result<alloc::AllocatorConfig> config =
      alloc::ParseAllocatorConfig(c.env.at(var), c.torch_version);
  if (!config) return ParseError(c, var, config.error());
  if (config->expandable_segments && config->HasMaxSplitSize()) {
    Place place = EnvPlace(c, var);
    place.text = ItemOf(c.env.at(var), "max_split_size_mb");
    c.Add(MakeFinding(kRuleMaxSplitExpandable, place,
                      var + " sets max_split_size_mb with expandable_segments:True: expandable "
                            "segments are never split under max_split_size (pytorch#119452), "
                            "and the combination grows reserved memory without bound on "
                            "2.12+ (PR#193400)"));
  }
  for (const std::string& w : config->warnings) {
    c.Add(MakeFinding(kRulePytorchWarning, EnvPlace(c, var), "PyTorch warns: " + w));
  }
}

// Which variable supplies which options when both are set (alloc/env_config.h).
void Precedence(const Context& c) {
  const bool cuda = c.env.contains(kCuda), generic = c.env.contains(kGeneric);
  const alloc::TorchVersion v = c.torch_version;
  const std::string release = "PyTorch " + v.ToString();
  if (generic && !cuda && v < alloc::TorchVersion{2, 9}) {
    c.Add(MakeFinding(kRuleNewNameOnly, EnvPlace(c, kGeneric),
                      release + " reads only PYTORCH_CUDA_ALLOC_CONF: " + kGeneric +
                          " is silently ignored and the allocator runs with its defaults"));
  } else if (generic && !cuda && !v.IsMain()) {
    c.Add(MakeFinding(kRuleNewNameOnly, EnvPlace(c, kGeneric),
                      "only " + kGeneric +
                          " is set: on PyTorch 2.9.1 it was reported silently "
                          "ignored on CUDA (pytorch#183387; fixed in 2.11.0); " +
                          release + " may run with the allocator defaults"));
  }
  if (!cuda || !generic || c.env.at(kCuda) == c.env.at(kGeneric)) return;
  std::string how;
  if (v < alloc::TorchVersion{2, 9}) {
    how = release + " reads only " + kCuda + "; " + kGeneric + " is ignored";
  } else {
    Result<alloc::EnvAllocatorConfig> read = alloc::AllocatorConfigFromEnv(c.env, v);
    if (!read) return;  // the parse error is reported by CheckString
    how = release +
          " takes the device-generic options (expandable_segments, "
          "max_split_size_mb, roundup_power2_divisions, garbage_collection_threshold) from " +
          read->source_var +
          " and the CUDA-specific ones (backend, pinned_*, "
          "release_lock_on_cudamalloc, ...) from " +
          read->cuda_source_var;
  }
  c.Add(MakeFinding(kRuleBothDiffer, EnvPlace(c, kGeneric),
                    kGeneric + "='" + c.env.at(kGeneric) + "' and " + kCuda + "='" +
                        c.env.at(kCuda) + "' differ: " + how));
}

bool CommandHas(const Context& c, std::string_view word) {
  for (const model::ScriptWord& w : c.script.words) {
    if (w.text == word || w.text.starts_with(std::string(word) + "=")) return true;
  }
  return false;
}

// MLM-001/002: Megatron-LM looks for the item `expandable_segments:True` in
// PYTORCH_CUDA_ALLOC_CONF only, case-sensitively.
void GuardBypass(const Context& c) {
  const bool nccl_ub = c.job ? c.job->job.ddp.nccl_ub
                             : CommandHas(c, "--use-nccl-ub") || CommandHas(c, "ddp.nccl_ub");
  const bool graphs = c.job ? c.job->job.model.cuda_graph_impl != model::CudaGraphImpl::kNone
                            : CommandHas(c, "--cuda-graph-impl");
  if (!nccl_ub && !graphs) return;
  Result<alloc::EnvAllocatorConfig> read = alloc::AllocatorConfigFromEnv(c.env, c.torch_version);
  if (!read || !read->config.expandable_segments) return;
  const auto cuda = c.env.find(kCuda);
  const std::string items = cuda == c.env.end() ? "" : "," + cuda->second + ",";
  const bool seen = nccl_ub ? items.find(",expandable_segments:True,") != std::string::npos
                            : items.find("expandable_segments:True") != std::string::npos;
  if (seen) return;
  c.Add(MakeFinding(kRuleGuardBypass, EnvPlace(c, read->source_var),
                    "expandable segments are on (from " + read->source_var + ") with " +
                        (nccl_ub ? "--use-nccl-ub" : "CUDA graphs") +
                        ", but Megatron-LM's guard reads PYTORCH_CUDA_ALLOC_CONF for the exact "
                        "item expandable_segments:True and does not see it: the job starts "
                        "instead of stopping"));
}

}  // namespace

void EnvRules(const Context& c) {
  if (!c.is_script || c.script.command_at.line == 0) return;
  std::set<std::string> reported;
  for (const model::ScriptAssignment& a : c.script.assignments) {
    if (!IsMemoryVariable(a.name) || !a.after_command) continue;
    const auto seen = c.env.find(a.name);
    if ((seen != c.env.end() && seen->second == a.value) || !reported.insert(a.name).second) {
      continue;
    }
    c.Add(MakeFinding(kRuleAfterCommand, At(a, c.file),
                      a.name + " is set after the training command (line " +
                          std::to_string(c.script.command_at.line) +
                          "): the command never sees this value and " + Seen(c, a.name),
                      "move `export " + a.name + "=" + a.value + "` above line " +
                          std::to_string(c.script.command_at.line)));
  }
  for (std::size_t k = c.script.assignments.size(); k-- > 0;) {
    const model::ScriptAssignment& a = c.script.assignments[k];
    if (!IsMemoryVariable(a.name) || a.after_command || c.env.contains(a.name) ||
        !reported.insert(a.name).second) {
      continue;
    }
    const std::string how = a.prefix ? "is the prefix of another command (line " +
                                           std::to_string(a.at.line) +
                                           "), not of the training "
                                           "command"
                                     : "is set but never exported";
    c.Add(MakeFinding(
        kRuleNotExported, At(a, c.file),
        a.name + " " + how + ": the training process does not see it and " + Seen(c, a.name),
        "write `export " + a.name + "=" + a.value + "` before line " +
            std::to_string(c.script.command_at.line)));
  }
}

void AllocConfRules(const Context& c) {
  if (c.env.contains(kCuda)) CheckString(c, kCuda);
  if (c.env.contains(kGeneric) && c.torch_version >= alloc::TorchVersion{2, 9}) {
    CheckString(c, kGeneric);
  }
  Precedence(c);
  GuardBypass(c);
  if (c.env.contains("NCCL_AVOID_RECORD_STREAMS")) {
    c.Add(MakeFinding(
        kRuleAvoidRecordStreams, EnvPlace(c, "NCCL_AVOID_RECORD_STREAMS"),
        "NCCL_AVOID_RECORD_STREAMS is silently ignored: ProcessGroupNCCL reads "
        "only TORCH_NCCL_AVOID_RECORD_STREAMS",
        "rename it TORCH_NCCL_AVOID_RECORD_STREAMS=" + c.env.at("NCCL_AVOID_RECORD_STREAMS")));
  }
}

}  // namespace memtune::lint
