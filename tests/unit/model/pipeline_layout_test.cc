// MCore pipeline_model_parallel_layout strings: expansion, stage order, validation.
#include "memtune/model/pipeline_layout.h"

#include <gtest/gtest.h>

namespace memtune::model {
namespace {

TEST(PipelineLayoutTest, ExpandsGroupsAndRepeats) {
  // The example of MCore's parse_str_to_list docstring.
  auto layout = ParsePipelineLayout("Ettt|(tt|)*29,m|L", 4);
  ASSERT_TRUE(layout.has_value()) << layout.error().Describe();
  ASSERT_EQ(layout->stages.size(), 32u);
  EXPECT_EQ(layout->virtual_pipeline_size, 8);
  EXPECT_EQ(layout->stages[0], "Ettt");
  EXPECT_EQ(layout->stages[1], "tt");
  EXPECT_EQ(layout->stages[30], "m");
  EXPECT_EQ(layout->stages[31], "L");
  EXPECT_EQ(layout->Count('t'), 61);
}

TEST(PipelineLayoutTest, StagesAreRankMajorWithinAVirtualStage) {
  auto layout = ParsePipelineLayout("Et|tt|ttt|tttL", 2);
  ASSERT_TRUE(layout.has_value());
  EXPECT_EQ(layout->virtual_pipeline_size, 2);
  EXPECT_EQ(layout->DecoderLayers(0, 0), 1);  // stage 0
  EXPECT_EQ(layout->DecoderLayers(1, 0), 2);  // stage 1
  EXPECT_EQ(layout->DecoderLayers(0, 1), 3);  // stage 2
  EXPECT_EQ(layout->DecoderLayers(1, 1), 3);  // stage 3 ("tttL")
  EXPECT_EQ(layout->DecoderLayers(2, 1), 0);  // out of range
}

TEST(PipelineLayoutTest, BridgeRecipeLayout) {
  auto layout = ParsePipelineLayout("Et*2|(t*2|)*34,t*3|(t*2|)*3,tL", 8);
  ASSERT_TRUE(layout.has_value());
  EXPECT_EQ(layout->stages.size(), 40u);
  EXPECT_EQ(layout->virtual_pipeline_size, 5);
  EXPECT_TRUE(ValidatePipelineLayout(*layout, 80, 0).empty());
}

TEST(PipelineLayoutTest, Errors) {
  auto bad_char = ParsePipelineLayout("Etx|tL", 2);
  ASSERT_FALSE(bad_char.has_value());
  EXPECT_EQ(bad_char.error().field, "model.pipeline_model_parallel_layout");
  EXPECT_EQ(bad_char.error().message,
            "invalid layer character 'x'; known layer characters: E, L, t, m");

  auto bad_count = ParsePipelineLayout("Et|t|tL", 2);
  ASSERT_FALSE(bad_count.has_value());
  EXPECT_EQ(bad_count.error().message,
            "the number of stages (3) must be divisible by pipeline_model_parallel_size (2)");

  auto huge = ParsePipelineLayout("Et*99999999|L", 2);
  ASSERT_FALSE(huge.has_value());
  EXPECT_EQ(huge.error().message, "the layout expands to more than 1048576 layers");
}

TEST(PipelineLayoutTest, RepeatsFollowPythonReSub) {
  // MCore expands r"\(([^)]+)\)\*(\d+)" first, then r"(.)\*(\d+)", leftmost and without
  // overlap: the group may contain '(' ("((t)*2" is "(t" twice), leading zeros are decimal.
  auto nested = ParsePipelineLayout("E((t)*2)*2|tL", 1);
  ASSERT_FALSE(nested.has_value());  // "(t(t)*2|tL" keeps a '('
  EXPECT_EQ(nested.error().message,
            "invalid layer character '('; known layer characters: E, L, t, m");
  auto zeros = ParsePipelineLayout("Et*0003t*0L", 1);
  ASSERT_TRUE(zeros.has_value()) << zeros.error().Describe();
  EXPECT_EQ(zeros->stages[0], "EtttL");
  auto group_of_repeats = ParsePipelineLayout("E(t*2|)*2tL", 3);
  ASSERT_TRUE(group_of_repeats.has_value()) << group_of_repeats.error().Describe();
  EXPECT_EQ(group_of_repeats->stages, (std::vector<PipelineStage>{"Ett", "tt", "tL"}));
}

TEST(PipelineLayoutTest, VeryLongLayoutIsParsedWithoutRecursion) {
  // A 300,000-character group overflowed the stack in std::regex (ASan stack-overflow).
  const std::string layout = "E(" + std::string(300000, 't') + ")*1|L";
  auto parsed = ParsePipelineLayout(layout, 2);
  ASSERT_TRUE(parsed.has_value()) << parsed.error().Describe();
  EXPECT_EQ(parsed->Count('t'), 300000);
  auto endless = ParsePipelineLayout(std::string(2000000, 't') + "*2", 1);
  ASSERT_FALSE(endless.has_value());
  EXPECT_EQ(endless.error().message, "the layout expands to more than 1048576 layers");
}

TEST(PipelineLayoutTest, ValidationListsEveryProblem) {
  auto layout = ParsePipelineLayout("tE|tmtE", 2);
  ASSERT_TRUE(layout.has_value());
  EXPECT_EQ(
      ValidatePipelineLayout(*layout, 4, 0),
      (std::vector<std::string>{
          "the first layer must be embedding (E)", "the last layer must be loss (L)",
          "embedding (E) must be specified exactly once", "loss (L) must be specified exactly once",
          "the layout has 3 decoder layers (t) but num_layers is 4",
          "the layout has 1 MTP layers (m) but mtp_num_layers is 0",
          "decoder layers (t) must be placed before MTP layers (m)"}));
}

}  // namespace
}  // namespace memtune::model
