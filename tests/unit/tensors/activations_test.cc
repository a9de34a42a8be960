// Per-layer saved activations of small hand-checkable layers (docs/estimator.md).
#include "tensors/activations.h"

#include <gtest/gtest.h>

#include "tensors/layer_tensors.h"
#include "unit/estimate/test_jobs.h"

namespace memtune::tensors {
namespace {

using estimate::testing::TinyJob;

// TinyJob per token (bf16, TP1, no SP): ln1_in 16, ln1_out 16, qkv (q 16 + k 16 + v 16: TE
// copies the v view of mixed_qkv) 48, attn_out 16, softmax stats 8, ln2_in 16, ln2_out 16,
// fc1_out 64, fc2_in 32 = 232; times 4 tokens.
TEST(ActivationsTest, DenseBf16LayerTensorByTensor) {
  const auto a = LayerActivations(MakeActContext(TinyJob()), false, true);
  EXPECT_EQ(a[kLn1Input], 64);
  EXPECT_EQ(a[kLn1Output], 64);
  EXPECT_EQ(a[kAttnQkv], 192);
  EXPECT_EQ(a[kAttnOut], 64);
  EXPECT_EQ(a[kAttnSoftmaxStats], 32);
  EXPECT_EQ(a[kLn2Input], 64);
  EXPECT_EQ(a[kLn2Output], 64);
  EXPECT_EQ(a[kMlpFc1Out], 256);
  EXPECT_EQ(a[kMlpFc2In], 128);
  EXPECT_EQ(a[kAttnDropoutMask], 0);
  EXPECT_EQ(SumBytes(a), 928);
}

TEST(ActivationsTest, CoreAttnRecomputeKeepsMcoresQkvAndDropsTheSoftmaxStats) {
  auto job = TinyJob();
  job.model.recompute_granularity = model::RecomputeGranularity::kSelective;
  job.model.recompute_modules = {"core_attn"};
  const auto a = LayerActivations(MakeActContext(job), false, true);
  EXPECT_EQ(a[kAttnSoftmaxStats], 0);
  // The checkpoint saves the rotated q and k and the v view, which keeps mixed_qkv (48).
  EXPECT_EQ(a[kAttnQkv], 320);
  EXPECT_EQ(SumBytes(a), 1024);
}

TEST(ActivationsTest, WhatKeepsTheQkvOutputAlive) {
  // No RoPE, no GQA: q, k, v are views of mixed_qkv, which TE accepts as sbh3d.
  auto job = TinyJob();
  job.model.position_embedding_type = model::PositionEmbedding::kLearnedAbsolute;
  EXPECT_EQ(LayerActivations(MakeActContext(job), false, true)[kAttnQkv], 2 * 24 * 4);
  job.model.recompute_granularity = model::RecomputeGranularity::kSelective;
  job.model.recompute_modules = {"core_attn"};  // the checkpoint keeps the same views
  EXPECT_EQ(LayerActivations(MakeActContext(job), false, true)[kAttnQkv], 2 * 24 * 4);
  // GQA without RoPE: the query reshape is a copy; k and v stay views of mixed_qkv (16).
  job.model.num_query_groups = 1;
  EXPECT_EQ(LayerActivations(MakeActContext(job), false, true)[kAttnQkv], 2 * (8 + 16) * 4);
  job.model.recompute_modules = {};
  job.model.recompute_granularity = model::RecomputeGranularity::kNone;
  EXPECT_EQ(LayerActivations(MakeActContext(job), false, true)[kAttnQkv], 2 * 16 * 4);  // TE copies
  // MCore's local attention (no GQA) saves q, k, v as given: rotated q, k and the v view.
  job = TinyJob();
  job.model.transformer_impl = model::TransformerImpl::kLocal;
  EXPECT_EQ(LayerActivations(MakeActContext(job), false, true)[kAttnQkv], 320);
}

TEST(ActivationsTest, MlpRecomputeKeepsOnlyTheMlpInput) {
  auto job = TinyJob();
  job.model.recompute_granularity = model::RecomputeGranularity::kSelective;
  job.model.recompute_modules = {"mlp"};
  const auto a = LayerActivations(MakeActContext(job), false, true);
  EXPECT_EQ(a[kLn2Input], 64);
  EXPECT_EQ(a[kLn2Output] + a[kMlpFc1Out] + a[kMlpFc2In], 0);
  EXPECT_EQ(SumBytes(a), 928 - 64 - 256 - 128);
}

TEST(ActivationsTest, LayernormRecomputeIsANoOpForFusedDenseNorms) {
  auto job = TinyJob();
  job.model.recompute_granularity = model::RecomputeGranularity::kSelective;
  job.model.recompute_modules = {"layernorm"};
  EXPECT_EQ(SumBytes(LayerActivations(MakeActContext(job), false, true)), 928);
}

TEST(ActivationsTest, Fp8SavesGemmInputsInOneByte) {
  auto job = TinyJob();
  job.model.fp8 = model::Fp8Format::kHybrid;
  job.model.fp8_recipe = model::Fp8Recipe::kTensorwise;
  const auto ctx = MakeActContext(job);
  const auto a = LayerActivations(ctx, false, true);
  EXPECT_EQ(a[kLn1Output], 32);
  EXPECT_EQ(a[kLn2Output], 32);
  EXPECT_EQ(a[kMlpFc2In], 64);
  EXPECT_EQ(a[kAttnOut], 64);  // linear_proj keeps the bf16 attention output
  // A first/last layer kept in bf16 saves bf16 inputs.
  EXPECT_EQ(SumBytes(LayerActivations(ctx, false, false)), 928);
}

TEST(ActivationsTest, DelayedScalingProjKeepsFp8CopyToo) {
  auto job = TinyJob();
  job.model.fp8 = model::Fp8Format::kHybrid;
  job.model.fp8_recipe = model::Fp8Recipe::kDelayed;
  EXPECT_EQ(LayerActivations(MakeActContext(job), false, true)[kAttnOut], 64 + 32);
}

TEST(ActivationsTest, DropoutAddsOneBytePerElementMasks) {
  auto job = TinyJob();
  job.model.hidden_dropout = 0.1;
  const auto a = LayerActivations(MakeActContext(job), false, true);
  EXPECT_EQ(a[kAttnDropoutMask], 32);
  EXPECT_EQ(a[kMlpDropoutMask], 32);
}

TEST(ActivationsTest, SequenceParallelShardsHiddenTensorsOverTp) {
  auto job = TinyJob();
  job.model.tensor_model_parallel_size = 2;
  job.model.sequence_parallel = true;
  const auto a = LayerActivations(MakeActContext(job), false, true);
  EXPECT_EQ(a[kLn1Input], 32);
  EXPECT_EQ(a[kMlpFc1Out], 128);
  job.model.sequence_parallel = false;  // without SP the norm tensors are whole
  EXPECT_EQ(LayerActivations(MakeActContext(job), false, true)[kLn1Input], 64);
}

TEST(ActivationsTest, PeftFrozenBaseKeepsNoGemmInputsButLoraKeepsTheNormOutput) {
  auto job = TinyJob();
  job.peft = model::PeftConfig{};
  job.peft->dim = 2;
  job.peft->target_modules = {"linear_qkv"};
  const auto a = LayerActivations(MakeActContext(job), false, false);
  // TE keeps ln_out because the base returns it to the adapter; LoRA-A holds that same
  // tensor (no SP: nothing gathered), so nothing more.
  EXPECT_EQ(a[kLn1Output], 64);  // bf16 norm output, 4 tokens x 8
  EXPECT_EQ(a[kLoraInput], 0);
  EXPECT_EQ(a[kLn2Output], 0);  // linear_fc1 has no adapter: TE clears its ln_out
  EXPECT_EQ(a[kMlpFc2In], 0);
  EXPECT_EQ(a[kLoraHidden], 16);  // 2 B * dim 2 * 4 tokens
}

TEST(ActivationsTest, LoraUnderSpKeepsTheGatheredCopyBesideTesShardUnlessRegathered) {
  auto job = TinyJob();
  job.model.tensor_model_parallel_size = 2;
  job.model.sequence_parallel = true;
  job.peft = model::PeftConfig{};
  job.peft->target_modules = {"linear_qkv"};
  auto a = LayerActivations(MakeActContext(job), false, false);
  EXPECT_EQ(a[kLn1Output], 32);  // TE's local shard
  EXPECT_EQ(a[kLoraInput], 64);  // the gathered copy LoRA-A keeps
  job.peft->sequence_parallel_input_regather = true;
  a = LayerActivations(MakeActContext(job), false, false);
  EXPECT_EQ(a[kLn1Output], 32);  // LoRA-A keeps this very shard
  EXPECT_EQ(a[kLoraInput], 0);
  // fp8: TE keeps its fp8 shard, LoRA-A the bf16 one it was handed.
  job.model.fp8 = model::Fp8Format::kHybrid;
  job.model.fp8_recipe = model::Fp8Recipe::kTensorwise;
  a = LayerActivations(MakeActContext(job), false, true);
  EXPECT_EQ(a[kLn1Output], 16);
  EXPECT_EQ(a[kLoraInput], 32);
}

TEST(ActivationsTest, MoeModulesDropTheirTensors) {
  auto job = TinyJob();
  job.model.num_moe_experts = 4;
  job.model.moe_router_topk = 2;
  job.model.moe_ffn_hidden_size = 8;
  auto ctx = MakeActContext(job);
  const auto a = LayerActivations(ctx, true, true);
  // fp32 logits + probs of 4 experts, and the 2 permuted fp32 probs per token.
  EXPECT_EQ(a[kMoeRouter], 4 * (32 + 8));
  EXPECT_EQ(a[kMoeDispatch], 4 * 2 * 16);  // top-2 copies of the 8-wide token
  EXPECT_EQ(a[kMoeFc1Out], 4 * 2 * 2 * 16);
  EXPECT_EQ(a[kMoeFc2In], 4 * 2 * 16);
  ctx.recompute_moe_act = true;
  EXPECT_EQ(LayerActivations(ctx, true, true)[kMoeFc2In], 0);
  ctx.recompute_moe = true;
  const auto none = LayerActivations(ctx, true, true);
  EXPECT_EQ(none[kMoeRouter] + none[kMoeDispatch] + none[kMoeFc1Out] + none[kMoeCombine], 0);
  EXPECT_EQ(none[kLn2Output], 64);  // the checkpointed MoE keeps its input
}

// LoRA on a MoE layer (Bridge peft/lora.py, peft/utils.py ParallelLinearAdapter): the
// expert adapters keep the dispatched tokens (fc1) and the expert activation output (fc2)
// the frozen grouped base drops, and LoRA-A's [tokens x topk, dim] outputs; the shared
// expert's fc2 adapter keeps its input.
TEST(ActivationsTest, LoraOnMoeLayerKeepsTheExpertInputsAndHiddens) {
  auto job = TinyJob();
  job.model.num_moe_experts = 4;
  job.model.moe_router_topk = 2;
  job.model.moe_ffn_hidden_size = 8;
  job.peft = model::PeftConfig{};
  job.peft->dim = 2;
  job.peft->target_modules = {"linear_fc1", "linear_fc2"};
  auto a = LayerActivations(MakeActContext(job), true, true);
  EXPECT_EQ(a[kMoeDispatch], 0);  // the frozen grouped fc1 keeps no input
  EXPECT_EQ(a[kMoeFc2In], 0);
  // 4 tokens x 2 copies x bf16: fc1 input h 8, fc2 input f_e 8.
  EXPECT_EQ(a[kMoeLoraInput], 4 * 2 * 2 * (8 + 8));
  EXPECT_EQ(a[kMoeLoraHidden], 4 * 2 * 2 * (2 + 2));
  EXPECT_EQ(a[kLoraInput] + a[kLoraHidden], 0);  // no attention targets
  // normalize_moe_lora: the experts' rank is dim / topk.
  job.peft->dim = 4;
  job.peft->normalize_moe_lora = true;
  a = LayerActivations(MakeActContext(job), true, true);
  EXPECT_EQ(a[kMoeLoraHidden], 4 * 2 * 2 * (2 + 2));
  // A shared expert of 4: its fc2 adapter keeps the 4-wide input; without SP the fc1 one
  // holds the norm output the router keeps (nothing more). Hiddens at the full rank 4.
  job.model.moe_shared_expert_intermediate_size = 4;
  a = LayerActivations(MakeActContext(job), true, true);
  EXPECT_EQ(a[kMoeLoraInput], 4 * 2 * 2 * (8 + 8) + 4 * 2 * 4);
  EXPECT_EQ(a[kMoeLoraHidden], 4 * 2 * 2 * (2 + 2) + 4 * 2 * (4 + 4));
  // moe_act recompute frees the activation output fc2's adapter holds; moe drops it all.
  job.model.recompute_granularity = model::RecomputeGranularity::kSelective;
  job.model.recompute_modules = {"moe_act"};
  a = LayerActivations(MakeActContext(job), true, true);
  EXPECT_EQ(a[kMoeLoraInput], 4 * 2 * 2 * 8 + 4 * 2 * 4);
  job.model.recompute_modules = {"moe"};
  a = LayerActivations(MakeActContext(job), true, true);
  EXPECT_EQ(a[kMoeLoraInput] + a[kMoeLoraHidden], 0);
  // Dense layers of the same job are unchanged.
  EXPECT_EQ(LayerActivations(MakeActContext(job), false, true)[kMoeLoraInput], 0);
}

// Shared experts (Megatron-LM d98e8a64 moe/shared_experts.py): the gate's `output *
// gate_score` keeps the shared output and the [tokens, 1] score; with the overlap under SP
// the shared expert all-gathers its input itself and linear_fc1 keeps that copy.
TEST(ActivationsTest, SharedExpertGateAndOverlapKeepTheirTensors) {
  auto job = TinyJob();  // 4 tokens, h 8, bf16
  job.model.num_moe_experts = 4;
  job.model.moe_router_topk = 2;
  job.model.moe_ffn_hidden_size = 8;
  job.model.moe_shared_expert_intermediate_size = 4;
  auto a = LayerActivations(MakeActContext(job), true, true);
  EXPECT_EQ(a[kSharedGateOut] + a[kSharedFc1Input], 0);
  job.model.moe_shared_expert_gate = true;
  a = LayerActivations(MakeActContext(job), true, true);
  EXPECT_EQ(a[kSharedGateOut], 4 * 2 * (8 + 1));
  EXPECT_EQ(LayerActivations(MakeActContext(job), false, true)[kSharedGateOut], 0);  // dense
  // The overlap needs SP under TP to gather: then fc1 keeps all 4 tokens' h, and the gate's
  // tensors are sequence-sharded.
  job.model.moe_shared_expert_overlap = true;
  EXPECT_EQ(LayerActivations(MakeActContext(job), true, true)[kSharedFc1Input], 0);
  job.model.tensor_model_parallel_size = 2;
  job.model.sequence_parallel = true;
  a = LayerActivations(MakeActContext(job), true, true);
  EXPECT_EQ(a[kSharedFc1Input], 4 * 2 * 8);
  EXPECT_EQ(a[kSharedGateOut], 4 * 2 * (8 + 1) / 2);
  // LoRA on the shared fc1 under the overlap: the frozen base keeps no input, the adapter
  // keeps the gathered copy even with re-gather on (the overlap disables it).
  job.peft = model::PeftConfig{};
  job.peft->dim = 2;
  job.peft->target_modules = {"linear_fc1"};
  job.peft->sequence_parallel_input_regather = true;
  a = LayerActivations(MakeActContext(job), true, true);
  EXPECT_EQ(a[kSharedFc1Input], 0);
  const std::int64_t with_overlap = a[kMoeLoraInput];
  job.model.moe_shared_expert_overlap = false;
  a = LayerActivations(MakeActContext(job), true, true);
  EXPECT_EQ(with_overlap - a[kMoeLoraInput], 4 * 2 * 8);
  job.model.moe_shared_expert_overlap = true;
  job.peft.reset();
  // Recomputing the shared experts drops both (re-made in backward).
  job.model.recompute_granularity = model::RecomputeGranularity::kSelective;
  job.model.recompute_modules = {"shared_experts"};
  a = LayerActivations(MakeActContext(job), true, true);
  EXPECT_EQ(a[kSharedGateOut] + a[kSharedFc1Input], 0);
}

// The alltoall dispatcher's permutation keeps its map for backward and the un-permute:
// TE's fused kernel an int32 [tokens, 2E + 1] row map, the unfused path the int64 sorted
// indices (one per routed copy).
TEST(ActivationsTest, AlltoallPermutationKeepsItsMap) {
  auto job = TinyJob();  // 4 tokens
  job.model.num_moe_experts = 4;
  job.model.moe_router_topk = 2;
  job.model.moe_ffn_hidden_size = 8;
  job.model.moe_token_dispatcher_type = model::MoeTokenDispatcher::kAlltoall;
  EXPECT_EQ(LayerActivations(MakeActContext(job), true, true)[kMoePermuteMap], 4 * 8 * 2);
  job.model.moe_permute_fusion = true;
  // The row map, and with 4 local experts the two chunk sorts' int32 maps per routed copy.
  EXPECT_EQ(LayerActivations(MakeActContext(job), true, true)[kMoePermuteMap],
            4 * 4 * (2 * 4 + 1) + 4 * 2 * 4 * 2);
  job.model.expert_model_parallel_size = 4;  // one local expert: no chunk sort
  EXPECT_EQ(LayerActivations(MakeActContext(job), true, true)[kMoePermuteMap], 4 * 4 * (2 * 4 + 1));
  EXPECT_EQ(LayerActivations(MakeActContext(job), false, true)[kMoePermuteMap], 0);  // dense
  job.model.recompute_granularity = model::RecomputeGranularity::kSelective;
  job.model.recompute_modules = {"moe"};
  EXPECT_EQ(LayerActivations(MakeActContext(job), true, true)[kMoePermuteMap], 0);
}

// The allgather dispatcher permutes the gathered tokens (over expert TP x EP) bound for the
// local experts and keeps the map, and the local probabilities' masked_select keeps its fp32
// input and bool mask, [local experts, gathered tokens]; flex is not modelled.
TEST(ActivationsTest, AllgatherPermutationKeepsItsMapAndTheProbabilitiesMask) {
  auto job = TinyJob();  // 4 tokens, TP 1
  job.model.num_moe_experts = 4;
  job.model.moe_router_topk = 2;
  job.model.moe_ffn_hidden_size = 8;
  ASSERT_EQ(job.model.moe_token_dispatcher_type, model::MoeTokenDispatcher::kAllgather);
  // Unfused: 8 B x 2 copies per token, and (4 + 1) B x 4 local experts.
  EXPECT_EQ(LayerActivations(MakeActContext(job), true, true)[kMoePermuteMap], 4 * (8 * 2 + 5 * 4));
  job.model.moe_permute_fusion = true;  // the int32 row map [tokens, 2 x 4 + 1]
  EXPECT_EQ(LayerActivations(MakeActContext(job), true, true)[kMoePermuteMap],
            4 * (4 * (2 * 4 + 1) + 5 * 4));
  // EP 2: twice the tokens gathered, 2 local experts.
  job.model.expert_model_parallel_size = 2;
  EXPECT_EQ(LayerActivations(MakeActContext(job), true, true)[kMoePermuteMap],
            4 * 2 * (4 * (2 * 2 + 1) + 5 * 2));
  job.model.moe_token_dispatcher_type = model::MoeTokenDispatcher::kFlex;
  EXPECT_EQ(LayerActivations(MakeActContext(job), true, true)[kMoePermuteMap], 0);
}

// DoRA (Bridge peft/dora_layers.py): `mag_norm_scale * (linear_output + adapter_output)`
// keeps the sum, one output-sized tensor per target; LoRA keeps none.
TEST(ActivationsTest, DoraKeepsEachTargetsScaledOutput) {
  auto job = TinyJob();  // 4 tokens, h 8, q 8 + k 4 x 2 + v 4 x 2 (24), ffn 16 gated
  job.peft = model::PeftConfig{};
  job.peft->dim = 2;
  job.peft->target_modules = {"linear_qkv", "linear_proj", "linear_fc1", "linear_fc2"};
  EXPECT_EQ(LayerActivations(MakeActContext(job), false, true)[kDoraScaled], 0);
  job.peft->method = model::PeftMethod::kDora;
  auto a = LayerActivations(MakeActContext(job), false, true);
  EXPECT_EQ(a[kDoraScaled], 4 * 2 * (24 + 8 + 2 * 16 + 8));
  // mlp recompute re-makes the MLP's (fc1 and fc2) in backward.
  job.model.recompute_granularity = model::RecomputeGranularity::kSelective;
  job.model.recompute_modules = {"mlp"};
  a = LayerActivations(MakeActContext(job), false, true);
  EXPECT_EQ(a[kDoraScaled], 4 * 2 * (24 + 8));
}

// Megatron-Core < 0.13 un-permutes with the probabilities, which keeps the expert outputs;
// from 0.13 the experts' activation applies them (model/versions.h McoreProbsInExperts).
TEST(ActivationsTest, MoeCombineKeptOnlyBeforeMegatronCore013) {
  auto job = TinyJob();
  job.model.num_moe_experts = 4;
  job.model.moe_router_topk = 2;
  job.model.moe_ffn_hidden_size = 8;
  EXPECT_EQ(LayerActivations(MakeActContext(job), true, true)[kMoeCombine], 0);
  job.memtune.versions.megatron_core = "0.12.3";
  EXPECT_EQ(LayerActivations(MakeActContext(job), true, true)[kMoeCombine], 4 * 2 * 2 * 8);
  job.memtune.versions.megatron_core = "0.13";
  EXPECT_EQ(LayerActivations(MakeActContext(job), true, true)[kMoeCombine], 0);
  // Unfused gated experts: act(x_glu) and x_linear always; the probs multiply's input only
  // where the experts apply the probabilities (2 B x f_e 8 x top-2 x 4 tokens per part).
  job.model.bias_activation_fusion = false;
  EXPECT_EQ(LayerActivations(MakeActContext(job), true, true)[kMoeActParts], 3 * 2 * 8 * 2 * 4);
  job.memtune.versions.megatron_core = "0.12";
  EXPECT_EQ(LayerActivations(MakeActContext(job), true, true)[kMoeActParts], 2 * 2 * 8 * 2 * 4);
}

// qk_layernorm: TE's q and k norms save contiguous copies of their inputs (q 8 + k 8
// elements per token, bf16) and one fp32 rstdev per head row (2 heads + 2 groups).
TEST(ActivationsTest, QkLayernormSavesTheNormInputs) {
  auto job = TinyJob();
  EXPECT_EQ(LayerActivations(MakeActContext(job), false, true)[kAttnQkNormInput], 0);
  job.model.qk_layernorm = true;
  const auto a = LayerActivations(MakeActContext(job), false, true);
  EXPECT_EQ(a[kAttnQkNormInput], 4 * (2 * (8 + 8) + 4 * (2 + 2)));
  EXPECT_EQ(SumBytes(a), 928 + 4 * 48);
}

TEST(ActivationsTest, CheckpointInputAndWorkspace) {
  auto job = TinyJob();
  const auto ctx = MakeActContext(job);
  EXPECT_EQ(CheckpointInputBytes(ctx, false), 64);
  EXPECT_GT(LayerBackwardWorkspace(ctx, false, true), 0);
}

// Unfused attention on TinyJob with 64 tokens and MBS 2 (128 tokens per micro-batch; two
// heads, so 2 x 64 = 128 attention scores per token).
model::Job UnfusedJob(model::AttentionBackend backend) {
  auto job = TinyJob();
  job.model.seq_length = 64;
  job.train.micro_batch_size = 2;
  job.train.global_batch_size = 2;
  job.model.attention_backend = backend;
  return job;
}

TEST(ActivationsTest, UnfusedTeAttentionKeepsTheBf16SoftmaxWhenItsKernelRuns) {
  // TE softmax.py is_kernel_available: 16 < sk < 16384, sk % 8, sq % 4, b * np % 4 and
  // sq % batch_per_block (8 for sk = 64) all hold, so the fused kernel saves its bf16 output.
  const auto a =
      LayerActivations(MakeActContext(UnfusedJob(model::AttentionBackend::kUnfused)), false, true);
  EXPECT_EQ(a[kAttnProbs], 2 * 128 * 128);
  EXPECT_EQ(a[kAttnProbsDropout], 0);
  EXPECT_EQ(a[kAttnSoftmaxStats], 0);
  EXPECT_EQ(a[kAttnQkv], 48 * 128);  // no GQA: q, k and TE's contiguous copy of v
}

TEST(ActivationsTest, FusedAttentionKeepsNoScores) {
  const auto a =
      LayerActivations(MakeActContext(UnfusedJob(model::AttentionBackend::kFlash)), false, true);
  EXPECT_EQ(a[kAttnProbs], 0);
  EXPECT_EQ(a[kAttnSoftmaxStats], 8 * 128);
}

TEST(ActivationsTest, LocalAttentionFallsBackToTheTorchSoftmax) {
  // MCore fused_softmax.py (causal): b * np = 4 is not a multiple of batch_per_block 8, so
  // the torch softmax runs; with softmax_in_fp32 it keeps the fp32 softmax and a bf16 copy.
  auto job = UnfusedJob(model::AttentionBackend::kAuto);
  job.model.transformer_impl = model::TransformerImpl::kLocal;
  EXPECT_EQ(LayerActivations(MakeActContext(job), false, true)[kAttnProbs], 2 * 128 * 128);
  job.model.attention_softmax_in_fp32 = true;
  EXPECT_EQ(LayerActivations(MakeActContext(job), false, true)[kAttnProbs], 6 * 128 * 128);
  job.model.attention_dropout = 0.1;  // the dropout then reads the copy; its output is kept
  const auto a = LayerActivations(MakeActContext(job), false, true);
  EXPECT_EQ(a[kAttnProbs], 4 * 128 * 128);
  EXPECT_EQ(a[kAttnProbsDropout], 3 * 128 * 128);
}

TEST(ActivationsTest, LongSequencesTakeTheTorchSoftmaxInTe) {
  auto job = UnfusedJob(model::AttentionBackend::kUnfused);
  job.model.seq_length = 16384;  // sk < 16384 fails
  job.train.micro_batch_size = 2;
  const auto ctx = MakeActContext(job);
  EXPECT_EQ(ctx.probs_bytes, 6);  // TE's softmax_in_fp32 is always on
}

TEST(ActivationsTest, UnfusedGqaKeepsRepeatedKeysAndValues) {
  auto job = UnfusedJob(model::AttentionBackend::kUnfused);
  job.model.num_query_groups = 1;  // q 8 per token; k, v repeated to both heads
  EXPECT_EQ(LayerActivations(MakeActContext(job), false, true)[kAttnQkv], 2 * 3 * 8 * 128);
  job.model.recompute_granularity = model::RecomputeGranularity::kSelective;
  job.model.recompute_modules = {"core_attn"};  // the checkpoint keeps q, k, v views instead
  const auto a = LayerActivations(MakeActContext(job), false, true);
  EXPECT_EQ(a[kAttnQkv], 2 * (8 + 4 + 16) * 128);
  EXPECT_EQ(a[kAttnProbs], 0);
}

TEST(ActivationsTest, UnfusedAttentionBackwardCanOutgrowTheMlpWorkingSet) {
  auto job = UnfusedJob(model::AttentionBackend::kUnfused);
  job.model.seq_length = 1024;
  const auto ctx = MakeActContext(job);
  const auto attn = LayerAttentionBackwardTransients(ctx, true);
  EXPECT_EQ(attn[kAttnBwdGradProbs], 2 * 2 * 1024 * 2048);
  EXPECT_EQ(LayerBackwardWorkspace(ctx, false, true),
            attn[kAttnBwdGradOut] + attn[kAttnBwdGradProbs] + attn[kAttnBwdGradScores]);
}

TEST(ActivationsTest, UnfusedActivationsKeepTheirIntermediates) {
  // TinyJob's MLP is gated (f = 16): silu(x_glu) * (x_linear + offset) saves both factors.
  auto job = TinyJob();
  job.model.bias_activation_fusion = false;
  auto a = LayerActivations(MakeActContext(job), false, true);
  EXPECT_EQ(a[kMlpActParts], 2 * 2 * 16 * 4);
  job.model.gated_linear_unit = false;  // plain GeLU: its output is the fc2 input, nothing more
  job.model.activation_func = "gelu";
  EXPECT_EQ(LayerActivations(MakeActContext(job), false, true)[kMlpActParts], 0);
  // Experts multiply the activation output by the fp32 routing probabilities, which saves it
  // (fused kernels exist for SwiGLU and quick-GeGLU only): top-2, f_e 16 -> 2 B x 16 x 2.
  job.model.num_moe_experts = 4;
  job.model.moe_router_topk = 2;
  job.model.moe_ffn_hidden_size = 16;
  job.model.bias_activation_fusion = true;
  a = LayerActivations(MakeActContext(job), true, true);
  EXPECT_EQ(a[kMoeActParts], 2 * 16 * 2 * 4);
  job.model.recompute_granularity = model::RecomputeGranularity::kSelective;
  job.model.recompute_modules = {"moe_act"};  // the checkpointed activation keeps nothing
  EXPECT_EQ(LayerActivations(MakeActContext(job), true, true)[kMoeActParts], 0);
  job = TinyJob();  // fused SwiGLU: no intermediates, dense or expert
  job.model.num_moe_experts = 4;
  job.model.moe_ffn_hidden_size = 16;
  EXPECT_EQ(LayerActivations(MakeActContext(job), true, true)[kMoeActParts], 0);
  EXPECT_EQ(LayerActivations(MakeActContext(job), false, true)[kMlpActParts], 0);
}

// use_te_activation_func: TE's activation ops keep their input only, so an unfused SwiGLU
// keeps no factors; the experts' probabilities multiply after the op keeps its output
// (experts.py bias_act_func). The local spec has no TE op: MCore's own activation runs.
TEST(ActivationsTest, TeActivationOpsKeepOnlyTheirInput) {
  auto job = TinyJob();  // gated SwiGLU, f = 16, 4 tokens
  job.model.bias_activation_fusion = false;
  job.model.use_te_activation_func = true;
  EXPECT_EQ(LayerActivations(MakeActContext(job), false, true)[kMlpActParts], 0);
  EXPECT_EQ(LayerActivations(MakeActContext(job), false, true)[kMlpFc1Out], 2 * 2 * 16 * 4);
  job.model.num_moe_experts = 4;
  job.model.moe_router_topk = 2;
  job.model.moe_ffn_hidden_size = 16;
  // MCore >= 0.13 multiplies the probabilities in: the op's bf16 output, top-2 x f_e 16.
  EXPECT_EQ(LayerActivations(MakeActContext(job), true, true)[kMoeActParts], 2 * 16 * 2 * 4);
  job.memtune.versions.megatron_core = "0.12";  // the probabilities multiply at the combine
  EXPECT_EQ(LayerActivations(MakeActContext(job), true, true)[kMoeActParts], 0);
  job.memtune.versions.megatron_core = "";
  job.model.transformer_impl = model::TransformerImpl::kLocal;
  EXPECT_EQ(LayerActivations(MakeActContext(job), false, true)[kMlpActParts], 2 * 2 * 16 * 4);
}

TEST(ActivationsTest, FineGrainedOffloadingMovesTheListedModulesTensors) {
  auto job = TinyJob();
  job.model.fine_grained_activation_offloading = true;
  job.model.offload_modules = {"qkv_linear", "core_attn", "attn_proj", "mlp_norm"};
  const auto ctx = MakeActContext(job);
  const auto kept = LayerActivations(ctx, false, true);
  const auto off = OffloadedTensors(ctx, false, kept);
  // TE's fused norm + linear_qkv keeps the norm input and output; core attention its q, k,
  // v and statistics; linear_proj its input. A dense layer has no separate pre-MLP norm.
  EXPECT_EQ(off[kLn1Input], kept[kLn1Input]);
  EXPECT_EQ(off[kLn1Output], kept[kLn1Output]);
  EXPECT_EQ(off[kAttnQkv], kept[kAttnQkv]);
  EXPECT_EQ(off[kAttnSoftmaxStats], kept[kAttnSoftmaxStats]);
  EXPECT_EQ(off[kAttnOut], kept[kAttnOut]);
  EXPECT_EQ(off[kLn2Input], 0);
  EXPECT_EQ(off[kMlpFc1Out], 0);
  job.model.fine_grained_activation_offloading = false;  // the list alone does nothing
  EXPECT_EQ(SumBytes(OffloadedTensors(MakeActContext(job), false, kept)), 0);
}

// MLA's up-projections (Megatron-LM d98e8a64): with qk_layernorm TE norm+linears keep their
// input, their norm output and an fp32 rstdev per token; without a q LoRA linear_q_proj is
// that norm+linear over the hidden states (only its norm output is new); without
// qk_layernorm plain linears keep their input. Sequence-sharded under SP.
TEST(ActivationsTest, MlaUpProjectionsKeepWhatTheirLinearsSave) {
  auto job = TinyJob();  // 4 tokens, h 8, bf16
  job.model.multi_latent_attention = true;
  job.model.q_lora_rank = 6;
  job.model.kv_lora_rank = 4;
  job.model.qk_head_dim = 4;
  job.model.qk_pos_emb_head_dim = 2;
  job.model.v_head_dim = 4;
  EXPECT_EQ(LayerActivations(MakeActContext(job), false, true)[kAttnMlaLatent], 4 * 2 * (6 + 4));
  job.model.qk_layernorm = true;
  EXPECT_EQ(LayerActivations(MakeActContext(job), false, true)[kAttnMlaLatent],
            4 * ((2 + 2) * 4 + 4 + (2 + 2) * 6 + 4));
  job.model.q_lora_rank.reset();
  EXPECT_EQ(LayerActivations(MakeActContext(job), false, true)[kAttnMlaLatent],
            4 * ((2 + 2) * 4 + 4 + 2 * 8 + 4));
  job.model.tensor_model_parallel_size = 2;
  job.model.sequence_parallel = true;
  EXPECT_EQ(LayerActivations(MakeActContext(job), false, true)[kAttnMlaLatent],
            4 * (((2 + 2) * 4 + 4 + 2 * 8 + 4) / 2));
}

TEST(ActivationsTest, MlaUpProjRecomputeFreesTheCoreAttentionsQkv) {
  auto job = TinyJob();
  job.model.multi_latent_attention = true;
  job.model.kv_lora_rank = 4;
  job.model.qk_head_dim = 4;
  job.model.qk_pos_emb_head_dim = 2;
  job.model.v_head_dim = 4;
  // Per token: 2 heads x (2 x (4 + 2) + 4) = 32 elements of q, k, v, 2 B each.
  EXPECT_EQ(LayerActivations(MakeActContext(job), false, true)[kAttnQkv], 2 * 32 * 4);
  job.model.recompute_granularity = model::RecomputeGranularity::kSelective;
  job.model.recompute_modules = {"mla_up_proj"};
  const auto a = LayerActivations(MakeActContext(job), false, true);
  EXPECT_EQ(a[kAttnQkv], 0);
  EXPECT_GT(a[kAttnMlaLatent], 0);  // the checkpoint's inputs stay
}
// TE gathers a column-parallel linear's saved input for its weight gradient only when the
// weight requires grad: a frozen PEFT base gathers nothing, its LoRA-A re-gathers its local
// input only with sequence_parallel_input_regather (bf16).
TEST(ActivationsTest, WgradInputGatherNeedsATrainableWeightOrARegatheringAdapter) {
  auto job = TinyJob();  // 4 tokens, h = 8, bf16
  job.model.tensor_model_parallel_size = 2;
  job.model.sequence_parallel = true;
  EXPECT_EQ(LayerBackwardTransients(MakeActContext(job), false, false)[kBwdFc1InGather], 2 * 8 * 4);
  EXPECT_EQ(LayerAttentionBackwardTransients(MakeActContext(job), false)[kAttnBwdLn1Gather],
            2 * 8 * 4);
  job.peft = model::PeftConfig{};
  job.peft->target_modules = {"linear_qkv"};
  EXPECT_EQ(LayerBackwardTransients(MakeActContext(job), false, false)[kBwdFc1InGather], 0);
  EXPECT_EQ(LayerAttentionBackwardTransients(MakeActContext(job), false)[kAttnBwdLn1Gather], 0);
  job.peft->sequence_parallel_input_regather = true;
  EXPECT_EQ(LayerBackwardTransients(MakeActContext(job), false, false)[kBwdFc1InGather],
            0);  // no fc1 adapter
  EXPECT_EQ(LayerAttentionBackwardTransients(MakeActContext(job), false)[kAttnBwdLn1Gather],
            2 * 8 * 4);
}

// Without gradient_accumulation_fusion the fc1 backward returns the weight gradient as a
// new tensor (TE linear backward); a grouped-GEMM MoE layer returns every local expert's.
TEST(ActivationsTest, Fc1WeightGradientIsATransientOnlyWithoutTheFusion) {
  auto job = TinyJob();  // h = 8, ffn 16 gated, bf16
  job.model.tensor_model_parallel_size = 2;
  EXPECT_EQ(LayerBackwardTransients(MakeActContext(job), false, false)[kBwdFc1Wgrad], 0);
  job.model.gradient_accumulation_fusion = false;
  // [2 x 16 / TP, 8] in bf16.
  EXPECT_EQ(LayerBackwardTransients(MakeActContext(job), false, false)[kBwdFc1Wgrad],
            2 * 2 * 8 * 8);
  job.model.num_moe_experts = 8;
  job.model.moe_ffn_hidden_size = 4;
  job.model.expert_model_parallel_size = 2;
  job.model.expert_tensor_parallel_size = 1;
  // SequentialMLP: one expert's [2 x 4, 8] at a time; grouped GEMM: all 4 local experts'.
  EXPECT_EQ(LayerBackwardTransients(MakeActContext(job), true, false)[kBwdFc1Wgrad], 2 * 2 * 4 * 8);
  job.model.moe_grouped_gemm = true;
  EXPECT_EQ(LayerBackwardTransients(MakeActContext(job), true, false)[kBwdFc1Wgrad],
            4 * 2 * 2 * 4 * 8);
  job.peft = model::PeftConfig{};  // frozen base: no weight gradient
  EXPECT_EQ(LayerBackwardTransients(MakeActContext(job), false, false)[kBwdFc1Wgrad], 0);
}

}  // namespace
}  // namespace memtune::tensors
