// The minimal inputs of the bad-input findings (issue 22): each is a clear error, never a
// crash, an unbounded build or a silently changed value.
#include <gtest/gtest.h>

#include <string>

#include "memtune/model/job_compose.h"
#include "memtune/model/strict_json.h"
#include "model/hf_config.h"
#include "model/megatron_args.h"
#include "model/moe_freq_pattern.h"

namespace memtune::model {
namespace {

constexpr const char* kLaunch =
    "pretrain_gpt.py --num-layers 4 --hidden-size 256 --num-attention-heads 8 "
    "--vocab-size 1000 --seq-length 128 --micro-batch-size 1 --global-batch-size 8 ";

TEST(HostileInputTest, MoeFreqNestingIsBoundedBeforeRecursing) {
  const std::string deep = std::string(12000, '(') + "1" + std::string(12000, ')');
  auto r = ParseMoeFreq(deep, "--moe-layer-freq");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("deeper than 100"), std::string::npos) << r.error().message;
  EXPECT_TRUE(ParseMoeFreq(std::string(50, '(') + "[1]*2" + std::string(50, ')'), "f"));
}

TEST(HostileInputTest, MoeFreqLongerThanAnyModelIsRefusedWhileParsing) {
  auto r = ParseMoeFreq("[1]*1000000", "--moe-layer-freq");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("more than 100000 entries"), std::string::npos);
}

TEST(HostileInputTest, MoeFreqLengthIsComparedWithTheLayerCount) {
  auto r = MegatronArgsToJobNode(std::string(kLaunch) + "--num-experts 8 --moe-layer-freq '[1]*5'");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("Invalid length of moe_layer_pattern: 5, expected 4"),
            std::string::npos)
      << r.error().message;
}

TEST(HostileInputTest, MisspeltMegatronFlagIsAnErrorWithASuggestion) {
  auto r = MegatronArgsToJobNode(std::string(kLaunch) + "--tensor-model-paralel-size 2");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, "--tensor-model-paralel-size");
  EXPECT_EQ(r.error().hint, "did you mean '--tensor-model-parallel-size'?");
  // A real Megatron-LM flag memtune does not read stays ignored.
  auto ok = MegatronArgsToJobNode(std::string(kLaunch) + "--lr 3e-4");
  ASSERT_TRUE(ok) << ok.error().Describe();
  EXPECT_EQ(ok->ignored_flags, std::vector<std::string>{"--lr"});
}

TEST(HostileInputTest, ZeroLayersPerVirtualStageIsRefused) {
  auto r = MegatronArgsToJobNode(std::string(kLaunch) +
                                 "--pipeline-model-parallel-size 2 "
                                 "--num-layers-per-virtual-pipeline-stage 0");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, "--num-layers-per-virtual-pipeline-stage");
}

TEST(HostileInputTest, StrictJsonRefusesDuplicateKeysAndDeepNesting) {
  auto dup = ParseStrictJson(R"({"a": {"b": 1, "b": 2}})", "x");
  ASSERT_FALSE(dup);
  EXPECT_NE(dup.error().message.find("duplicate key \"b\""), std::string::npos);
  auto deep = ParseStrictJson(std::string(100000, '[') + std::string(100000, ']'), "x");
  ASSERT_FALSE(deep);
  EXPECT_NE(deep.error().message.find("deeper than 100"), std::string::npos);
  auto ok = ParseStrictJson(R"({"a": [1, {"b": null}], "c": "d"})", "x");
  ASSERT_TRUE(ok);
  EXPECT_EQ((*ok)["a"][1]["b"], nullptr);
  EXPECT_EQ(JsonEcho(nlohmann::json(std::string("\xff"))), "\"\xEF\xBF\xBD\"");
}

constexpr const char* kDeepSeek =
    R"({"model_type": "deepseek_v3", "hidden_size": 64, "intermediate_size": 128,
        "num_attention_heads": 4, "vocab_size": 1000, "kv_lora_rank": 16,
        "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16,
        "n_routed_experts": 8, "num_experts_per_tok": 2, )";

TEST(HostileInputTest, HfLayerCountIsCheckedBeforeThePerLayerList) {
  auto r =
      HfConfigToModelNode(std::string(kDeepSeek) + R"("num_hidden_layers": 1000000000000})", "hf");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, "hf.num_hidden_layers");
}

TEST(HostileInputTest, HfSharedExpertProductDoesNotWrap) {
  auto r = HfConfigToModelNode(std::string(kDeepSeek) +
                                   R"("num_hidden_layers": 4, "moe_intermediate_size": 4,
                                      "n_shared_experts": 4611686018427388154})",
                               "hf");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, "hf.n_shared_experts");
}

TEST(HostileInputTest, HfIntegersOf2To63AreReportedAsThemselves) {
  auto r = HfConfigToModelNode(
      R"({"model_type": "llama", "num_hidden_layers": 18446744073709551615})", "hf");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("18446744073709551615"), std::string::npos);
}

TEST(HostileInputTest, MisnamedSetPathIsAnErrorWithTheNearField) {
  JobInputs inputs;
  inputs.document =
      "model: {num_layers: 4, hidden_size: 256, num_attention_heads: 8, vocab_size: 1000}\n";
  inputs.overrides = {{"model.tensor_parallel_size", "8", "--set"}};
  auto r = ComposeJob(inputs);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().hint, "did you mean 'model.tensor_model_parallel_size'?");
  inputs.overrides = {{"train.mbs", "4", "--set"}};
  r = ComposeJob(inputs);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().hint, "did you mean 'train.micro_batch_size'?");
  inputs.overrides = {{"model.quant_recipe", "x", "--set"}};  // an upstream field: ignored
  EXPECT_TRUE(ComposeJob(inputs));
}

}  // namespace
}  // namespace memtune::model
