// ComposeJob: document + Megatron-LM arguments + flag/--set overrides through one parser.
#include "memtune/model/job_compose.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <string>

#include "memtune/model/recipes.h"

namespace memtune::model {
namespace {

using ::testing::ElementsAre;

constexpr const char* kDoc =
    "model: {num_layers: 4, hidden_size: 256, num_attention_heads: 8, vocab_size: 1000,\n"
    "        tensor_model_parallel_size: 2}\n"
    "mixed_precision: bf16_with_fp8_current_scaling_mixed\n";

Result<JobDocument> Compose(std::vector<JobOverride> overrides, std::string doc = kDoc) {
  JobInputs inputs;
  inputs.document = std::move(doc);
  inputs.overrides = std::move(overrides);
  return ComposeJob(inputs);
}

TEST(JobComposeTest, OverridesWinInOrder) {
  auto doc =
      Compose({{"model.tensor_model_parallel_size", "4", "--tp"},
               {"model.recompute_modules", "[mlp, core_attn]", "--set"},
               {"model.recompute_granularity", "selective", "--set"},
               {"model.tensor_model_parallel_size", "8", "--set"},
               {"memtune.env.PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True", "--set"}});
  ASSERT_TRUE(doc.has_value()) << doc.error().Describe();
  EXPECT_EQ(doc->job.model.tensor_model_parallel_size, 8);
  EXPECT_THAT(doc->job.model.recompute_modules, ElementsAre("mlp", "core_attn"));
  EXPECT_EQ(doc->job.memtune.env.at("PYTORCH_CUDA_ALLOC_CONF"), "expandable_segments:True");
}

TEST(JobComposeTest, SettingAFieldOfAPresetKeepsThePreset) {
  auto doc = Compose({{"mixed_precision.first_last_layers_bf16", "false", "--set"}});
  ASSERT_TRUE(doc.has_value()) << doc.error().Describe();
  EXPECT_EQ(doc->job.model.fp8, model::Fp8Format::kHybrid);
  EXPECT_EQ(doc->job.model.fp8_recipe, model::Fp8Recipe::kTensorwise);
  EXPECT_FALSE(doc->job.model.first_last_layers_bf16);
  EXPECT_EQ(doc->job.mixed_precision, "custom");
}

TEST(JobComposeTest, NoDocumentAtAll) {
  auto doc = Compose({{"model.preset", "llama3-8b", "--model"},
                      {"model.seq_length", "2048", "--seq"},
                      {"dataset.seq_length", "2048", "--seq"},
                      {"memtune.world_size", "8", "--world-size"}},
                     "");
  ASSERT_TRUE(doc.has_value()) << doc.error().Describe();
  EXPECT_EQ(doc->job.model.num_layers, 32);
  EXPECT_EQ(doc->job.model.seq_length, 2048);
  EXPECT_EQ(doc->job.train.global_batch_size, 8);  // one micro-batch per DP rank
}

// Presets and recipes are parsed once per process; a job that changes their fields must
// change its own copy, never what the next job starts from.
TEST(JobComposeTest, AChangedPresetOrRecipeDoesNotLeakIntoTheNextJob) {
  for (int round = 0; round < 2; ++round) {
    auto changed = Compose({{"model.preset", "llama3-8b", "--model"},
                            {"model.num_layers", "4", "--set"},
                            {"memtune.world_size", "8", "--world-size"}},
                           "");
    ASSERT_TRUE(changed.has_value()) << changed.error().Describe();
    EXPECT_EQ(changed->job.model.num_layers, 4);
    auto plain = Compose(
        {{"model.preset", "llama3-8b", "--model"}, {"memtune.world_size", "8", "--world-size"}},
        "");
    ASSERT_TRUE(plain.has_value()) << plain.error().Describe();
    EXPECT_EQ(plain->job.model.num_layers, 32);
  }
  const std::string recipe = "memtune: {recipe: llama3_70b_sft_32gpu_h100_fp8cs_config}\n";
  auto changed = Compose({{"model.pipeline_model_parallel_size", "8", "--set"},
                          {"model.virtual_pipeline_model_parallel_size", "null", "--set"},
                          {"memtune.recipe", "llama3_70b_sft_32gpu_h100_fp8cs_config", "--set"}},
                         recipe);
  ASSERT_TRUE(changed.has_value()) << changed.error().Describe();
  EXPECT_EQ(changed->job.model.pipeline_model_parallel_size, 8);
  auto plain = Compose({}, recipe);
  ASSERT_TRUE(plain.has_value()) << plain.error().Describe();
  EXPECT_EQ(plain->job.model.pipeline_model_parallel_size, 4);
}

TEST(JobComposeTest, ErrorsNameTheOverride) {
  auto bad = Compose({{"model.tensor_model_parallel_size", "0", "--tp"}});
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().message,
            "model.tensor_model_parallel_size = 0 is out of range (from --tp)");
  auto list = Compose({{"model.recompute_modules", "[mlp, attn]", "--set"}});
  ASSERT_FALSE(list.has_value());
  EXPECT_EQ(list.error().message,
            "model.recompute_modules[1] = 'attn' is not a known value (from --set)");
  auto yaml = Compose({{"model.recompute_modules", "[mlp", "--set"}});
  ASSERT_FALSE(yaml.has_value());
  EXPECT_EQ(yaml.error().message,
            "--set model.recompute_modules:1:1: end of sequence flow not found");
  auto through = Compose({{"model.num_layers.x", "1", "--set"}});
  ASSERT_FALSE(through.has_value());
  EXPECT_EQ(through.error().message,
            "--set model.num_layers.x: model.num_layers = 4 is not a mapping");
  auto empty = Compose({{"model..x", "1", "--set"}});
  ASSERT_FALSE(empty.has_value());
  EXPECT_EQ(empty.error().message, "--set model..x: empty field name in the path");
}

TEST(JobComposeTest, MegatronArgumentsOverrideTheDocument) {
  JobInputs inputs;
  inputs.document = "memtune: {gpu: h100-sxm-80gb}\n";
  inputs.megatron_args =
      "torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 2 --hidden-size 256 "
      "--num-attention-heads 8 --seq-length 512 --max-position-embeddings 512 "
      "--vocab-size 1000 --micro-batch-size 1 --bf16 --lr 1e-4";
  inputs.overrides = {{"model.tensor_model_parallel_size", "2", "--tp"}};
  auto doc = ComposeJob(inputs);
  ASSERT_TRUE(doc.has_value()) << doc.error().Describe() << "; " << doc.error().hint;
  EXPECT_EQ(doc->job.model.num_layers, 2);
  EXPECT_EQ(doc->job.model.tensor_model_parallel_size, 2);
  EXPECT_EQ(doc->job.memtune.world_size, 8);
  EXPECT_EQ(doc->job.memtune.gpu, "h100-sxm-80gb");
  EXPECT_TRUE(doc->job.model.bf16);
  EXPECT_THAT(doc->ignored_fields, ::testing::Contains("--lr"));
}

}  // namespace
}  // namespace memtune::model

