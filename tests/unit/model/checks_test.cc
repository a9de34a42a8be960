// CheckJob: exact texts of selected rules, every violation reported at once, jobs that are
// close to a rule's boundary but pass, the rule table, and the helper predicates.
#include "memtune/model/checks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "unit/model/checks_fixture.h"

namespace memtune::model {
namespace {

using testing::BaseJob;
using ::testing::ElementsAre;
using testing::FindRule;
using testing::Ids;
using ::testing::Pair;

TEST(CheckJobTest, OffloadWithPipelineUsesTheUpstreamMessage) {
  Job job = BaseJob();
  job.model.cpu_offloading = true;
  job.model.cpu_offloading_num_layers = 2;
  const std::vector<Finding> findings = CheckJob(job);
  ASSERT_EQ(Ids(findings), std::vector<std::string>{"offload.pp"});
  const Finding& f = findings[0];
  EXPECT_EQ(f.severity, Severity::kError);
  EXPECT_EQ(f.message,
            "Currently there is no support for Pipeline parallelism with CPU offloading");
  EXPECT_EQ(f.fix, "set pipeline_model_parallel_size: 1 or cpu_offloading: false");
  EXPECT_EQ(f.source, "MCore TransformerConfig.__post_init__");
  EXPECT_THAT(f.fields, ElementsAre(Pair("model.cpu_offloading", "true"),
                                    Pair("model.pipeline_model_parallel_size", "4")));
}

TEST(CheckJobTest, WorldSizeNamesTheProductAndTheNearestSizes) {
  Job job = BaseJob();
  job.memtune.world_size = 40;
  const std::vector<Finding> findings = CheckJob(job);
  const Finding* f = FindRule(findings, "layout.world-size");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->message, "world size (40) is not divisible by TP*PP*CP = 4*4*1 = 16");
  EXPECT_EQ(f->fix,
            "set memtune.world_size to a multiple of 16 (32 or 48), or change TP, PP or CP so "
            "that their product divides 40");
}

TEST(CheckJobTest, GlobalBatchMessageAndFix) {
  Job job = BaseJob();
  job.train.global_batch_size = 33;
  const std::vector<Finding> findings = CheckJob(job);
  const Finding* f = FindRule(findings, "layout.global-batch");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->message,
            "global batch size (33) is not divisible by micro batch size (1) times data parallel "
            "size (2)");
  EXPECT_EQ(f->fix,
            "set train.global_batch_size to a multiple of micro_batch_size*data_parallel_size = "
            "2 (32 or 34)");
}

TEST(CheckJobTest, HeadsMessageListsTheAllowedTp) {
  Job job = BaseJob();
  job.model.tensor_model_parallel_size = 3;
  job.memtune.world_size = 24;
  job.train.global_batch_size = 30;
  const std::vector<Finding> findings = CheckJob(job);
  const Finding* f = FindRule(findings, "heads.tp-divides-heads");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->message,
            "num_attention_heads (64) must be a multiple of tensor_model_parallel_size (3)");
  EXPECT_EQ(f->fix, "set tensor_model_parallel_size to one of: 1, 2, 4, 8, 16, 32, 64");
}

TEST(CheckJobTest, EvenLayersMessageCountsTheEmbeddingAndLoss) {
  Job job = BaseJob();
  job.model.virtual_pipeline_model_parallel_size.reset();
  job.model.account_for_embedding_in_pipeline_split = true;
  const std::vector<Finding> findings = CheckJob(job);
  const Finding* f = FindRule(findings, "pipeline.even-layers");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(
      f->message,
      "num_layers + 1 (embedding) = 81 must be divisible by pipeline_model_parallel_size (4)");
}

TEST(CheckJobTest, NcclGraphRegisterIsAnErrorForTeGraphsEvenOnBlackwell) {
  Job job = BaseJob();
  job.memtune.env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True";
  job.model.cuda_graph_impl = CudaGraphImpl::kTransformerEngine;
  job.model.cuda_graph_scope = {"attn"};
  job.memtune.gpu = "b200";
  const std::vector<Finding> findings = CheckJob(job);
  const Finding* f = FindRule(findings, "alloc.cuda-graph-nccl-register");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->message,
            "Setting NCCL_GRAPH_REGISTER=0 to avoid illegal memory access when using CUDA Graph "
            "with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");
  EXPECT_EQ(FindRule(findings, "alloc.cuda-graph-nccl-register-blackwell"), nullptr);

  job.memtune.env["NCCL_GRAPH_REGISTER"] = "0";
  EXPECT_EQ(Ids(CheckJob(job)), std::vector<std::string>{});
}

