// torchtitan TOML -> job document (torchtitan @ 9dec370 config/job_config.py field names;
// flavors from torchtitan/models/llama3/__init__.py llama3_args and, for Qwen3's dense
// flavors, d880de214 torchtitan/models/qwen3/__init__.py qwen3_configs).
#include "model/torchtitan_toml.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <utility>
#include <vector>

namespace memtune::model::internal {
namespace {

std::string Trim(std::string_view s) {
  const auto a = s.find_first_not_of(" \t\r");
  if (a == std::string_view::npos) return "";
  const auto b = s.find_last_not_of(" \t\r");
  return std::string(s.substr(a, b - a + 1));
}

// The line without a trailing comment (a '#' outside quotes).
std::string StripComment(std::string_view line) {
  char quote = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '#') {
      return std::string(line.substr(0, i));
    }
  }
  return std::string(line);
}

// A value of the subset: a whole string, a one-line array, or a bare scalar (integer,
// float, true / false).
// A batch size or parallel degree that a product may use: 1 to 2^20 - 1.
Result<std::int64_t> PositiveCount(const std::string& text, const char* key) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 1 || v >= (1 << 20)) {
    return InvalidConfig(key, std::string(key) + " = " + text + " is not a count",
                         "allowed: an integer from 1 to 1048575");
  }
  return v;
}

Status CheckValue(const std::string& value, const std::string& where) {
  if (value.empty()) return InvalidInput(where, "has no value after '='");
  const char first = value.front();
  if ((first == '"' || first == '\'') && (value.size() < 2 || value.back() != first)) {
    return InvalidInput(where, "an unterminated string: " + value);
  }
  if (first == '[' && value.back() != ']') {
    return InvalidInput(where, "an array that does not end on its line");
  }
  return OkStatus();
}

std::string Unquote(const std::string& value) {
  if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'')) {
    return value.substr(1, value.size() - 2);
  }
  return value;
}

// A Qwen3 flavor without a catalog preset, as job model fields: torchtitan d880de214
// torchtitan/models/qwen3/__init__.py qwen3_configs (vocab 151936, head_dim 128, qk_norm,
// SwiGLU, RMSNorm, no biases). Untied: at d880de214 Qwen3Model builds tok_embeddings and
// output separately and never ties them (enable_weight_tying took effect in d12ff2fc1).
std::string Qwen3Fields(int dim, int layers, int heads, int kv_heads, int hidden) {
  auto line = [](const char* key, const std::string& value) {
    return std::string("  ") + key + ": " + value + "\n";
  };
  return line("num_layers", std::to_string(layers)) + line("hidden_size", std::to_string(dim)) +
         line("ffn_hidden_size", std::to_string(hidden)) +
         line("num_attention_heads", std::to_string(heads)) +
         line("num_query_groups", std::to_string(kv_heads)) + line("kv_channels", "128") +
         line("vocab_size", "151936") + line("share_embeddings_and_output_weights", "false") +
         line("gated_linear_unit", "true") + line("activation_func", "silu") +
         line("normalization", "RMSNorm") + line("add_bias_linear", "false") +
         line("add_qkv_bias", "false") + line("qk_layernorm", "true") +
         line("position_embedding_type", "rope");
}

// The job model fields of a torchtitan model flavor: a catalog preset where one matches
// (llama3_args: dim, layers, heads, kv heads and ffn match the presets' config.json
// architectures; qwen3 8B is the qwen3-8b preset's shape), else Qwen3Fields.
using Flavors = std::vector<std::pair<std::string, std::string>>;  // flavor, model fields

const std::map<std::string, Flavors>& ModelFlavors() {
  static const std::map<std::string, Flavors> kFlavors = {
      {"llama3",
       {{"8B", "  preset: llama3-8b\n"},
        {"70B", "  preset: llama3-70b\n"},
        {"405B", "  preset: llama3.1-405b\n"}}},
      {"qwen3",
       {{"0.6B", Qwen3Fields(1024, 28, 16, 8, 3072)},
        {"1.7B", Qwen3Fields(2048, 28, 16, 8, 6144)},
        {"4B", Qwen3Fields(2560, 36, 32, 8, 9728)},
        {"8B", "  preset: qwen3-8b\n"},
        {"14B", Qwen3Fields(5120, 40, 40, 8, 17408)},
        {"32B", Qwen3Fields(5120, 64, 64, 8, 25600)}}}};
  return kFlavors;
}

std::string FlavorList(const Flavors& flavors) {
  std::string list;
  for (const auto& [flavor, preset] : flavors) list += (list.empty() ? "" : ", ") + flavor;
  return list;
}

}  // namespace

