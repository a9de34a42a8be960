// The model catalog: names, file text, metadata and the not-found error.
#include "memtune/model/catalog.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace memtune::model {
namespace {

TEST(CatalogTest, ListsEveryPresetSorted) {
  const std::vector<std::string> expected = {
      "deepseek-v3",     "gpt-oss-120b",  "gpt-oss-20b", "gpt3-175b",   "llama3-70b",
      "llama3-8b",       "llama3.1-405b", "llama3.2-1b", "llama3.2-3b", "mixtral-8x7b",
      "qwen3-235b-a22b", "qwen3-30b-a3b", "qwen3-8b"};
  EXPECT_EQ(ModelPresetNames(), expected);
}

TEST(CatalogTest, ReturnsTheFileText) {
  auto text = ModelPresetYaml("llama3-70b");
  ASSERT_TRUE(text.has_value()) << text.error().Describe();
  EXPECT_NE(text->find("name: llama3-70b\n"), std::string::npos);
  EXPECT_NE(text->find("  ffn_hidden_size: 28672\n"), std::string::npos);
}

TEST(CatalogTest, UnknownPresetSuggestsAndLists) {
  auto text = ModelPresetYaml("lama3-8b");
  ASSERT_FALSE(text.has_value());
  EXPECT_EQ(text.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(text.error().field, "model.preset");
  EXPECT_EQ(text.error().message, "unknown model preset 'lama3-8b'");
  EXPECT_EQ(text.error().hint,
            "did you mean 'llama3-8b'? known presets: deepseek-v3, gpt-oss-120b, gpt-oss-20b, "
            "gpt3-175b, llama3-70b, llama3-8b, llama3.1-405b, llama3.2-1b, llama3.2-3b, "
            "mixtral-8x7b, qwen3-235b-a22b, qwen3-30b-a3b, qwen3-8b");
}

TEST(CatalogTest, NoSuggestionForAFarName) {
  auto text = ModelPresetYaml("bert");
  ASSERT_FALSE(text.has_value());
  EXPECT_EQ(text.error().hint.rfind("known presets: deepseek-v3, ", 0), 0u);
}

TEST(CatalogTest, MetadataOfEveryPreset) {
  for (const std::string& name : ModelPresetNames()) {
    SCOPED_TRACE(name);
    auto info = ModelPresetInfoFor(name);
    ASSERT_TRUE(info.has_value()) << info.error().Describe();
    EXPECT_EQ(info->name, name);
    EXPECT_EQ(info->source.rfind("https://", 0), 0u);
    EXPECT_FALSE(info->published_source.empty());
    EXPECT_GT(info->published_parameters, 0);
    // Counts differ only where the entry explains why.
    if (info->relation.empty()) {
      EXPECT_EQ(info->memtune_parameters, info->published_parameters);
    }
  }
}

TEST(CatalogTest, RequiredExactCounts) {
  EXPECT_EQ(ModelPresetInfoFor("llama3-70b")->published_parameters, 70'553'706'496);
  EXPECT_EQ(ModelPresetInfoFor("llama3-8b")->published_parameters, 8'030'261'248);
  EXPECT_EQ(ModelPresetInfoFor("qwen3-8b")->published_parameters, 8'190'735'360);
}

TEST(CatalogTest, DeepSeekRelationAddsUp) {
  auto info = ModelPresetInfoFor("deepseek-v3");
  ASSERT_TRUE(info.has_value());
  // HF total = memtune count + MTP's duplicated embedding and head + FP8 block scales.
  EXPECT_EQ(info->published_parameters,
            info->memtune_parameters + 2 * 129'280LL * 7'168 + 41'540'496);
}

}  // namespace
}  // namespace memtune::model
