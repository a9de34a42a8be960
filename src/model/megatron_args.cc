// Megatron-LM launch command line -> collected flags (the job is built in
// megatron_args_build.cc). Flag names and arities follow megatron/training/arguments.py
// @ d98e8a64 (TransformerConfig fields become --field-name via ArgumentGroupFactory).
#include "model/megatron_args.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include "memtune/core/suggest.h"
#include "memtune/model/ignored_fields.h"
#include "model/shell_words.h"

namespace memtune::model {
namespace {

using internal::MegatronFlags;

enum class Arity { kSwitch, kValue, kList };

struct KnownFlag {
  std::string_view name;  // without "--"
  Arity arity;
};

constexpr KnownFlag kKnownFlags[] = {
    // Parallel layout.
    {"tensor-model-parallel-size", Arity::kValue},
    {"pipeline-model-parallel-size", Arity::kValue},
    {"num-layers-per-virtual-pipeline-stage", Arity::kValue},
    {"num-virtual-stages-per-pipeline-rank", Arity::kValue},
    {"virtual-pipeline-model-parallel-size", Arity::kValue},
    {"context-parallel-size", Arity::kValue},
    {"expert-model-parallel-size", Arity::kValue},
    {"expert-tensor-parallel-size", Arity::kValue},
    {"sequence-parallel", Arity::kSwitch},
    {"decoder-first-pipeline-num-layers", Arity::kValue},
    {"decoder-last-pipeline-num-layers", Arity::kValue},
    {"account-for-embedding-in-pipeline-split", Arity::kSwitch},
    {"account-for-loss-in-pipeline-split", Arity::kSwitch},
    {"pipeline-model-parallel-layout", Arity::kValue},
    {"tp-comm-overlap", Arity::kSwitch},
    {"overlap-p2p-communication", Arity::kSwitch},
    {"no-overlap-p2p-communication", Arity::kSwitch},
    {"overlap-moe-expert-parallel-comm", Arity::kSwitch},
    {"defer-embedding-wgrad-compute", Arity::kSwitch},
    {"no-gradient-accumulation-fusion", Arity::kSwitch},
    {"microbatch-group-size-per-virtual-pipeline-stage", Arity::kValue},
    {"wgrad-deferral-limit", Arity::kValue},
    // Architecture.
    {"num-layers", Arity::kValue},
    {"hidden-size", Arity::kValue},
    {"ffn-hidden-size", Arity::kValue},
    {"num-attention-heads", Arity::kValue},
    {"group-query-attention", Arity::kSwitch},
    {"num-query-groups", Arity::kValue},
    {"kv-channels", Arity::kValue},
    {"seq-length", Arity::kValue},
    {"encoder-seq-length", Arity::kValue},
    {"max-position-embeddings", Arity::kValue},
    {"swiglu", Arity::kSwitch},
    {"use-te-activation-func", Arity::kSwitch},
    {"squared-relu", Arity::kSwitch},
    {"quick-geglu", Arity::kSwitch},
    {"no-bias-swiglu-fusion", Arity::kSwitch},
    {"no-bias-gelu-fusion", Arity::kSwitch},
    {"normalization", Arity::kValue},
    {"disable-bias-linear", Arity::kSwitch},
    {"add-qkv-bias", Arity::kSwitch},
    {"qk-layernorm", Arity::kSwitch},
    {"untie-embeddings-and-output-weights", Arity::kSwitch},
    {"position-embedding-type", Arity::kValue},
    {"use-rotary-position-embeddings", Arity::kSwitch},
    {"vocab-size", Arity::kValue},
    {"tokenizer-type", Arity::kValue},
    {"tokenizer-model", Arity::kValue},
    {"vocab-file", Arity::kValue},
    {"make-vocab-size-divisible-by", Arity::kValue},
    {"hidden-dropout", Arity::kValue},
    {"attention-dropout", Arity::kValue},
    // MoE.
    {"num-experts", Arity::kValue},
    {"moe-router-topk", Arity::kValue},
    {"moe-ffn-hidden-size", Arity::kValue},
    {"moe-shared-expert-intermediate-size", Arity::kValue},
    {"moe-shared-expert-gate", Arity::kSwitch},
    {"moe-shared-expert-overlap", Arity::kSwitch},
    {"moe-layer-freq", Arity::kValue},
    {"moe-grouped-gemm", Arity::kSwitch},
    {"moe-permute-fusion", Arity::kSwitch},
    {"moe-router-force-load-balancing", Arity::kSwitch},
    {"moe-token-dispatcher-type", Arity::kValue},
    {"moe-router-enable-expert-bias", Arity::kSwitch},
    {"moe-latent-size", Arity::kValue},
    {"moe-expert-capacity-factor", Arity::kValue},
    // MLA and MTP.
    {"multi-latent-attention", Arity::kSwitch},
    {"q-lora-rank", Arity::kValue},
    {"kv-lora-rank", Arity::kValue},
    {"qk-head-dim", Arity::kValue},
    {"qk-pos-emb-head-dim", Arity::kValue},
    {"v-head-dim", Arity::kValue},
    {"mtp-num-layers", Arity::kValue},
    // Batch.
    {"micro-batch-size", Arity::kValue},
    {"global-batch-size", Arity::kValue},
    // Memory levers.
    {"recompute-activations", Arity::kSwitch},
    {"recompute-granularity", Arity::kValue},
    {"recompute-method", Arity::kValue},
    {"recompute-num-layers", Arity::kValue},
    {"recompute-modules", Arity::kList},
    {"distribute-saved-activations", Arity::kSwitch},
    {"cpu-offloading", Arity::kSwitch},
    {"cpu-offloading-num-layers", Arity::kValue},
    {"no-cpu-offloading-activations", Arity::kSwitch},
    {"disable-cpu-offloading-activations", Arity::kSwitch},
    {"cpu-offloading-weights", Arity::kSwitch},
    {"fine-grained-activation-offloading", Arity::kSwitch},
    {"offload-modules", Arity::kList},
    {"cuda-graph-impl", Arity::kValue},
    {"cuda-graph-scope", Arity::kList},
    {"cross-entropy-loss-fusion", Arity::kSwitch},
    {"cross-entropy-fusion-impl", Arity::kValue},
    {"attention-backend", Arity::kValue},
    {"transformer-impl", Arity::kValue},
    {"no-masked-softmax-fusion", Arity::kSwitch},
    {"attention-softmax-in-fp32", Arity::kSwitch},
    // Precision.
    {"bf16", Arity::kSwitch},
    {"fp16", Arity::kSwitch},
    {"fp8-format", Arity::kValue},
    {"fp8-recipe", Arity::kValue},
    {"fp8-param-gather", Arity::kSwitch},
    {"first-last-layers-bf16", Arity::kSwitch},
    {"num-layers-at-start-in-bf16", Arity::kValue},
    {"num-layers-at-end-in-bf16", Arity::kValue},
    {"accumulate-allreduce-grads-in-fp32", Arity::kSwitch},
    {"grad-reduce-in-bf16", Arity::kSwitch},
    // Optimizer and data parallelism.
    {"optimizer", Arity::kValue},
    {"use-distributed-optimizer", Arity::kSwitch},
    {"use-precision-aware-optimizer", Arity::kSwitch},
    {"main-params-dtype", Arity::kValue},
    {"main-grads-dtype", Arity::kValue},
    {"exp-avg-dtype", Arity::kValue},
    {"exp-avg-sq-dtype", Arity::kValue},
    {"optimizer-cpu-offload", Arity::kSwitch},
    {"optimizer-offload-fraction", Arity::kValue},
    {"overlap-grad-reduce", Arity::kSwitch},
    {"overlap-param-gather", Arity::kSwitch},
    {"use-megatron-fsdp", Arity::kSwitch},
    {"data-parallel-sharding-strategy", Arity::kValue},
    {"num-distributed-optimizer-instances", Arity::kValue},
    {"use-nccl-ub", Arity::kSwitch},
};

const KnownFlag* FindFlag(std::string_view name) {
  for (const KnownFlag& flag : kKnownFlags) {
    if (flag.name == name) return &flag;
  }
  return nullptr;
}

bool IsFlag(const std::string& word) { return word.size() > 2 && word.rfind("--", 0) == 0; }

// Shell control operators end the command (a trailing "| tee log", "&& echo done").
bool IsTerminator(const std::string& word) {
  return word == "|" || word == "||" || word == "&&" || word == ";" || word == "&";
}

bool IsRedirect(const std::string& word) {
  return word.rfind('>', 0) == 0 || word.rfind("2>", 0) == 0 || word.rfind("1>", 0) == 0 ||
         word.rfind('<', 0) == 0;
}

bool IsEnvAssignment(const std::string& word) {
  const std::size_t eq = word.find('=');
  if (eq == std::string::npos || eq == 0) return false;
  const auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  return !std::isdigit(static_cast<unsigned char>(word[0])) &&
         std::all_of(word.begin(), word.begin() + static_cast<std::ptrdiff_t>(eq), ident);
}

bool IsScript(const std::string& word) {
  return !IsFlag(word) && word.size() > 3 && word.compare(word.size() - 3, 3, ".py") == 0;
}

// "--name=value" -> ("name", "value", true); "--name" -> ("name", "", false).
struct FlagWord {
  std::string name;
  std::string value;
  bool has_value = false;
};

FlagWord SplitFlag(const std::string& word) {
  const std::size_t eq = word.find('=');
  if (eq == std::string::npos) return {word.substr(2), "", false};
  return {word.substr(2, eq - 2), word.substr(eq + 1), true};
}

// The integer in a torchrun count ("8", "2", "1:4" elastic -> the maximum 4); 0 otherwise.
int LauncherCount(const std::string& text) {
  const std::string last =
      text.substr(text.rfind(':') == std::string::npos ? 0 : text.rfind(':') + 1);
  if (last.empty() || !std::all_of(last.begin(), last.end(), ::isdigit) || last.size() > 6)
    return 0;
  return std::stoi(last);
}

// Reads torchrun's node and per-node process counts from the words before the script.
void ReadLauncher(const std::vector<std::string>& words, MegatronFlags& flags) {
  for (std::size_t i = 0; i < words.size(); ++i) {
    if (!IsFlag(words[i])) continue;
    FlagWord f = SplitFlag(words[i]);
    if (!f.has_value && i + 1 < words.size()) f.value = words[i + 1];
    std::replace(f.name.begin(), f.name.end(), '_', '-');
    if (f.name == "nnodes") flags.nnodes = LauncherCount(f.value);
    if (f.name == "nproc-per-node") flags.nproc_per_node = LauncherCount(f.value);
  }
}

class Collector {
 public:
  Collector(const std::vector<std::string>& words, MegatronFlags& flags,
            std::vector<std::string>& ignored)
      : words_(words), flags_(flags), ignored_(ignored) {}

