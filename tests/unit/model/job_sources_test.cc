// model.preset and model.hf_config: the architecture comes first, explicit fields override.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "memtune/model/catalog.h"
#include "memtune/model/job_parse.h"

namespace memtune::model {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// meta-llama/Meta-Llama-3-8B config.json, trimmed.
constexpr const char* kLlama3_8B = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336,
  "max_position_embeddings": 8192, "model_type": "llama", "num_attention_heads": 32,
  "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
  "rope_theta": 500000.0, "tie_word_embeddings": false, "vocab_size": 128256})";

// An in-memory file system for model.hf_config.
ParseOptions InMemory(std::map<std::string, std::string> files, std::string base_dir = "") {
  ParseOptions options;
  options.base_dir = std::move(base_dir);
  options.read_file = [files](const std::string& path) -> Result<std::string> {
    const auto it = files.find(path);
    if (it == files.end()) return NotFound("model.hf_config", "no file '" + path + "'");
    return it->second;
  };
  return options;
}

std::string Line(const Error& e) { return e.hint.empty() ? e.message : e.message + "; " + e.hint; }

TEST(JobPresetTest, PresetGivesTheArchitecture) {
  auto doc = ParseJobText(
      "model: {preset: llama3-70b}\ndataset: {seq_length: 4096}\nmixed_precision: bf16_mixed\n");
  ASSERT_TRUE(doc.has_value()) << doc.error().Describe();
  const ModelConfig& m = doc->job.model;
  EXPECT_EQ(m.preset, "llama3-70b");
  EXPECT_EQ(m.num_layers, 80);
  EXPECT_EQ(m.hidden_size, 8192);
  EXPECT_EQ(m.ffn_hidden_size, 28672);
  EXPECT_EQ(m.num_query_groups, 8);
  EXPECT_EQ(m.normalization, Normalization::kRMSNorm);
  EXPECT_FALSE(m.share_embeddings_and_output_weights);
  EXPECT_EQ(m.seq_length, 4096);  // the dataset's, not the preset's 8192
  EXPECT_THAT(doc->warnings, IsEmpty());
  EXPECT_EQ(doc->defaulted_fields.count("model.ffn_hidden_size"), 0u);
}

TEST(JobPresetTest, ExplicitFieldsOverrideThePreset) {
  auto doc = ParseJobText("model: {preset: llama3-70b, num_layers: 40, seq_length: 2048}\n");
  ASSERT_TRUE(doc.has_value()) << doc.error().Describe();
  EXPECT_EQ(doc->job.model.num_layers, 40);
  EXPECT_EQ(doc->job.model.hidden_size, 8192);
  EXPECT_EQ(doc->job.model.seq_length, 2048);
}

TEST(JobPresetTest, PresetSeqLengthIsFlagged) {
  auto doc = ParseJobText("model: {preset: llama3-70b}\nmixed_precision: bf16_mixed\n");
  ASSERT_TRUE(doc.has_value());
  EXPECT_EQ(doc->job.model.seq_length, 8192);
  EXPECT_THAT(doc->warnings,
              ElementsAre("model.seq_length = 8192 comes from model.preset (the model's "
                          "max_position_embeddings); set dataset.seq_length (or --seq) to the "
                          "training sequence length"));
}

TEST(JobPresetTest, EveryPresetParsesWithoutWarnings) {
  for (const std::string& name : ModelPresetNames()) {
    auto doc = ParseJobText("model: {preset: " + name +
                            "}\ndataset: {seq_length: 4096}\nmixed_precision: bf16_mixed\n");
    ASSERT_TRUE(doc.has_value()) << name << ": " << doc.error().Describe();
    EXPECT_THAT(doc->warnings, IsEmpty()) << name;
    EXPECT_THAT(doc->ignored_fields, IsEmpty()) << name;
  }
}

TEST(JobPresetTest, UnknownPresetIsNotFound) {
  auto doc = ParseJobText("model: {preset: llama3-71b}\n");
  ASSERT_FALSE(doc.has_value());
  EXPECT_EQ(doc.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(doc.error().field, "model.preset");
  EXPECT_THAT(doc.error().hint, ::testing::StartsWith("did you mean 'llama3-70b'?"));
}

TEST(JobHfConfigTest, ConfigRelativeToTheDocument) {
  auto doc = ParseJobText("model: {hf_config: config.json, num_layers: 2}\n",
                          InMemory({{"runs/config.json", kLlama3_8B}}, "runs"));
  ASSERT_TRUE(doc.has_value()) << doc.error().Describe();
  const ModelConfig& m = doc->job.model;
  EXPECT_EQ(m.hf_config, "config.json");
  EXPECT_EQ(m.num_layers, 2);  // explicit wins
  EXPECT_EQ(m.hidden_size, 4096);
  EXPECT_EQ(m.ffn_hidden_size, 14336);
  EXPECT_EQ(m.num_query_groups, 8);
  EXPECT_EQ(m.vocab_size, 128256);
  EXPECT_TRUE(m.gated_linear_unit);
  EXPECT_EQ(m.seq_length, 8192);
}

TEST(JobHfConfigTest, MissingFileAndBadJson) {
  auto missing = ParseJobText("model: {hf_config: nope.json}\n", InMemory({}));
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(missing.error().message, "no file 'nope.json'");
  auto bad = ParseJobText("model: {hf_config: c.json}\n", InMemory({{"c.json", "{"}}));
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidInput);
}

TEST(JobHfConfigTest, PresetAndHfConfigTogetherIsAnError) {
  auto doc = ParseJobText("model: {preset: llama3-8b, hf_config: c.json}\n", InMemory({}));
  ASSERT_FALSE(doc.has_value());
  EXPECT_EQ(Line(doc.error()),
            "model.preset and model.hf_config are both given; allowed: one of "
            "them (explicit model fields override either)");
}

}  // namespace
}  // namespace memtune::model