namespace memtune::model {
namespace {

// A recipe is a job document; the job's own fields apply on top, like a Bridge override
// YAML on its recipe; --recipe (an override) wins over the document's memtune.recipe.
JobInputs Inputs(std::string document, std::vector<JobOverride> overrides = {}) {
  JobInputs in;
  in.document = std::move(document);
  in.overrides = std::move(overrides);
  return in;
}

TEST(HfConfigInputTest, AConfigJsonIsRecognisedByContent) {
  EXPECT_TRUE(LooksLikeHfConfig(R"({"model_type": "llama", "num_hidden_layers": 2})"));
  EXPECT_TRUE(LooksLikeHfConfig(" \n{\"architectures\": [\"X\"], \"model_type\": \"qwen3\"}"));
  EXPECT_FALSE(LooksLikeHfConfig(R"({"model": {"num_layers": 2}})"));  // a JSON job
  EXPECT_FALSE(LooksLikeHfConfig("model_type: llama\nnum_hidden_layers: 2\n"));
  EXPECT_FALSE(LooksLikeHfConfig("{\"model_type\": "));  // malformed
  EXPECT_EQ(HfConfigJobDocument("/c/it's/config.json"),
            "model:\n  hf_config: '/c/it''s/config.json'\n");
}

TEST(RecipeTest, TheJobAppliesOnTopOfItsRecipe) {
  ASSERT_FALSE(RecipeNames().empty());
  for (const std::string& name : RecipeNames()) {
    auto doc = ComposeJob(Inputs("memtune: {recipe: " + name + "}\n"));
    ASSERT_TRUE(doc.has_value()) << name << ": " << doc.error().Describe();
    EXPECT_EQ(doc->job.memtune.recipe, name);
    const YAML::Node recipe = YAML::Load(*RecipeJobYaml(name));
    EXPECT_EQ(doc->job.model.tensor_model_parallel_size,
              recipe["model"]["tensor_model_parallel_size"].as<int>())
        << name;
  }
  auto doc =
      ComposeJob(Inputs("memtune: {recipe: llama3_70b_sft_32gpu_h100_fp8cs_config}\n"
                        "model: {pipeline_model_parallel_size: 8, "
                        "virtual_pipeline_model_parallel_size: null}\n"));
  ASSERT_TRUE(doc.has_value()) << doc.error().Describe();
  EXPECT_EQ(doc->job.model.pipeline_model_parallel_size, 8);
  EXPECT_FALSE(doc->job.model.virtual_pipeline_model_parallel_size.has_value());
  EXPECT_EQ(doc->job.model.fp8, Fp8Format::kHybrid);  // the recipe's precision stays
  EXPECT_EQ(doc->job.memtune.env.at("NCCL_NVLS_ENABLE"), "0");
  auto flag =
      ComposeJob(Inputs("memtune: {recipe: llama3_70b_sft_32gpu_h100_fp8cs_config}\n",
                        {{"memtune.recipe", "llama3_70b_sft_32gpu_h100_bf16_config", "--recipe"}}));
  ASSERT_TRUE(flag.has_value()) << flag.error().Describe();
  EXPECT_EQ(flag->job.model.fp8, Fp8Format::kNone);
  auto unknown = ComposeJob(Inputs("memtune: {recipe: no_such_recipe}\n"));
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().field, "memtune.recipe");
}

// Found by fuzz_job_document: a second `memtune` key that is not a mapping, on a recipe,
// made the merge index a scalar (an exception, exit 3). Duplicates are refused before the
// merge, which would keep only one of them.
TEST(JobComposeTest, DuplicateKeysAreRefusedBeforeTheRecipeMerge) {
  const std::string recipe = "memtune:\n  recipe: llama3_70b_sft_32gpu_h100_fp8cs_config\n";
  auto twice = Compose({}, recipe + "memtune: 5\n");
  ASSERT_FALSE(twice.has_value());
  EXPECT_EQ(twice.error().field, "memtune");
  EXPECT_THAT(twice.error().message, ::testing::HasSubstr("memtune is given twice"));
  auto nested = Compose({}, recipe + "train: {micro_batch_size: 1, micro_batch_size: 2}\n");
  ASSERT_FALSE(nested.has_value());
  EXPECT_EQ(nested.error().field, "train.micro_batch_size");
}

TEST(JobComposeTest, AScalarMemtuneSectionUnderARecipeIsATypeError) {
  auto scalar = Compose({{"memtune.recipe", "llama3_70b_sft_32gpu_h100_fp8cs_config", "--recipe"}},
                        "memtune: 5\n");
  ASSERT_FALSE(scalar.has_value());
  EXPECT_THAT(scalar.error().message, ::testing::HasSubstr("not a mapping"));
  auto null_section =
      Compose({{"memtune.recipe", "llama3_70b_sft_32gpu_h100_fp8cs_config", "--recipe"}},
              "memtune: null\n");
  ASSERT_TRUE(null_section.has_value()) << null_section.error().Describe();
}

}  // namespace
}  // namespace memtune::model