  Status Run(std::size_t start) {
    for (i_ = start; i_ < words_.size(); ++i_) {
      const std::string& word = words_[i_];
      if (IsTerminator(word)) break;
      if (IsRedirect(word)) continue;
      if (!IsFlag(word)) {
        ignored_.push_back(word);
        continue;
      }
      MEMTUNE_RETURN_IF_ERROR(Flag(SplitFlag(word)));
    }
    return OkStatus();
  }

 private:
  bool NextIsValue() const {
    return i_ + 1 < words_.size() && !IsFlag(words_[i_ + 1]) && !IsTerminator(words_[i_ + 1]);
  }

  Status Flag(const FlagWord& f) {
    const KnownFlag* known = FindFlag(f.name);
    const std::string path = "--" + f.name;
    if (known == nullptr) {
      // Megatron-LM's argparse (allow_abbrev=False) refuses a flag it does not define; a
      // misspelt --tensor-model-parallel-size must not yield the TP 1 estimate.
      if (FindIgnoredInput(path) == nullptr) return UnknownFlag(path);
      ignored_.push_back(path);
      if (!f.has_value && NextIsValue()) ++i_;  // assume an ignored flag takes one value
      return OkStatus();
    }
    switch (known->arity) {
      case Arity::kSwitch:
        if (f.has_value) return InvalidInput(path, "takes no value, got '" + f.value + "'");
        flags_.switches.push_back(f.name);
        return OkStatus();
      case Arity::kValue:
        if (f.has_value) {
          flags_.values.emplace_back(f.name, f.value);
          return OkStatus();
        }
        if (!NextIsValue()) return InvalidInput(path, "expects a value");
        flags_.values.emplace_back(f.name, words_[++i_]);
        return OkStatus();
      case Arity::kList:
        return List(f, path);
    }
    return OkStatus();
  }