TEST(CheckJobTest, LocalGraphsOnBlackwellOnlyWarn) {
  Job job = BaseJob();
  job.memtune.env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True";
  job.model.cuda_graph_impl = CudaGraphImpl::kLocal;
  job.model.cuda_graph_scope = {"attn"};
  job.memtune.gpu = "gb200";
  EXPECT_EQ(Ids(CheckJob(job)),
            std::vector<std::string>{"alloc.cuda-graph-nccl-register-blackwell"});
  job.memtune.gpu = "h100-sxm-80gb";
  EXPECT_EQ(Ids(CheckJob(job)), std::vector<std::string>{"alloc.cuda-graph-nccl-register"});
}

TEST(CheckJobTest, ReportsEveryViolationAtOnce) {
  Job job = BaseJob();
  job.memtune.world_size = 30;         // layout.world-size
  job.model.num_attention_heads = 62;  // heads.tp-divides-heads, groups-divide-heads
  job.model.cpu_offloading = true;     // offload.pp, offload.nothing-offloaded
  job.model.recompute_granularity = RecomputeGranularity::kFull;  // offload.recompute, ...
  job.ddp.nccl_ub = true;
  job.memtune.env["PYTORCH_CUDA_ALLOC_CONF"] =
      "garbage_collection_threshold:0.8,"
      "expandable_segments:True";
  const std::vector<Finding> findings = CheckJob(job);
  EXPECT_EQ(Ids(findings),
            (std::vector<std::string>{
                "layout.world-size", "heads.tp-divides-heads", "heads.groups-divide-heads",
                "recompute.full-needs-method", "recompute.full-needs-num-layers", "offload.pp",
                "offload.recompute", "offload.nothing-offloaded", "alloc.expandable-nccl-ub"}));
  EXPECT_EQ(CountErrors(findings), 8);
}

// The nccl_ub rule reads the allocator config as PyTorch 2.9 does (alloc::AllocatorConfigFromEnv):
// PYTORCH_ALLOC_CONF's expandable_segments wins over PYTORCH_CUDA_ALLOC_CONF's, and a value
// PyTorch rejects (lowercase "true") turns nothing on.
TEST(CheckJobTest, ExpandableSegmentsReadAsPyTorchReadsThem) {
  auto has_rule = [](const Job& job) {
    for (const Finding& f : CheckJob(job)) {
      if (f.rule_id == "alloc.expandable-nccl-ub") return true;
    }
    return false;
  };
  Job job = BaseJob();
  job.ddp.nccl_ub = true;
  job.memtune.env["PYTORCH_CUDA_ALLOC_CONF"] = " max_split_size_mb:128, expandable_segments : True";
  EXPECT_TRUE(has_rule(job));
  job.memtune.env["PYTORCH_ALLOC_CONF"] = "expandable_segments:False";
  EXPECT_FALSE(has_rule(job));
  job.memtune.env.erase("PYTORCH_CUDA_ALLOC_CONF");
  job.memtune.env["PYTORCH_ALLOC_CONF"] = "expandable_segments:True";
  EXPECT_TRUE(has_rule(job));
  job.memtune.env["PYTORCH_ALLOC_CONF"] = "expandable_segments:true";
  EXPECT_FALSE(has_rule(job));
  job.memtune.env["PYTORCH_ALLOC_CONF"] = "expandable_segments:True,expandable_segments:False";
  EXPECT_FALSE(has_rule(job));
}

TEST(CheckJobTest, BoundaryCasesPass) {
  Job job = BaseJob();
  job.model.num_query_groups = 2;  // a divisor of TP 4
  EXPECT_EQ(Ids(CheckJob(job)), std::vector<std::string>{});

  job = BaseJob();  // uneven split 19 + 21 + 21 + 19, no VPP
  job.model.virtual_pipeline_model_parallel_size.reset();
  job.model.num_layers_in_first_pipeline_stage = 19;
  job.model.num_layers_in_last_pipeline_stage = 19;
  EXPECT_EQ(Ids(CheckJob(job)), std::vector<std::string>{});

  job = BaseJob();  // Bridge perf recipe llama3_70b_pretrain_64gpu_h100_fp8cs layout
  job.model.pipeline_model_parallel_size = 8;
  job.model.virtual_pipeline_model_parallel_size.reset();
  job.model.pipeline_model_parallel_layout = "Et*2|(t*2|)*34,t*3|(t*2|)*3,tL";
  EXPECT_EQ(Ids(CheckJob(job)), std::vector<std::string>{});
  job.model.virtual_pipeline_model_parallel_size = 5;
  EXPECT_EQ(Ids(CheckJob(job)), std::vector<std::string>{});

  job = BaseJob();  // CPU offloading done right: PP 1, no recompute
  job.model.pipeline_model_parallel_size = 1;
  job.model.virtual_pipeline_model_parallel_size.reset();
  job.model.cpu_offloading = true;
  job.model.cpu_offloading_num_layers = 40;
  EXPECT_EQ(Ids(CheckJob(job)), std::vector<std::string>{});

  job = BaseJob();  // LoRA regather where it applies
  job.peft = PeftConfig{};
  job.peft->sequence_parallel_input_regather = true;
  EXPECT_EQ(Ids(CheckJob(job)), std::vector<std::string>{});
}

