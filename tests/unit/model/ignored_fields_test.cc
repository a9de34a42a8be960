// Every flag of Megatron-LM's argument parser and every Megatron-Bridge ConfigContainer
// field is either read by memtune or classified in ignored_fields.h. The lists were
// extracted from the upstream commits by tools/extract-megatron-flags.py and
// tools/extract-bridge-fields.py (tests/data/upstream/).
#include "memtune/model/ignored_fields.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "model/job_parse_internal.h"
#include "model/megatron_args.h"

namespace memtune::model {
namespace {

std::vector<std::string> ReadList(const std::string& file) {
  std::ifstream in(std::string(MEMTUNE_SOURCE_DIR) + "/tests/data/upstream/" + file);
  std::vector<std::string> names;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) names.push_back(line);
  }
  return names;
}

TEST(IgnoredFields, EveryMegatronFlagIsReadOrClassified) {
  const std::vector<std::string> flags = ReadList("megatron-lm-d98e8a64-flags.txt");
  ASSERT_GT(flags.size(), 800u);
  std::string missing;
  for (const std::string& flag : flags) {
    if (!internal::IsReadMegatronFlag(flag) && FindIgnoredInput(flag) == nullptr) {
      missing += " " + flag;
    }
  }
  EXPECT_EQ(missing, "");
}

TEST(IgnoredFields, EveryBridgeFieldIsReadOrClassified) {
  const std::vector<std::string> fields = ReadList("megatron-bridge-067f987d-fields.txt");
  ASSERT_GT(fields.size(), 500u);
  std::string missing;
  for (const std::string& field : fields) {
    if (!internal::IsReadBridgeField(field) && FindIgnoredInput(field) == nullptr) {
      missing += " " + field;
    }
  }
  EXPECT_EQ(missing, "");
}

TEST(IgnoredFields, ExactRowsBeatPrefixesAndLongerPrefixesBeatShorterOnes) {
  ASSERT_NE(FindIgnoredInput("--inference-wandb-logging"), nullptr);
  EXPECT_FALSE(FindIgnoredInput("--inference-wandb-logging")->memory_relevant);
  EXPECT_TRUE(FindIgnoredInput("--inference-max-requests")->memory_relevant);
  EXPECT_FALSE(FindIgnoredInput("--moe-hybridep-num-sms")->memory_relevant);
  EXPECT_TRUE(FindIgnoredInput("--moe-hybridep-num-blocks-permute")->memory_relevant);
  EXPECT_STREQ(FindIgnoredInput("--lr=3e-4")->name, "--lr");
  EXPECT_STREQ(FindIgnoredInput("--lr-decay-style")->name, "--lr-*");
}

TEST(IgnoredFields, BridgeFieldsFallBackToTheFlagOfTheSameName) {
  const IgnoredMatch residual = ClassifyIgnored("model.fp32_residual_connection");
  ASSERT_NE(residual.entry, nullptr);
  EXPECT_STREQ(residual.entry->name, "--fp32-residual-connection");
  EXPECT_FALSE(residual.negated);
  const IgnoredMatch fusion = ClassifyIgnored("model.bias_dropout_fusion");
  ASSERT_NE(fusion.entry, nullptr);
  EXPECT_STREQ(fusion.entry->name, "--no-bias-dropout-fusion");
  EXPECT_TRUE(fusion.negated);
  // A Bridge row wins over the flag family: inference settings do not allocate buffers.
  EXPECT_FALSE(FindIgnoredInput("model.inference_sampling_seed")->memory_relevant);
  EXPECT_STREQ(FindIgnoredInput("logger")->name, "logger");
  // memtune models the default and the Gemma layer specs: they are inert values.
  const std::string spec_inert = FindIgnoredInput("model.transformer_layer_spec")->inert;
  EXPECT_NE(spec_inert.find("gpt_provider.default_layer_spec"), std::string::npos);
  EXPECT_NE(spec_inert.find("gemma2_provider.gemma2_layer_spec"), std::string::npos);
  EXPECT_EQ(FindIgnoredInput("mixed_precision.no_such_field"), nullptr);
}

TEST(IgnoredFields, ReadFlagsAreNotClassified) {
  for (const char* flag : {"--num-layers", "--seq-length", "--encoder-seq-length", "--bf16"}) {
    EXPECT_TRUE(internal::IsReadMegatronFlag(flag)) << flag;
  }
  EXPECT_FALSE(internal::IsReadMegatronFlag("--lr"));
}

}  // namespace
}  // namespace memtune::model
