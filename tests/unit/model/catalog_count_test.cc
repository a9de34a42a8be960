// End to end through the one job parser: every catalog preset, every HF model_type and a
// Megatron-LM command line become a Job whose parameter count is the published one (or
// the documented relation to it).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "memtune/model/catalog.h"
#include "memtune/model/job_parse.h"
#include "memtune/model/parameters.h"
#include "model/hf_config.h"
#include "model/megatron_args.h"

namespace memtune::model {
namespace {

Result<JobDocument> ParseWithFiles(const std::string& text,
                                   const std::map<std::string, std::string>& files) {
  ParseOptions options;
  options.read_file = [files](const std::string& path) -> Result<std::string> {
    auto it = files.find(path);
    if (it == files.end()) return NotFound(path, "no such file");
    return it->second;
  };
  return ParseJobText(text, options);
}

std::int64_t Count(const Job& job) { return CountParameters(job.model, PaddedVocabSize(job)); }

TEST(CatalogCountTest, EveryPresetMatchesItsPinnedCount) {
  for (const std::string& name : ModelPresetNames()) {
    SCOPED_TRACE(name);
    auto doc = ParseJobText("model: {preset: " + name + "}\n");
    ASSERT_TRUE(doc.has_value()) << doc.error().Describe() << "; " << doc.error().hint;
    auto info = ModelPresetInfoFor(name);
    ASSERT_TRUE(info.has_value());
    EXPECT_EQ(Count(doc->job), info->memtune_parameters);
  }
}

TEST(CatalogCountTest, RequiredExactCountsThroughTheParser) {
  for (const auto& [name, count] : {std::pair{"llama3-70b", 70'553'706'496LL},
                                    {"llama3-8b", 8'030'261'248LL},
                                    {"qwen3-8b", 8'190'735'360LL}}) {
    auto doc = ParseJobText(std::string("model: {preset: ") + name + "}\n");
    ASSERT_TRUE(doc.has_value()) << name;
    EXPECT_EQ(Count(doc->job), count) << name;
  }
}

// A config.json of tests/data/hf/ (written in the shape of the public checkpoints').
std::string HfFile(const std::string& name) {
  std::ifstream in(std::string(MEMTUNE_SOURCE_DIR) + "/tests/data/hf/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Minimal config.json texts with the real checkpoints' architecture fields.
const std::map<std::string, std::pair<std::string, std::int64_t>>& HfCases() {
  static const std::map<std::string, std::pair<std::string, std::int64_t>> cases = {
      {"llama",
       {R"({"model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672,
                   "num_attention_heads": 64, "num_hidden_layers": 80, "num_key_value_heads": 8,
                   "max_position_embeddings": 8192, "tie_word_embeddings": false,
                   "vocab_size": 128256})",
        70'553'706'496}},
      {"qwen2",
       {R"({"model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944,
                   "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4,
                   "max_position_embeddings": 131072, "tie_word_embeddings": false,
                   "vocab_size": 152064})",
        7'615'616'512}},  // Qwen2.5-7B
      {"qwen3",
       {R"({"model_type": "qwen3", "head_dim": 128, "hidden_size": 4096,
                   "intermediate_size": 12288, "num_attention_heads": 32, "num_hidden_layers": 36,
                   "num_key_value_heads": 8, "max_position_embeddings": 40960,
                   "tie_word_embeddings": false, "vocab_size": 151936})",
        8'190'735'360}},
      {"qwen3_moe",
       {R"({"model_type": "qwen3_moe", "head_dim": 128, "hidden_size": 2048,
                       "intermediate_size": 6144, "moe_intermediate_size": 768,
                       "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8,
                       "num_hidden_layers": 48, "num_key_value_heads": 4,
                       "max_position_embeddings": 40960, "tie_word_embeddings": false,
                       "vocab_size": 151936})",
        30'532'122'624}},
      {"mixtral",
       {R"({"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
                     "num_attention_heads": 32, "num_experts_per_tok": 2, "num_hidden_layers": 32,
                     "num_key_value_heads": 8, "num_local_experts": 8,
                     "max_position_embeddings": 32768, "vocab_size": 32000})",
        46'702'792'704}},
      {"deepseek_v3",
       {R"({"model_type": "deepseek_v3", "first_k_dense_replace": 3,
                         "hidden_size": 7168, "intermediate_size": 18432, "kv_lora_rank": 512,
                         "max_position_embeddings": 163840, "moe_intermediate_size": 2048,
                         "n_routed_experts": 256, "n_shared_experts": 1,
                         "num_attention_heads": 128, "num_experts_per_tok": 8,
                         "num_hidden_layers": 61, "num_key_value_heads": 128,
                         "num_nextn_predict_layers": 1, "q_lora_rank": 1536,
                         "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
                         "vocab_size": 129280})",
        682'636'487'424}},
      {"mistral",
       {R"({"model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336,
                     "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
                     "max_position_embeddings": 32768, "sliding_window": 4096,
                     "tie_word_embeddings": false, "vocab_size": 32000})",
        7'241'732'096}},  // Mistral-7B-v0.1
      {"phi3",
       {R"({"model_type": "phi3", "hidden_size": 3072, "intermediate_size": 8192,
                  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
                  "max_position_embeddings": 4096, "tie_word_embeddings": false,
                  "vocab_size": 32064})",
        3'821'079'552}},  // Phi-3-mini-4k
      {"gemma",
       {R"({"model_type": "gemma", "head_dim": 256, "hidden_act": "gelu",
                   "hidden_size": 3072, "intermediate_size": 24576, "num_attention_heads": 16,
                   "num_hidden_layers": 28, "num_key_value_heads": 16,
                   "max_position_embeddings": 8192, "vocab_size": 256000})",
        8'537'680'896}},  // Gemma-7B (tied embeddings by GemmaConfig's default)
      {"gpt_oss",
       {R"({"model_type": "gpt_oss", "attention_bias": true, "head_dim": 64,
                     "hidden_size": 2880, "intermediate_size": 2880,
                     "max_position_embeddings": 131072, "num_attention_heads": 64,
                     "num_experts_per_tok": 4, "num_hidden_layers": 36, "num_key_value_heads": 8,
                     "num_local_experts": 128, "rope_scaling": {"rope_type": "yarn"},
                     "sliding_window": 128, "vocab_size": 201088})",
        116'829'156'672}},
      {"gemma2", {HfFile("gemma-2-9b.json"), 9'241'705'984}},
      {"gemma3", {HfFile("gemma-3-4b.json"), 3'880'263'168}},
      {"gemma3_text", {HfFile("gemma-3-1b.json"), 999'885'952}},
  };
  return cases;
}

// Gemma 2 / 3: 4 norms a layer (pre and post each sub-layer), head_dim 256 (128 for the
// 27B models) independent of hidden / heads, q/k norms in Gemma 3, tied embeddings, GeGLU.
// Gemma 2 and Gemma 3 1B are the published checkpoint totals; Gemma 3 4B/12B/27B are the
// text model of a multimodal checkpoint (its published total adds the SigLIP tower).
TEST(CatalogCountTest, GemmaConfigsCountTheirArchitecture) {
  for (const auto& [file, expected] : {std::pair{"gemma-2-2b.json", 2'614'341'888LL},
                                       {"gemma-2-9b.json", 9'241'705'984LL},
                                       {"gemma-2-27b.json", 27'227'128'320LL},
                                       {"gemma-3-1b.json", 999'885'952LL},
                                       {"gemma-3-4b.json", 3'880'263'168LL},
                                       {"gemma-3-12b.json", 11'766'034'176LL},
                                       {"gemma-3-27b.json", 27'009'346'304LL}}) {
    SCOPED_TRACE(file);
    auto doc = ParseWithFiles("model: {hf_config: config.json}\n", {{"config.json", HfFile(file)}});
    ASSERT_TRUE(doc.has_value()) << doc.error().Describe() << "; " << doc.error().hint;
    EXPECT_EQ(Count(doc->job), expected);
    EXPECT_TRUE(doc->job.model.sublayer_post_norms);
    EXPECT_TRUE(doc->job.model.share_embeddings_and_output_weights);
    EXPECT_EQ(doc->job.model.qk_layernorm, std::string(file).find("gemma-3") == 0);
    EXPECT_EQ(doc->job.model.final_logit_softcapping.has_value(),
              std::string(file).find("gemma-2") == 0);
  }
}

TEST(CatalogCountTest, EveryHfModelTypeThroughTheParser) {
  for (const std::string& type : SupportedHfModelTypes()) {
    SCOPED_TRACE(type);
    ASSERT_TRUE(HfCases().count(type));
    const auto& [json, expected] = HfCases().at(type);
    auto doc = ParseWithFiles("model: {hf_config: config.json}\n", {{"config.json", json}});
    ASSERT_TRUE(doc.has_value()) << doc.error().Describe() << "; " << doc.error().hint;
    EXPECT_EQ(Count(doc->job), expected);
  }
}

TEST(CatalogCountTest, MegatronCommandLineThroughTheParser) {
  auto args = MegatronArgsToJobNode(
      "torchrun --nproc-per-node 8 pretrain_gpt.py --tensor-model-parallel-size 8 "
      "--num-layers 80 --hidden-size 8192 --ffn-hidden-size 28672 --num-attention-heads 64 "
      "--group-query-attention --num-query-groups 8 --seq-length 4096 "
      "--max-position-embeddings 8192 --swiglu --normalization RMSNorm --disable-bias-linear "
      "--untie-embeddings-and-output-weights --position-embedding-type rope "
      "--vocab-size 128256 --micro-batch-size 1 --global-batch-size 8 --bf16");
  ASSERT_TRUE(args.has_value()) << args.error().Describe();
  auto doc = ParseJobText(YAML::Dump(args->job));
  ASSERT_TRUE(doc.has_value()) << doc.error().Describe() << "; " << doc.error().hint;
  // Megatron-LM pads the vocab to a multiple of 128 * TP = 1024: 128256 -> 129024.
  EXPECT_EQ(PaddedVocabSize(doc->job), 129'024);
  EXPECT_EQ(Count(doc->job), 70'553'706'496 + 2 * (129'024 - 128'256) * 8'192LL);
  EXPECT_EQ(doc->job.memtune.world_size, 8);
  EXPECT_TRUE(doc->job.ddp.grad_reduce_in_fp32);
  EXPECT_EQ(doc->job.model.params_dtype, Dtype::kBf16);
}

}  // namespace
}  // namespace memtune::model