  static Status UnknownFlag(const std::string& path) {
    static const std::vector<std::string> kNames = [] {
      std::vector<std::string> names;
      for (const KnownFlag& flag : kKnownFlags) names.push_back("--" + std::string(flag.name));
      for (const IgnoredInput& row : IgnoredInputs()) {
        const std::string_view name = row.name;
        if (name.rfind("--", 0) == 0 && name.back() != '*') names.emplace_back(name);
      }
      return names;
    }();
    std::string hint = DidYouMean(path, kNames);
    return InvalidInput(
        path, "not a Megatron-LM argument (its argparse parser refuses it)",
        hint.empty() ? "allowed: the flags of megatron/training/arguments.py" : hint);
  }

  Status List(const FlagWord& f, const std::string& path) {
    std::vector<std::string> items;
    if (f.has_value) items.push_back(f.value);
    while (NextIsValue()) items.push_back(words_[++i_]);
    if (items.empty()) return InvalidInput(path, "expects one or more values");
    flags_.lists.emplace_back(f.name, items);
    return OkStatus();
  }

  const std::vector<std::string>& words_;
  MegatronFlags& flags_;
  std::vector<std::string>& ignored_;
  std::size_t i_ = 0;
};

}  // namespace

namespace internal {

bool IsReadMegatronFlag(std::string_view flag) {
  return flag.rfind("--", 0) == 0 && FindFlag(flag.substr(2)) != nullptr;
}

}  // namespace internal

Result<MegatronArgsJob> MegatronArgsToJobNode(std::string_view command_line) {
  MEMTUNE_TRY(const std::vector<std::string> words, SplitShellWords(command_line));
  MegatronFlags flags;
  std::size_t pos = 0;
  for (; pos < words.size() && (IsEnvAssignment(words[pos]) || words[pos] == "env"); ++pos) {
    if (words[pos] == "env") continue;
    const std::size_t eq = words[pos].find('=');
    flags.env.emplace_back(words[pos].substr(0, eq), words[pos].substr(eq + 1));
  }
  const auto script =
      std::find_if(words.begin() + static_cast<std::ptrdiff_t>(pos), words.end(), IsScript);
  std::size_t start = pos;
  if (script != words.end()) {
    const std::vector<std::string> launcher(words.begin() + static_cast<std::ptrdiff_t>(pos),
                                            script);
    ReadLauncher(launcher, flags);
    start = static_cast<std::size_t>(script - words.begin()) + 1;
  } else {
    while (start < words.size() && !IsFlag(words[start])) ++start;  // e.g. "python"
  }
  MegatronArgsJob out;
  MEMTUNE_RETURN_IF_ERROR(Collector(words, flags, out.ignored_flags).Run(start));
  MEMTUNE_TRY(out.job, internal::BuildMegatronJob(flags));
  if (!out.job["model"] || !out.job["model"]["vocab_size"]) {
    std::string tokenizer;
    for (const auto& [name, value] : flags.values) {
      if (name == "tokenizer-model") tokenizer = value;
    }
    out.vocab_hint =
        (tokenizer.empty() ? std::string("the command line gives no vocabulary size")
                           : "memtune cannot read tokenizer '" + tokenizer +
                                 "' (a file-based tokenizer memtune does not know)") +
        ": add --vocab-size N to the command line, or --set model.vocab_size=N (the size "
        "len(tokenizer) reports)";
  }
  return out;
}

}  // namespace memtune::model
