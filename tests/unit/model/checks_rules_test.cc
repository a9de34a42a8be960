// Every rule of the check table: one job that violates it (a mutation of the valid base
// job), and the base job that satisfies it. A rule without a case here fails the
// coverage test.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>

#include "memtune/model/checks.h"
#include "unit/model/checks_fixture.h"

namespace memtune::model {
namespace {

using testing::BaseFsdp2Job;
using testing::BaseJob;
using testing::FindRule;
using testing::Ids;

struct FailingCase {
  std::function<void(Job&)> mutate;
  bool fsdp2 = false;  // start from the FSDP2 base job
};

void Moe(Job& j) {
  j.model.num_moe_experts = 8;
  j.model.moe_ffn_hidden_size = 4096;
}

// rule id -> a mutation of the base job that violates it.
const std::map<std::string, FailingCase>& Cases() {
  static const auto* cases = new std::map<std::string, FailingCase>{
      {"layout.positive-sizes", {[](Job& j) { j.model.context_parallel_size = 0; }}},
      {"layout.world-size", {[](Job& j) { j.memtune.world_size = 30; }}},
      {"layout.global-batch", {[](Job& j) { j.train.global_batch_size = 31; }}},
      {"layout.sp-needs-tp", {[](Job& j) { j.model.tensor_model_parallel_size = 1; }}},
      {"layout.ep-tp-needs-sp", {[](Job& j) {
         Moe(j);
         j.model.expert_model_parallel_size = 2;
         j.model.sequence_parallel = false;
       }}},
      {"layout.tp-comm-overlap-needs-sp", {[](Job& j) {
         j.model.tp_comm_overlap = true;
         j.model.sequence_parallel = false;
       }}},
      {"layout.cp-seq-length", {[](Job& j) {
         j.model.context_parallel_size = 2;
         j.model.seq_length = 4098;
       }}},
      {"layout.seq-length-mismatch", {[](Job& j) { j.model.written_model_seq_length = 8192; }}},
      {"heads.tp-divides-heads", {[](Job& j) {
         j.model.tensor_model_parallel_size = 8;
         j.model.num_attention_heads = 60;
         j.model.num_query_groups = 4;
       }}},
      {"heads.query-groups-tp", {[](Job& j) {
         j.model.num_attention_heads = 48;
         j.model.num_query_groups = 6;
       }}},
      {"heads.groups-divide-heads", {[](Job& j) { j.model.num_query_groups = 12; }}},
      {"vocab.tp-divides-vocab", {[](Job& j) { j.model.vocab_size = 128255; }}},
      {"pipeline.vpp-needs-pp", {[](Job& j) { j.model.pipeline_model_parallel_size = 1; }}},
      {"pipeline.vpp-pp2", {[](Job& j) { j.model.pipeline_model_parallel_size = 2; }}},
      {"pipeline.even-layers", {[](Job& j) { j.model.num_layers = 78; }}},
      {"pipeline.even-layers-vpp",
       {[](Job& j) { j.model.virtual_pipeline_model_parallel_size = 3; }}},
      {"pipeline.uneven-with-account", {[](Job& j) {
         j.model.num_layers_in_first_pipeline_stage = 20;
         j.model.account_for_embedding_in_pipeline_split = true;
       }}},
      {"pipeline.layout-exclusive", {[](Job& j) {
         j.model.pipeline_model_parallel_layout = "Et*20|t*20|t*20|t*20L";
         j.model.virtual_pipeline_model_parallel_size.reset();
         j.model.account_for_loss_in_pipeline_split = true;
       }}},
      {"pipeline.uneven-stages", {[](Job& j) { j.model.num_layers_in_first_pipeline_stage = 18; }}},
      {"pipeline.uneven-middle", {[](Job& j) {
         j.model.virtual_pipeline_model_parallel_size.reset();
         j.model.num_layers_in_first_pipeline_stage = 11;
         j.model.num_layers_in_last_pipeline_stage = 10;
       }}},
      {"pipeline.layout-parse", {[](Job& j) {
         j.model.pipeline_model_parallel_layout = "Et*20|t*20|t*20|t*19L";
         j.model.virtual_pipeline_model_parallel_size.reset();
       }}},
      {"pipeline.layout-vpp",
       {[](Job& j) { j.model.pipeline_model_parallel_layout = "Et*20|t*20|t*20|t*20L"; }}},
      {"pipeline.defer-embedding-wgrad", {[](Job& j) {
         j.model.pipeline_model_parallel_size = 1;
         j.model.virtual_pipeline_model_parallel_size.reset();
         j.model.defer_embedding_wgrad_compute = true;
       }}},
      {"pipeline.defer-embedding-wgrad-fusion", {[](Job& j) {
         j.model.defer_embedding_wgrad_compute = true;
         j.model.gradient_accumulation_fusion = false;
       }}},
      {"pipeline.microbatch-group", {[](Job& j) { j.train.global_batch_size = 6; }}},
      {"moe.ep-needs-experts", {[](Job& j) { j.model.expert_model_parallel_size = 2; }}},
      {"moe.experts-positive", {[](Job& j) { j.model.num_moe_experts = 0; }}},
      {"moe.topk-experts", {[](Job& j) {
         j.model.num_moe_experts = 8;
         j.model.moe_router_topk = 9;
       }}},
      {"heads.tp-divides-ffn", {[](Job& j) {
         j.model.num_moe_experts.reset();
         j.model.ffn_hidden_size = 14337;
         j.model.tensor_model_parallel_size = 2;
       }}},
      {"moe.experts-divisible-ep", {[](Job& j) {
         Moe(j);
         j.model.num_moe_experts = 7;
         j.model.expert_model_parallel_size = 2;
       }}},
      {"moe.expert-layout", {[](Job& j) {
         Moe(j);
         j.model.expert_model_parallel_size = 4;
       }}},
      {"moe.ffn-without-experts", {[](Job& j) { j.model.moe_ffn_hidden_size = 1024; }}},
      {"moe.shared-expert-size", {[](Job& j) {
         Moe(j);
         j.model.moe_shared_expert_intermediate_size = 0;
       }}},
      {"moe.shared-expert-overlap-dispatcher", {[](Job& j) {
         Moe(j);
         j.model.moe_shared_expert_intermediate_size = 1024;
         j.model.moe_shared_expert_overlap = true;
       }}},
      {"moe.bias-needs-etp1", {[](Job& j) {
         Moe(j);
         j.model.add_bias_linear = true;
       }}},
      {"moe.layer-freq", {[](Job& j) {
         Moe(j);
         j.model.moe_layer_freq = {1, 0, 1};
         j.model.moe_layer_freq_is_list = true;
       }}},
      {"moe.ep-overlap", {[](Job& j) { j.model.overlap_moe_expert_parallel_comm = true; }}},
      {"recompute.full-needs-method", {[](Job& j) {
         j.model.recompute_granularity = RecomputeGranularity::kFull;
         j.model.recompute_num_layers = 1;
       }}},
      {"recompute.full-needs-num-layers", {[](Job& j) {
         j.model.recompute_granularity = RecomputeGranularity::kFull;
         j.model.recompute_method = RecomputeMethod::kUniform;
       }}},
      {"recompute.num-layers-range", {[](Job& j) {
         j.model.recompute_granularity = RecomputeGranularity::kFull;
         j.model.recompute_method = RecomputeMethod::kUniform;
         j.model.recompute_num_layers = 21;
       }}},
      {"recompute.selective-num-layers", {[](Job& j) {
         j.model.recompute_granularity = RecomputeGranularity::kSelective;
         j.model.recompute_num_layers = 1;
       }}},
      {"recompute.selective-method", {[](Job& j) {
         j.model.recompute_granularity = RecomputeGranularity::kSelective;
         j.model.recompute_method = RecomputeMethod::kBlock;
       }}},
      {"recompute.no-granularity",
       {[](Job& j) { j.model.recompute_method = RecomputeMethod::kUniform; }}},
      {"recompute.distribute-saved-sp", {[](Job& j) {
         j.model.recompute_granularity = RecomputeGranularity::kFull;
         j.model.recompute_method = RecomputeMethod::kUniform;
         j.model.recompute_num_layers = 1;
         j.model.distribute_saved_activations = true;
       }}},
      {"recompute.distribute-saved", {[](Job& j) { j.model.distribute_saved_activations = true; }}},
      {"recompute.modules-valid", {[](Job& j) {
         j.model.recompute_granularity = RecomputeGranularity::kSelective;
         j.model.recompute_modules = {"mlp", "attention"};
       }}},
      {"recompute.moe-act-grouped-gemm", {[](Job& j) {
         Moe(j);
         j.model.recompute_granularity = RecomputeGranularity::kSelective;
         j.model.recompute_modules = {"moe_act"};
       }}},
      {"recompute.mla-up-proj", {[](Job& j) {
         j.model.recompute_granularity = RecomputeGranularity::kSelective;
         j.model.recompute_modules = {"mla_up_proj"};
       }}},
      {"recompute.core-attn",
       {[](Job& j) { j.model.recompute_granularity = RecomputeGranularity::kSelective; }}},
      {"recompute.shared-experts-overlap", {[](Job& j) {
         Moe(j);
         j.model.moe_shared_expert_intermediate_size = 1024;
         j.model.moe_shared_expert_overlap = true;
         j.model.moe_token_dispatcher_type = MoeTokenDispatcher::kAlltoall;
         j.model.recompute_granularity = RecomputeGranularity::kSelective;
         j.model.recompute_modules = {"shared_experts"};
       }}},
      {"recompute.fp8-delayed-modules", {[](Job& j) {
         j.model.fp8 = model::Fp8Format::kHybrid;
         j.model.fp8_recipe = model::Fp8Recipe::kDelayed;
         j.model.recompute_granularity = RecomputeGranularity::kSelective;
         j.model.recompute_modules = {"layernorm"};
       }}},
      {"offload.num-layers", {[](Job& j) {
         j.model.cpu_offloading = true;
         j.model.cpu_offloading_num_layers = 80;
       }}},
      {"offload.pp", {[](Job& j) {
         j.model.cpu_offloading = true;
         j.model.cpu_offloading_num_layers = 1;
       }}},
      {"offload.recompute", {[](Job& j) {
         j.model.cpu_offloading = true;
         j.model.recompute_granularity = RecomputeGranularity::kSelective;
       }}},
      {"offload.cuda-graphs", {[](Job& j) {
         j.model.cpu_offloading = true;
         j.model.cuda_graph_impl = CudaGraphImpl::kLocal;
       }}},
      {"attention.local-needs-local-spec",
       {[](Job& j) { j.model.attention_backend = model::AttentionBackend::kLocal; }}},
      {"attention.unfused-cp", {[](Job& j) {
         j.model.attention_backend = model::AttentionBackend::kUnfused;
         j.model.context_parallel_size = 2;
       }}},
      {"attention.unfused-scores", {[](Job& j) {
         j.model.attention_backend = model::AttentionBackend::kUnfused;
         j.model.seq_length = 65536;
       }}},
      {"offload.nothing-offloaded", {[](Job& j) { j.model.cpu_offloading = true; }}},
      {"offload.fine-grained-exclusive", {[](Job& j) {
         j.model.cpu_offloading = true;
         j.model.fine_grained_activation_offloading = true;
         j.model.offload_modules = {"core_attn"};
       }}},
      {"offload.modules-valid",
       {[](Job& j) { j.model.fine_grained_activation_offloading = true; }}},
      {"offload.attn-proj-needs-core-attn", {[](Job& j) {
         j.model.fine_grained_activation_offloading = true;
         j.model.offload_modules = {"attn_proj"};
       }}},
      {"offload.inside-recomputed-moe", {[](Job& j) {
         Moe(j);
         j.model.fine_grained_activation_offloading = true;
         j.model.offload_modules = {"moe_act"};
         j.model.recompute_granularity = RecomputeGranularity::kSelective;
         j.model.recompute_modules = {"moe"};
       }}},
      {"offload.fused-group-mlp", {[](Job& j) {
         j.model.fine_grained_activation_offloading = true;
         j.model.offload_modules = {"fused_group_mlp", "moe_act"};
       }}},
      {"offload.fine-grained-cuda-graph", {[](Job& j) {
         j.model.fine_grained_activation_offloading = true;
         j.model.offload_modules = {"core_attn"};
         j.model.cuda_graph_impl = CudaGraphImpl::kLocal;
         j.model.cuda_graph_scope = {"attn"};
       }}},
      {"precision.fp16-bf16", {[](Job& j) { j.model.fp16 = true; }}},
      {"precision.fp8-delayed-first-last", {[](Job& j) {
         j.model.fp8 = model::Fp8Format::kHybrid;
         j.model.fp8_recipe = model::Fp8Recipe::kDelayed;
         j.model.first_last_layers_bf16 = true;
       }}},
      {"precision.bf16-layers-range", {[](Job& j) {
         j.model.fp8 = model::Fp8Format::kHybrid;
         j.model.fp8_recipe = model::Fp8Recipe::kTensorwise;
         j.model.first_last_layers_bf16 = true;
         j.model.num_layers_at_start_in_bf16 = 21;
       }}},
      {"precision.fp8-param", {[](Job& j) { j.model.fp8_param = true; }}},
      {"precision.fp4-param", {[](Job& j) { j.model.fp4_param = true; }}},
      {"precision.fp4-fp8", {[](Job& j) {
         j.model.fp4 = model::Fp4Format::kE2m1;
         j.model.fp8 = model::Fp8Format::kHybrid;
       }}},
      {"precision.ce-fusion-te", {[](Job& j) {
         j.model.cross_entropy_loss_fusion = true;
         j.model.cross_entropy_fusion_impl = CrossEntropyFusionImpl::kTe;
       }}},
      {"optimizer.precision-aware-adam", {[](Job& j) {
         j.optimizer.use_precision_aware_optimizer = true;
         j.optimizer.optimizer = Optimizer::kSgd;
       }}},
      {"optimizer.state-dtypes", {[](Job& j) { j.optimizer.exp_avg_dtype = Dtype::kBf16; }}},
      {"optimizer.cpu-offload", {[](Job& j) { j.optimizer.optimizer_cpu_offload = true; }}},
      {"cudagraph.scope-valid", {[](Job& j) {
         j.model.cuda_graph_impl = CudaGraphImpl::kTransformerEngine;
         j.model.cuda_graph_scope = {"layer"};
       }}},
      {"cudagraph.full-iteration-scope", {[](Job& j) {
         j.model.cuda_graph_impl = CudaGraphImpl::kFullIteration;
         j.model.cuda_graph_scope = {"attn"};
       }}},
      {"cudagraph.full-recompute", {[](Job& j) {
         j.model.cuda_graph_impl = CudaGraphImpl::kTransformerEngine;
         j.model.recompute_granularity = RecomputeGranularity::kFull;
         j.model.recompute_method = RecomputeMethod::kUniform;
         j.model.recompute_num_layers = 1;
       }}},
      {"cudagraph.moe-scopes", {[](Job& j) {
         j.model.cuda_graph_impl = CudaGraphImpl::kTransformerEngine;
         j.model.cuda_graph_scope = {"moe_router"};
       }}},
      {"cudagraph.dropout-recompute", {[](Job& j) {
         j.model.cuda_graph_impl = CudaGraphImpl::kTransformerEngine;
         j.model.cuda_graph_scope = {"attn"};
         j.model.attention_dropout = 0.1;
         j.model.recompute_granularity = RecomputeGranularity::kSelective;
       }}},
      {"cudagraph.moe-recompute-router", {[](Job& j) {
         Moe(j);
         j.model.cuda_graph_impl = CudaGraphImpl::kTransformerEngine;
         j.model.cuda_graph_scope = {"moe_router"};
         j.model.recompute_granularity = RecomputeGranularity::kSelective;
         j.model.recompute_modules = {"moe"};
       }}},
      {"cudagraph.ep-overlap-scope", {[](Job& j) {
         Moe(j);
         j.model.overlap_moe_expert_parallel_comm = true;
         j.model.cuda_graph_impl = CudaGraphImpl::kTransformerEngine;
         j.model.cuda_graph_scope = {"mlp"};
       }}},
      {"alloc.conf-valid",
       {[](Job& j) { j.memtune.env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:true"; }}},
      {"alloc.expandable-nccl-ub", {[](Job& j) {
         j.memtune.env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True";
         j.ddp.nccl_ub = true;
       }}},
      {"alloc.cuda-graph-nccl-register", {[](Job& j) {
         j.memtune.env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True";
         j.model.cuda_graph_impl = CudaGraphImpl::kLocal;
       }}},
      {"alloc.cuda-graph-nccl-register-blackwell", {[](Job& j) {
         j.memtune.env["PYTORCH_ALLOC_CONF"] = "expandable_segments:True";
         j.model.cuda_graph_impl = CudaGraphImpl::kLocal;
         j.memtune.gpu = "b200";
       }}},
      {"peft.regather-ineligible", {[](Job& j) {
         j.peft = PeftConfig{};
         j.peft->sequence_parallel_input_regather = true;
         j.model.cuda_graph_impl = CudaGraphImpl::kTransformerEngine;
         j.model.cuda_graph_scope = {"mlp"};
       }}},
      {"peft.regather-advice", {[](Job& j) { j.peft = PeftConfig{}; }}},
      {"peft.moe-lora-rank", {[](Job& j) {
         j.model.num_moe_experts = 8;
         j.model.moe_router_topk = 3;
         j.peft = PeftConfig{};  // dim 32
         j.peft->normalize_moe_lora = true;
       }}},
      {"ddp.overlap-param-gather-sharded", {[](Job& j) {
         j.ddp.overlap_param_gather = true;
         j.ddp.overlap_grad_reduce = true;
         j.ddp.use_distributed_optimizer = false;
         j.optimizer.use_distributed_optimizer = false;
       }}},
      {"ddp.overlap-param-gather-grad-reduce", {[](Job& j) { j.ddp.overlap_param_gather = true; }}},
      {"ddp.dist-opt-instances", {[](Job& j) { j.ddp.num_distributed_optimizer_instances = 3; }}},
      {"fsdp.shard-degree", {[](Job& j) { j.memtune.fsdp2.shard_degree = 3; }, true}},
      {"fsdp.compile-loss", {[](Job& j) { j.memtune.fsdp2.compile_loss = true; }, true}},
      {"fsdp.megatron-levers-ignored", {[](Job& j) { j.model.cpu_offloading = true; }, true}},
  };
  return *cases;
}

TEST(CheckRulesTest, Fsdp2WarnsThatPeftAndMegatronFp8AreIgnored) {
  // peft: lora and an fp8 mixed-precision preset left an fsdp2 estimate unchanged, silently.
  Job job = BaseFsdp2Job();
  job.peft = PeftConfig{};
  job.model.fp8 = model::Fp8Format::kHybrid;
  const std::vector<Finding> findings = CheckJob(job);
  ASSERT_EQ(Ids(findings), std::vector<std::string>{"fsdp.megatron-levers-ignored"});
  EXPECT_EQ(findings[0].fields, (std::vector<std::pair<std::string, std::string>>{
                                    {"peft", "lora"}, {"model.fp8", "hybrid"}}));
}

TEST(CheckRulesTest, BaseJobsPassEveryRule) {
  EXPECT_EQ(Ids(CheckJob(BaseJob())), std::vector<std::string>{});
  EXPECT_EQ(Ids(CheckJob(BaseFsdp2Job())), std::vector<std::string>{});
}

// The unfused-softmax warning starts at 256 MiB per layer and micro-batch: bf16, MBS 1 and
// 64 heads / TP 4 keep 32 * s^2 bytes, which crosses 2^28 between s = 2896 and s = 2897.
TEST(CheckRulesTest, UnfusedScoresWarnFrom256MiB) {
  auto fires = [](std::int64_t seq) {
    Job job = BaseJob();
    job.model.attention_backend = model::AttentionBackend::kUnfused;
    job.model.seq_length = seq;
    const auto ids = Ids(CheckJob(job));
    return std::find(ids.begin(), ids.end(), "attention.unfused-scores") != ids.end();
  };
  EXPECT_FALSE(fires(2896));
  EXPECT_TRUE(fires(2897));
}

TEST(CheckRulesTest, EveryRuleHasAFailingCase) {
  std::set<std::string> missing;
  for (const RuleInfo& rule : ListRules()) {
    if (!Cases().count(std::string(rule.id))) missing.insert(std::string(rule.id));
  }
  EXPECT_EQ(missing, std::set<std::string>{});
  EXPECT_EQ(Cases().size(), ListRules().size());  // no case for a rule that does not exist
}

TEST(CheckRulesTest, EachFailingCaseFiresItsRuleWithItsSeverity) {
  for (const RuleInfo& rule : ListRules()) {
    const std::string id(rule.id);
    SCOPED_TRACE(id);
    auto it = Cases().find(id);
    if (it == Cases().end()) continue;  // reported by EveryRuleHasAFailingCase
    Job job = it->second.fsdp2 ? BaseFsdp2Job() : BaseJob();
    it->second.mutate(job);
    const std::vector<Finding> findings = CheckJob(job);
    const Finding* f = FindRule(findings, id);
    ASSERT_NE(f, nullptr) << "fired instead: " << ::testing::PrintToString(Ids(findings));
    EXPECT_EQ(f->severity, rule.severity);
    EXPECT_EQ(f->source, rule.source);
    EXPECT_FALSE(f->fields.empty());
    EXPECT_FALSE(f->message.empty());
    EXPECT_FALSE(f->fix.empty());
    for (const auto& [path, value] : f->fields) {
      EXPECT_FALSE(path.empty());
      EXPECT_FALSE(value.empty()) << path;
    }
  }
}

}  // namespace
}  // namespace memtune::model
