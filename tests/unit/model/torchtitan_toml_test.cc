// torchtitan TOML configs -> fsdp2 job documents.
#include "model/torchtitan_toml.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "memtune/model/job_compose.h"

namespace memtune::model::internal {
namespace {

constexpr const char* kConfig = R"(# written for memtune's tests
[job]
dump_folder = "./outputs"

[model]
name = "llama3"
flavor = "70B"
converters = ["float8"]

[training]
local_batch_size = 2
global_batch_size = 64
seq_len = 4096   # tokens
mixed_precision_param = "bfloat16"

[parallelism]
data_parallel_shard_degree = 8
tensor_parallel_degree = 8
pipeline_parallel_degree = 1

[activation_checkpoint]
mode = "full"

[compile]
enable = true
components = ["model"]
)";

TEST(TorchtitanTomlTest, MapsTheMemoryFieldsOfAConfig) {
  ASSERT_TRUE(LooksLikeToml(kConfig));
  EXPECT_FALSE(LooksLikeToml("model:\n  num_layers: 2\n"));
  EXPECT_FALSE(LooksLikeToml("{\"model_type\": \"llama\"}"));
  auto t = TorchtitanTomlToJob(kConfig, "t.toml");
  ASSERT_TRUE(t) << t.error().Describe();
  const YAML::Node y = YAML::Load(t->yaml);
  EXPECT_EQ(y["model"]["preset"].as<std::string>(), "llama3-70b");
  EXPECT_EQ(y["model"]["tensor_model_parallel_size"].as<int>(), 8);
  EXPECT_EQ(y["model"]["seq_length"].as<int>(), 4096);
  EXPECT_EQ(y["train"]["micro_batch_size"].as<int>(), 2);
  EXPECT_EQ(y["train"]["global_batch_size"].as<int>(), 64);
  EXPECT_EQ(y["memtune"]["framework"].as<std::string>(), "fsdp2");
  const YAML::Node f = y["memtune"]["fsdp2"];
  EXPECT_EQ(f["shard_degree"].as<int>(), 8);
  EXPECT_EQ(f["activation_checkpoint"].as<std::string>(), "full");
  EXPECT_TRUE(f["compile"].as<bool>());
  EXPECT_FALSE(f["compile_loss"].as<bool>());  // components without "loss"
  EXPECT_TRUE(f["float8"].as<bool>());
  EXPECT_EQ(f["param_dtype"].as<std::string>(), "bf16");
  EXPECT_EQ(t->ignored, (std::vector<std::string>{"job.dump_folder"}));
  // Through the one parser, with the GPU count the launcher would give.
  JobInputs in;
  in.document = kConfig;
  in.overrides = {{"memtune.world_size", "64", "--gpus"}};
  ParseOptions options;
  options.source_name = "t.toml";
  auto doc = ComposeJob(in, options);
  ASSERT_TRUE(doc) << doc.error().Describe();
  EXPECT_EQ(doc->job.memtune.framework, Framework::kFsdp2);
  EXPECT_EQ(doc->job.memtune.fsdp2.activation_checkpoint, Fsdp2Checkpoint::kFull);
}

// Pipeline parallelism: the local batch becomes micro-batches of
// pipeline_parallel_microbatch_size, the global batch local x data-parallel degree, and
// reshard_after_forward "default" turns off (torchtitan's policy under PP).
TEST(TorchtitanTomlTest, PipelineParallelJobsCountTheirMicroBatches) {
  const std::string config =
      "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nlocal_batch_size = 8\n"
      "seq_len = 4096\n[parallelism]\ndata_parallel_shard_degree = 4\n"
      "pipeline_parallel_degree = 2\npipeline_parallel_schedule = \"GPipe\"\n";
  auto t = TorchtitanTomlToJob(config, "pp.toml");
  ASSERT_TRUE(t) << t.error().Describe();
  const YAML::Node y = YAML::Load(t->yaml);
  EXPECT_EQ(y["train"]["micro_batch_size"].as<int>(), 1);
  EXPECT_EQ(y["train"]["global_batch_size"].as<int>(), 32);
  EXPECT_EQ(y["memtune"]["fsdp2"]["pipeline_schedule"].as<std::string>(), "GPipe");
  JobInputs in;
  in.document = config;
  in.overrides = {{"memtune.world_size", "8", "--gpus"}};
  ParseOptions options;
  options.source_name = "pp.toml";
  auto doc = ComposeJob(in, options);
  ASSERT_TRUE(doc) << doc.error().Describe();
  EXPECT_FALSE(doc->job.memtune.fsdp2.reshard_after_forward);
  EXPECT_EQ(doc->job.memtune.fsdp2.pipeline_schedule, Fsdp2PipelineSchedule::kGPipe);
  EXPECT_EQ(doc->job.model.pipeline_model_parallel_size, 2);

  auto zero_bubble = TorchtitanTomlToJob(
      "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[parallelism]\n"
      "pipeline_parallel_degree = 2\npipeline_parallel_schedule = \"ZBVZeroBubble\"\n",
      "z.toml");
  ASSERT_FALSE(zero_bubble);
  EXPECT_EQ(zero_bubble.error().field, "parallelism.pipeline_parallel_schedule");
  // A multi-stage schedule: torchtitan's default of 2 stages per rank.
  auto interleaved = TorchtitanTomlToJob(
      "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[parallelism]\n"
      "data_parallel_shard_degree = 2\npipeline_parallel_degree = 2\n"
      "pipeline_parallel_schedule = \"Interleaved1F1B\"\n",
      "i.toml");
  ASSERT_TRUE(interleaved) << interleaved.error().Describe();
  const YAML::Node iy = YAML::Load(interleaved->yaml);
  EXPECT_EQ(iy["model"]["virtual_pipeline_model_parallel_size"].as<int>(), 2);
  EXPECT_EQ(iy["memtune"]["fsdp2"]["pipeline_schedule"].as<std::string>(), "Interleaved1F1B");
  auto derived = TorchtitanTomlToJob(
      "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[parallelism]\n"
      "pipeline_parallel_degree = 2\n",
      "d.toml");
  ASSERT_FALSE(derived);
  EXPECT_EQ(derived.error().field, "parallelism.data_parallel_shard_degree");
  // A batch or degree the micro-batch count is computed from must be a count.
  auto zero = TorchtitanTomlToJob(
      "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nlocal_batch_size = 0\n"
      "[parallelism]\ndata_parallel_shard_degree = 2\npipeline_parallel_degree = 2\n",
      "z.toml");
  ASSERT_FALSE(zero);
  EXPECT_EQ(zero.error().field, "training.local_batch_size");
  EXPECT_NE(zero.error().hint.find("1 to 1048575"), std::string::npos);
  auto by_layers = TorchtitanTomlToJob(
      "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[parallelism]\n"
      "data_parallel_shard_degree = 2\npipeline_parallel_degree = 2\n"
      "pipeline_parallel_layers_per_stage = 4\n",
      "l.toml");
  ASSERT_FALSE(by_layers);
  EXPECT_EQ(by_layers.error().field, "parallelism.pipeline_parallel_layers_per_stage");
}

TEST(TorchtitanTomlTest, SelectiveCheckpointingByOpOrLayer) {
  auto with = [](const char* option) {
    const std::string text = std::string("[model]\nname = \"llama3\"\nflavor = \"8B\"\n") +
                             "[activation_checkpoint]\nmode = \"selective\"\n" +
                             "selective_ac_option = \"" + option + "\"\n";
    auto t = TorchtitanTomlToJob(text, "t.toml");
    EXPECT_TRUE(t) << t.error().Describe();
    return t ? YAML::Load(t->yaml)["memtune"]["fsdp2"]["activation_checkpoint"].as<std::string>()
             : std::string();
  };
  EXPECT_EQ(with("op"), "selective_op");
  EXPECT_EQ(with("2"), "selective_layer");
  auto three = TorchtitanTomlToJob(
      "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[activation_checkpoint]\n"
      "mode = \"selective\"\nselective_ac_option = \"3\"\n",
      "t.toml");
  ASSERT_TRUE(three);
  ASSERT_EQ(three->warnings.size(), 1u);  // memtune models every 2nd layer
}

TEST(TorchtitanTomlTest, ReadsQwen3DenseFlavors) {
  // torchtitan's qwen3 8B flavor is the catalog's qwen3-8b (qk_layernorm: the Qwen3 block).
  auto t = TorchtitanTomlToJob("[model]\nname = \"qwen3\"\nflavor = \"8B\"\n", "t.toml");
  ASSERT_TRUE(t) << t.error().Describe();
  EXPECT_EQ(YAML::Load(t->yaml)["model"]["preset"].as<std::string>(), "qwen3-8b");
  JobInputs in;
  in.document = "[model]\nname = \"qwen3\"\nflavor = \"8B\"\n";
  in.overrides = {{"memtune.world_size", "8", "--gpus"}};
  ParseOptions options;
  options.source_name = "t.toml";
  auto doc = ComposeJob(in, options);
  ASSERT_TRUE(doc) << doc.error().Describe();
  EXPECT_TRUE(doc->job.model.qk_layernorm);
  EXPECT_EQ(doc->job.model.kv_channels, 128);
  // Flavors without a preset come as model fields (qwen3_configs["14B"]).
  in.document = "[model]\nname = \"qwen3\"\nflavor = \"14B\"\n";
  auto big = ComposeJob(in, options);
  ASSERT_TRUE(big) << big.error().Describe();
  EXPECT_EQ(big->job.model.num_layers, 40);
  EXPECT_EQ(big->job.model.hidden_size, 5120);
  EXPECT_EQ(big->job.model.num_attention_heads, 40);
  EXPECT_EQ(big->job.model.num_query_groups, 8);
  EXPECT_EQ(big->job.model.ffn_hidden_size, 17408);
  EXPECT_TRUE(big->job.model.qk_layernorm);
  EXPECT_FALSE(big->job.model.share_embeddings_and_output_weights);
  auto flavor = TorchtitanTomlToJob("[model]\nname = \"qwen3\"\nflavor = \"30B-A3B\"\n", "t.toml");
  ASSERT_FALSE(flavor);
  EXPECT_EQ(flavor.error().field, "model.flavor");
  EXPECT_EQ(flavor.error().message, "qwen3 flavor '30B-A3B' is not supported");
  EXPECT_EQ(flavor.error().hint, "supported: 0.6B, 1.7B, 4B, 8B, 14B, 32B");
}

TEST(TorchtitanTomlTest, ErrorsNameTheLineOrTheKey) {
  auto bad = TorchtitanTomlToJob("[model]\nname = \"llama3\"\nflavor\n", "t.toml");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().field, "t.toml:3");
  auto model = TorchtitanTomlToJob("[model]\nname = \"deepseek_v3\"\nflavor = \"16B\"\n", "t.toml");
  ASSERT_FALSE(model);
  EXPECT_EQ(model.error().field, "model.name");
  auto flavor =
      TorchtitanTomlToJob("[model]\nname = \"llama3\"\nflavor = \"debugmodel\"\n", "t.toml");
  ASSERT_FALSE(flavor);
  EXPECT_EQ(flavor.error().hint, "supported: 8B, 70B, 405B");
  auto mode = TorchtitanTomlToJob(
      "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[activation_checkpoint]\nmode = "
      "\"memory_budget\"\n",
      "t.toml");
  ASSERT_FALSE(mode);
  EXPECT_EQ(mode.error().field, "activation_checkpoint.mode");
  auto string = TorchtitanTomlToJob("[model]\nname = \"llama3\nflavor = \"8B\"\n", "t.toml");
  ASSERT_FALSE(string);
  EXPECT_EQ(string.error().field, "t.toml:2");
}

}  // namespace
}  // namespace memtune::model::internal