bool LooksLikeToml(std::string_view text) {
  bool header = false;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t end = std::min(text.find('\n', pos), text.size());
    std::string line = Trim(text.substr(pos, end - pos));
    pos = end + 1;
    if (line.empty() || line.front() == '#') continue;
    if (line.front() == '[' && line.find(']') != std::string::npos &&
        line.find(':') == std::string::npos) {
      header = true;
      continue;
    }
    const auto eq = line.find(" = ");
    if (header && eq != std::string::npos && line.find(':') > eq) return true;
    if (!header) return false;
  }
  return false;
}

Result<TomlJob> TorchtitanTomlToJob(std::string_view text, const std::string& source) {
  std::map<std::string, std::string> values;  // "table.key" -> value text
  std::string table;
  std::size_t pos = 0;
  int line_no = 0;
  while (pos < text.size()) {
    const std::size_t end = std::min(text.find('\n', pos), text.size());
    const std::string line = Trim(StripComment(text.substr(pos, end - pos)));
    pos = end + 1;
    ++line_no;
    if (line.empty()) continue;
    const std::string where = source + ":" + std::to_string(line_no);
    if (line.front() == '[') {
      if (line.back() != ']' || line.size() < 3)
        return InvalidInput(where, "a malformed table header");
      table = Trim(std::string_view(line).substr(1, line.size() - 2));
      continue;
    }
    const auto eq = line.find('=');
    if (eq == std::string::npos) {
      return InvalidInput(where, "is not `key = value`: " + line.substr(0, 80));
    }
    const std::string key = Trim(std::string_view(line).substr(0, eq));
    const std::string value = Trim(std::string_view(line).substr(eq + 1));
    MEMTUNE_RETURN_IF_ERROR(CheckValue(value, where));
    values[table.empty() ? key : table + "." + key] = value;
  }

  TomlJob out;
  auto get = [&](const char* key, const char* fallback) {
    const auto it = values.find(key);
    return it == values.end() ? std::string(fallback) : Unquote(it->second);
  };
  const std::string name = get("model.name", "llama3");
  const std::string flavor = get("model.flavor", "");
  const auto model = ModelFlavors().find(Unquote(name));
  if (model == ModelFlavors().end()) {
    return Unsupported(
        "model.name", "torchtitan model '" + Unquote(name) + "' is not supported",
        "supported: llama3 (flavors 8B, 70B, 405B), qwen3 (dense flavors 0.6B to 32B)");
  }
  const auto preset = std::find_if(model->second.begin(), model->second.end(),
                                   [&](const auto& f) { return f.first == Unquote(flavor); });
  if (preset == model->second.end()) {
    return Unsupported("model.flavor",
                       model->first + " flavor '" + Unquote(flavor) + "' is not supported",
                       "supported: " + FlavorList(model->second));
  }
  const std::string mode = get("activation_checkpoint.mode", "selective");
  const std::string option = get("activation_checkpoint.selective_ac_option", "2");
  std::string ac = mode == "none" ? "none" : mode == "full" ? "full" : "";
  if (mode == "selective") ac = option == "op" ? "selective_op" : "selective_layer";
  if (ac.empty()) {
    return Unsupported("activation_checkpoint.mode", "mode '" + mode + "' is not supported",
                       "allowed: none, selective, full");
  }
  if (mode == "selective" && option != "op" && option != "2") {
    out.warnings.push_back("activation_checkpoint.selective_ac_option = " + option +
                           ": memtune models torchtitan's default, every 2nd layer");
  }
  const std::string components = get("compile.components", "[\"model\", \"loss\"]");
  const bool compile = get("compile.enable", "false") == "true";
  const std::string converters = get("model.converters", "[]");
  const std::string reshard = get("parallelism.fsdp_reshard_after_forward", "default");
  std::string shard = get("parallelism.data_parallel_shard_degree", "-1");
  const std::string seq = get("training.seq_len", "2048");
  // Pipeline parallelism (torchtitan v0.2.2 pipeline_parallel.py build_pipeline_schedule):
  // the local batch is split into local_batch_size / pipeline_parallel_microbatch_size
  // micro-batches, memtune's micro_batch_size and micro-batch count.
  const std::string pp = get("parallelism.pipeline_parallel_degree", "1");
  const std::string local_batch =
      get("training.local_batch_size", get("training.batch_size", "8").c_str());
  std::string micro_batch = local_batch, global_batch = get("training.global_batch_size", "-1");
  std::string schedule;
  if (pp != "1") {
    schedule = get("parallelism.pipeline_parallel_schedule", "1F1B");
    if (schedule != "1F1B" && schedule != "GPipe" && schedule != "Interleaved1F1B") {
      return Unsupported("parallelism.pipeline_parallel_schedule",
                         "schedule '" + schedule + "' is not modelled",
                         "allowed: 1F1B, GPipe, Interleaved1F1B");
    }
    if (values.count("parallelism.pipeline_parallel_layers_per_stage")) {
      return Unsupported("parallelism.pipeline_parallel_layers_per_stage",
                         "stages sized by layers_per_stage are not translated",
                         "set model.virtual_pipeline_model_parallel_size in a job document");
    }
    micro_batch = get("parallelism.pipeline_parallel_microbatch_size", "1");
    if (global_batch == "-1") {  // torchtitan: local_batch_size x the data-parallel degree
      const std::string replicate = get("parallelism.data_parallel_replicate_degree", "1");
      if (shard == "-1") {
        return InvalidConfig(
            "parallelism.data_parallel_shard_degree",
            "-1 with pipeline parallelism: memtune counts the micro-batches from the global "
            "batch",
            "set parallelism.data_parallel_shard_degree or training.global_batch_size");
      }
      std::int64_t product = 1;
      for (const auto& [key, text] :
           {std::pair{"training.local_batch_size", local_batch},
            std::pair{"parallelism.data_parallel_shard_degree", shard},
            std::pair{"parallelism.data_parallel_replicate_degree", replicate}}) {
        MEMTUNE_TRY(const std::int64_t v, PositiveCount(text, key));
        product *= v;  // each below 2^20: no overflow
      }
      global_batch = std::to_string(product);
    }
  }
  std::string y;
  y += "# Translated from the torchtitan config " + source + " by memtune.\n";
  y += "model:\n" + preset->second;
  y += "  tensor_model_parallel_size: " + get("parallelism.tensor_parallel_degree", "1") + "\n";
  y += "  pipeline_model_parallel_size: " + get("parallelism.pipeline_parallel_degree", "1") + "\n";
  // torchtitan _get_pipeline_metadata: a multi-stage schedule gets 2 stages per rank.
  if (schedule == "Interleaved1F1B") y += "  virtual_pipeline_model_parallel_size: 2\n";
  y += "  context_parallel_size: " + get("parallelism.context_parallel_degree", "1") + "\n";
  y += "  seq_length: " + seq + "\n";
  y += "train:\n  micro_batch_size: " + micro_batch + "\n";
  if (global_batch != "-1") y += "  global_batch_size: " + global_batch + "\n";
  y += "dataset:\n  seq_length: " + seq + "\n";
  y += "memtune:\n  framework: fsdp2\n  fsdp2:\n";
  y += "    shard_degree: " + shard + "\n";
  y += "    activation_checkpoint: " + ac + "\n";
  y += std::string("    compile: ") + (compile ? "true" : "false") + "\n";
  y += std::string("    compile_loss: ") +
       (compile && components.find("loss") != std::string::npos ? "true" : "false") + "\n";
  y += std::string("    float8: ") +
       (converters.find("float8") != std::string::npos ? "true" : "false") + "\n";
  // "default" is left to memtune's own default: true, false under pipeline parallelism.
  if (reshard != "default") {
    y +=
        std::string("    reshard_after_forward: ") + (reshard == "never" ? "false" : "true") + "\n";
  }
  if (!schedule.empty()) y += "    pipeline_schedule: " + schedule + "\n";
  if (values.count("training.mixed_precision_param")) {
    const std::string p = get("training.mixed_precision_param", "bfloat16");
    y += "    param_dtype: " +
         std::string(p == "float32"   ? "fp32"
                     : p == "float16" ? "fp16"
                                      : "bf16") +
         "\n";
  }
  if (values.count("training.mixed_precision_reduce")) {
    const std::string r = get("training.mixed_precision_reduce", "float32");
    y += "    reduce_dtype: " +
         std::string(r == "bfloat16"  ? "bf16"
                     : r == "float16" ? "fp16"
                                      : "fp32") +
         "\n";
  }
  out.yaml = y;
  static const char* kRead[] = {"model.name",
                                "model.flavor",
                                "model.converters",
                                "activation_checkpoint.mode",
                                "activation_checkpoint.selective_ac_option",
                                "compile.enable",
                                "compile.components",
                                "parallelism.fsdp_reshard_after_forward",
                                "parallelism.data_parallel_shard_degree",
                                "parallelism.tensor_parallel_degree",
                                "parallelism.pipeline_parallel_degree",
                                "parallelism.pipeline_parallel_schedule",
                                "parallelism.data_parallel_replicate_degree",
                                "parallelism.pipeline_parallel_microbatch_size",
                                "parallelism.context_parallel_degree",
                                "training.seq_len",
                                "training.local_batch_size",
                                "training.batch_size",
                                "training.global_batch_size",
                                "training.mixed_precision_param",
                                "training.mixed_precision_reduce"};
  for (const auto& [key, value] : values) {
    if (std::find(std::begin(kRead), std::end(kRead), key) == std::end(kRead)) {
      out.ignored.push_back(key);
    }
  }
  return out;
}

}  // namespace memtune::model::internal