TEST(CheckJobTest, RegatherPartlyIneligibleUnderMlpRecompute) {
  Job job = BaseJob();
  job.peft = PeftConfig{};
  job.peft->sequence_parallel_input_regather = true;
  job.model.recompute_granularity = RecomputeGranularity::kSelective;
  job.model.recompute_modules = {"mlp"};
  const std::vector<Finding> findings = CheckJob(job);
  const Finding* f = FindRule(findings, "peft.regather-ineligible");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->message,
            "sequence_parallel_input_regather applies only to [linear_qkv]: linear_fc1 falls "
            "back: selective recompute of mlp checkpoints it");
  job.peft->target_modules = {"linear_fc1", "linear_proj"};
  const std::vector<Finding> findings2 = CheckJob(job);
  f = FindRule(findings2, "peft.regather-ineligible");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->message,
            "sequence_parallel_input_regather has no effect: no targeted linear_qkv / linear_fc1 "
            "can regather; linear_fc1 falls back: selective recompute of mlp checkpoints it");
}

TEST(CheckJobTest, MegatronOnlyRulesSkipFsdp2Jobs) {
  Job job = testing::BaseFsdp2Job();
  job.model.tensor_model_parallel_size = 1;
  job.model.sequence_parallel = true;  // layout.sp-needs-tp is Megatron-only
  EXPECT_EQ(Ids(CheckJob(job)), std::vector<std::string>{});
  job.memtune.world_size = 12;  // layout.world-size applies to both; shard 8 does not fit
  EXPECT_EQ(Ids(CheckJob(job)),
            (std::vector<std::string>{"layout.global-batch", "fsdp.shard-degree"}));
}

TEST(CheckJobTest, ZeroSizesAreReportedNotDividedBy) {
  Job job = BaseJob();
  job.model.tensor_model_parallel_size = 0;
  job.model.pipeline_model_parallel_size = 0;
  job.train.micro_batch_size = 0;
  const std::vector<Finding> findings = CheckJob(job);
  ASSERT_GE(findings.size(), 3u);
  EXPECT_EQ(findings[0].message, "model.tensor_model_parallel_size = 0 must be >= 1");
  EXPECT_EQ(findings[1].message, "model.pipeline_model_parallel_size = 0 must be >= 1");
  EXPECT_EQ(findings[2].message, "train.micro_batch_size = 0 must be >= 1");
}

TEST(RuleTableTest, IdsAreUniqueAndNamespaced) {
  std::set<std::string> ids;
  for (const RuleInfo& rule : ListRules()) {
    SCOPED_TRACE(std::string(rule.id));
    EXPECT_TRUE(ids.insert(std::string(rule.id)).second);
    EXPECT_NE(rule.id.find('.'), std::string_view::npos);
    EXPECT_FALSE(rule.what.empty());
    EXPECT_FALSE(rule.fix.empty());
    EXPECT_FALSE(rule.source.empty());
  }
  EXPECT_GE(ids.size(), 80u);
}

// docs/checks.md is generated from `memtune check --list-rules --format json`; a rule added
// without regenerating it fails here.
TEST(RuleTableTest, DocsListEveryRule) {
  std::ifstream in(std::string(MEMTUNE_SOURCE_DIR) + "/docs/checks.md");
  ASSERT_TRUE(in);
  std::stringstream text;
  text << in.rdbuf();
  for (const RuleInfo& rule : ListRules()) {
    EXPECT_NE(
        text.str().find("| `" + std::string(rule.id) + "` | " + SeverityName(rule.severity) + " |"),
        std::string::npos)
        << rule.id;
  }
}

TEST(HelpersTest, BlackwellNames) {
  EXPECT_TRUE(IsBlackwellGpu("b200"));
  EXPECT_TRUE(IsBlackwellGpu("GB200"));
  EXPECT_TRUE(IsBlackwellGpu("gb300-nvl72"));
  EXPECT_FALSE(IsBlackwellGpu("h100-sxm-80gb"));
  EXPECT_FALSE(IsBlackwellGpu("a100-80gb"));
  EXPECT_FALSE(IsBlackwellGpu(""));
  EXPECT_FALSE(IsBlackwellGpu("bogus"));
}

}  // namespace
}  // namespace memtune::model
