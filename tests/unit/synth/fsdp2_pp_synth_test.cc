// FSDP2 with pipeline parallelism: every stage's synthesized trace peaks where the
// estimator's stage walk says, over both schedules, the checkpoint modes and the dtypes
// that change the gradient accumulators; and the schedule, split and accumulators are
// checked by hand.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "memtune/estimate/estimate.h"
#include "memtune/synth/synthesize.h"
#include "tensors/fsdp2_tensors.h"
#include "unit/estimate/test_jobs.h"
#include "unit/synth/synth_test_util.h"

namespace memtune::synth {
namespace {

using estimate::testing::Fsdp2Job;
using testing::Recorder;

// Six blocks on two stages (torchtitan's split: 3 + 3), shard degree 2, four micro-batches.
model::Job PipelinedJob(std::string_view ac = "none") {
  model::Job job = Fsdp2Job(ac);
  job.model.num_layers = 6;
  job.model.pipeline_model_parallel_size = 2;
  job.memtune.world_size = 4;
  job.train.global_batch_size = 8;
  job.memtune.fsdp2.reshard_after_forward = false;  // torchtitan's default under PP
  return job;
}

Recorder Record(const model::Job& job, int stage) {
  SynthOptions options;
  options.iterations = 2;
  auto synth = TraceSynthesizer::Create(job, options);
  EXPECT_TRUE(synth) << synth.error().Describe();
  Recorder rec;
  rec.keep_events = true;
  if (!synth) return rec;
  EXPECT_EQ(synth->num_stages(), job.model.pipeline_model_parallel_size);
  const TraceSummary summary = synth->Synthesize(stage, rec);
  EXPECT_EQ(summary.persistent_bytes, rec.live_bytes);
  return rec;
}

// Each rank's trace peak equals its estimate to the byte, wherever it falls (a backward,
// an accumulator conversion, a reduce, a forward on a rank caching many micro-batches).
void ExpectStagesMatch(const model::Job& job, const std::string& what) {
  auto e = estimate::EstimateMemory(job);
  ASSERT_TRUE(e) << what << ": " << e.error().Describe();
  ASSERT_EQ(static_cast<int>(e->ranks.size()), job.model.pipeline_model_parallel_size);
  std::int64_t highest = 0;
  for (int s = 0; s < job.model.pipeline_model_parallel_size; ++s) {
    Recorder rec = Record(job, s);
    EXPECT_TRUE(rec.errors.empty()) << what << ": " << rec.errors.front();
    EXPECT_EQ(rec.peak_bytes, e->ranks[s].allocated_bytes)
        << what << ", rank " << s << " at " << FormatLabel(rec.peak_label)
        << " (estimate: " << e->ranks[s].peak_phase << ")";
    highest = std::max(highest, rec.peak_bytes);
  }
  EXPECT_EQ(highest, e->peak_allocated_bytes) << what;
}

class Fsdp2PipelineSynthTest : public ::testing::TestWithParam<const char*> {};

TEST_P(Fsdp2PipelineSynthTest, EveryStagePeaksWhereTheEstimatorSays) {
  for (auto schedule :
       {model::Fsdp2PipelineSchedule::k1F1B, model::Fsdp2PipelineSchedule::kGPipe}) {
    model::Job job = PipelinedJob(GetParam());
    job.memtune.fsdp2.pipeline_schedule = schedule;
    ExpectStagesMatch(job, std::string(GetParam()) + " " + model::NameOf(schedule));
  }
}

INSTANTIATE_TEST_SUITE_P(AcModes, Fsdp2PipelineSynthTest,
                         ::testing::Values("none", "selective_op", "selective_layer", "full"));

TEST(Fsdp2PipelineSynthVariantsTest, TheStagesMatchWhereverThePeakFalls) {
  struct Variant {
    const char* name;
    void (*edit)(model::Job&);
  };
  const Variant variants[] = {
      {"long sequence", [](model::Job& j) { j.model.seq_length = 256; }},
      {"large vocabulary", [](model::Job& j) { j.model.vocab_size = 8192; }},
      {"tp2",
       [](model::Job& j) {
         j.model.tensor_model_parallel_size = 2;
         j.memtune.world_size = 8;
       }},
      {"three stages",
       [](model::Job& j) {
         j.model.pipeline_model_parallel_size = 3;
         j.model.num_layers = 7;
         j.memtune.world_size = 6;
         j.train.global_batch_size = 12;
       }},
      {"bf16 reduce", [](model::Job& j) { j.memtune.fsdp2.reduce_dtype = model::Dtype::kBf16; }},
      {"stages without blocks",  // 2 + 2 effective layers on 4 stages: 0 / 1 / 1 / 0 blocks
       [](model::Job& j) {
         j.model.num_layers = 2;
         j.model.pipeline_model_parallel_size = 4;
         j.memtune.world_size = 8;
         j.train.global_batch_size = 16;
       }},
      {"compiled",
       [](model::Job& j) {
         j.memtune.fsdp2.compile = true;
         j.memtune.fsdp2.compile_loss = true;
         j.memtune.fsdp2.activation_checkpoint = model::Fsdp2Checkpoint::kFull;
       }},
      {"as many micro-batches as stages", [](model::Job& j) { j.train.global_batch_size = 4; }},
  };
  for (const auto& v : variants) {
    for (auto schedule : {model::Fsdp2PipelineSchedule::k1F1B, model::Fsdp2PipelineSchedule::kGPipe,
                          model::Fsdp2PipelineSchedule::kInterleaved1F1B}) {
      model::Job job = PipelinedJob("selective_layer");
      job.memtune.fsdp2.pipeline_schedule = schedule;
      if (schedule == model::Fsdp2PipelineSchedule::kInterleaved1F1B) {
        if (std::string_view(v.name) == "stages without blocks") continue;  // 8 stages, 2 layers
        job.model.virtual_pipeline_model_parallel_size = 2;
      }
      v.edit(job);
      auto check = tensors::MakeFsdp2Facts(job);
      if (!check) {
        ADD_FAILURE() << v.name << ": " << check.error().Describe();
        continue;
      }
      ExpectStagesMatch(job, std::string(v.name) + " " + model::NameOf(schedule));
    }
  }
}

TEST(Fsdp2PipelineFactsTest, TorchtitansSplitAndTheScheduleOrder) {
  // generate_llm_fqn_per_model_part: 32 layers + 2 on 4 stages: 8 (+embedding) / 9 / 8 / 7
  // (+norm, output), torchtitan's own docstring example.
  auto split = tensors::Fsdp2StageLayers(32, 4);
  ASSERT_TRUE(split);
  EXPECT_EQ(*split, (std::vector<int>{8, 9, 8, 7}));
  EXPECT_EQ(*tensors::Fsdp2StageLayers(2, 4), (std::vector<int>{0, 1, 1, 0}));
  EXPECT_FALSE(tensors::Fsdp2StageLayers(1, 4));  // 3 effective layers for 4 stages
  model::Job job = PipelinedJob();
  auto first = tensors::MakeFsdp2Facts(job, 0);
  auto last = tensors::MakeFsdp2Facts(job, 1);
  ASSERT_TRUE(first && last);
  EXPECT_EQ(first->layers, 3);
  EXPECT_EQ(last->first_layer, 3);
  EXPECT_TRUE(first->has_embedding && !first->has_head);
  EXPECT_TRUE(last->has_head && !last->has_embedding);
  ASSERT_EQ(first->root_params.size(), 1u);
  EXPECT_EQ(std::string_view(first->root_params[0].name), "tok_embeddings.weight");
  EXPECT_EQ(last->root_params.size(), 2u);
  EXPECT_EQ(first->accumulate_bytes, 4);  // bf16 compute, fp32 reduce
  // Schedule1F1B: stage 0 of 2 runs 2 warm-up forwards, the last stage 1.
  using Op = tensors::Fsdp2Facts::Op;
  auto ops = [](std::initializer_list<std::pair<bool, int>> list) {
    std::vector<Op> out;
    for (auto [forward, mb] : list) out.push_back({forward, 0, mb});
    return out;
  };
  EXPECT_EQ(first->RankOrder(), ops({{true, 0},
                                     {true, 1},
                                     {false, 0},
                                     {true, 2},
                                     {false, 1},
                                     {true, 3},
                                     {false, 2},
                                     {false, 3}}));
  EXPECT_EQ(last->RankOrder(), ops({{true, 0},
                                    {false, 0},
                                    {true, 1},
                                    {false, 1},
                                    {true, 2},
                                    {false, 2},
                                    {true, 3},
                                    {false, 3}}));
  // Interleaved1F1B, 2 ranks x 2 stages, 4 micro-batches, rank 0 (by hand from
  // _get_1f1b_rank_ops): warmup_ops = (2 - 1) * 2 + 2 * (2 - 1 - 0) = 4, then a forward and
  // a backward per step, the backward stage reversed.
  job.model.virtual_pipeline_model_parallel_size = 2;
  job.memtune.fsdp2.pipeline_schedule = model::Fsdp2PipelineSchedule::kInterleaved1F1B;
  auto rank0 = tensors::MakeFsdp2Facts(job, 0);
  ASSERT_TRUE(rank0) << rank0.error().Describe();
  EXPECT_EQ(rank0->virtual_stages, 2);
  EXPECT_EQ(rank0->layers, 1);  // 6 + 2 effective layers on 4 stages: 1 / 2 / 2 / 1 blocks
  EXPECT_EQ(rank0->RankOrder(), (std::vector<Op>{{true, 0, 0},
                                                 {true, 0, 1},
                                                 {true, 1, 0},
                                                 {true, 1, 1},
                                                 {true, 0, 2},
                                                 {false, 1, 0},
                                                 {true, 0, 3},
                                                 {false, 1, 1},
                                                 {true, 1, 2},
                                                 {false, 0, 0},
                                                 {true, 1, 3},
                                                 {false, 0, 1},
                                                 {false, 1, 2},
                                                 {false, 1, 3},
                                                 {false, 0, 2},
                                                 {false, 0, 3}}));
  auto stage3 = tensors::MakeFsdp2Facts(job, 3);  // rank 1's second stage: the head
  ASSERT_TRUE(stage3);
  EXPECT_TRUE(stage3->has_head);
  EXPECT_EQ(stage3->Rank(), 1);
  EXPECT_EQ(stage3->LocalStage(), 1);
}

TEST(Fsdp2PipelineFactsTest, WhatThePipelineModelRefuses) {
  model::Job job = PipelinedJob();
  job.memtune.fsdp2.reshard_after_forward = true;
  EXPECT_EQ(tensors::MakeFsdp2Facts(job).error().code, ErrorCode::kUnsupported);
  job = PipelinedJob();
  job.train.global_batch_size = 2;  // one micro-batch for two 1F1B stages
  auto few = tensors::MakeFsdp2Facts(job);
  ASSERT_FALSE(few);
  EXPECT_EQ(few.error().field, "train.global_batch_size");
  job.memtune.fsdp2.pipeline_schedule = model::Fsdp2PipelineSchedule::kGPipe;
  EXPECT_TRUE(tensors::MakeFsdp2Facts(job));
  job = PipelinedJob();
  job.model.share_embeddings_and_output_weights = true;
  EXPECT_EQ(tensors::MakeFsdp2Facts(job).error().code, ErrorCode::kInvalidConfig);
  // Interleaved1F1B: 5 micro-batches on 2 ranks are not a multiple of max(1, 5 / 2) rounds.
  job = PipelinedJob();
  job.model.virtual_pipeline_model_parallel_size = 2;
  job.memtune.fsdp2.pipeline_schedule = model::Fsdp2PipelineSchedule::kInterleaved1F1B;
  job.train.global_batch_size = 10;  // DP 2
  auto rounds = tensors::MakeFsdp2Facts(job);
  ASSERT_FALSE(rounds);
  EXPECT_EQ(rounds.error().field, "train.global_batch_size");
  job.train.global_batch_size = 8;
  EXPECT_TRUE(tensors::MakeFsdp2Facts(job, 3));  // 2 ranks x 2 stages
  EXPECT_EQ(tensors::MakeFsdp2Facts(job, 4).error().code, ErrorCode::kInvalidInput);
}

// The stage keeps every parameter's unsharded fp32 gradient from the first backward to the
// reduce after the last micro-batch: one reduce-scatter per group per step, none before.
TEST(Fsdp2PipelineSynthTest, GradientsAccumulateUntilOneReducePerGroup) {
  model::Job job = PipelinedJob();
  Recorder rec = Record(job, 0);
  int reduces = 0, accumulators = 0, gathers = 0;
  // Per iteration: whether the last micro-batch's backward has started when each reduce
  // comes, and whether any backward event follows a reduce.
  bool reduced_early = false, backward_after_reduce = false;
  int last_backward_iteration = -1, reduced_iteration = -1;
  const int last_mb = static_cast<int>(job.train.global_batch_size / 2) - 1;  // DP 2
  for (const auto& ev : rec.events) {
    const bool backward_op = ev.label.phase == Phase::kBackward && ev.label.microbatch >= 0;
    if (backward_op && ev.label.microbatch == last_mb) last_backward_iteration = ev.label.iteration;
    if (backward_op && reduced_iteration == ev.label.iteration) backward_after_reduce = true;
    if (ev.op != EventOp::kAlloc) continue;
    const std::string_view t = ev.label.tensor;
    if (t == "fsdp.reduce_scatter_input") {
      ++reduces;
      if (last_backward_iteration != ev.label.iteration) reduced_early = true;
      reduced_iteration = ev.label.iteration;
    }
    accumulators += t == "fsdp.accumulated_grad";
    gathers += t == "fsdp.all_gather_output";
  }
  EXPECT_FALSE(reduced_early);
  EXPECT_FALSE(backward_after_reduce);
  EXPECT_EQ(reduces, 2 * 4);  // embedding + 3 blocks, two iterations
  EXPECT_EQ(gathers, 2 * 4);  // gathered once per step (no reshard after forward)
  // Per iteration: 9 block parameters x 3 blocks + the embedding, once (the first backward).
  EXPECT_EQ(accumulators, 2 * (9 * 3 + 1));
}

}  // namespace
}  // namespace memtune::synth
