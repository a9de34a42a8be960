// The FSDP2 trace: consistent with the estimator, steady, on FSDP2's streams, and the
// order of one block's all-gather and reduce-scatter checked by hand.
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "memtune/estimate/estimate.h"
#include "memtune/synth/synthesize.h"
#include "unit/estimate/test_jobs.h"
#include "unit/synth/synth_test_util.h"

namespace memtune::synth {
namespace {

using estimate::testing::Fsdp2Job;
using testing::Recorder;

Recorder Record(const model::Job& job, int iterations) {
  SynthOptions options;
  options.iterations = iterations;
  auto synth = TraceSynthesizer::Create(job, options);
  EXPECT_TRUE(synth) << synth.error().Describe();
  Recorder rec;
  rec.keep_events = true;
  const TraceSummary summary = synth->Synthesize(0, rec);
  EXPECT_EQ(summary.persistent_bytes, rec.live_bytes);
  EXPECT_EQ(summary.events, static_cast<std::int64_t>(rec.events.size()));
  return rec;
}

class Fsdp2SynthTest : public ::testing::TestWithParam<const char*> {};

TEST_P(Fsdp2SynthTest, TracePeakEqualsTheEstimatorsAndIterationsRepeat) {
  const model::Job job = Fsdp2Job(GetParam());
  Recorder rec = Record(job, 3);
  EXPECT_TRUE(rec.errors.empty()) << rec.errors.front();
  auto e = estimate::EstimateMemory(job);
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ(rec.peak_bytes, e->peak_allocated_bytes) << FormatLabel(rec.peak_label);
  ASSERT_EQ(rec.live_before_iteration.size(), 3u);
  EXPECT_EQ(rec.live_before_iteration[1], rec.live_before_iteration[2]);
  EXPECT_GT(rec.live_before_iteration[1], rec.live_before_iteration[0]);  // AdamW state
}

// Variants whose peaks fall on different moments: the loss backward (long sequence), a
// block's or the root's reduce-scatter, gradient accumulation, TP with loss_parallel, odd
// layer counts under selective_layer. The trace's raw peak must equal the estimate.
TEST(Fsdp2SynthVariantsTest, TracePeakEqualsTheEstimateWhereverThePeakFalls) {
  struct Variant {
    const char* name;
    void (*edit)(model::Job&);
  };
  const Variant variants[] = {
      {"long sequence", [](model::Job& j) { j.model.seq_length = 2048; }},
      {"accumulation", [](model::Job& j) { j.train.global_batch_size = 8; }},
      {"tp2",
       [](model::Job& j) {
         j.model.tensor_model_parallel_size = 2;
         j.memtune.world_size = 4;
       }},
      {"no reshard, no AC",
       [](model::Job& j) {
         j.memtune.fsdp2.reshard_after_forward = false;
         j.memtune.fsdp2.activation_checkpoint = model::Fsdp2Checkpoint::kNone;
       }},
      {"5 layers, selective_layer",
       [](model::Job& j) {
         j.model.num_layers = 5;
         j.memtune.fsdp2.activation_checkpoint = model::Fsdp2Checkpoint::kSelectiveLayer;
       }},
      {"compile, selective_op",
       [](model::Job& j) {
         j.memtune.fsdp2.compile = true;
         j.memtune.fsdp2.activation_checkpoint = model::Fsdp2Checkpoint::kSelectiveOp;
       }},
      {"compiled loss",
       [](model::Job& j) {
         j.memtune.fsdp2.compile = true;
         j.memtune.fsdp2.compile_loss = true;
       }},
      {"compiled loss, long sequence, large vocabulary",
       [](model::Job& j) {
         j.memtune.fsdp2.compile = true;
         j.memtune.fsdp2.compile_loss = true;
         j.model.seq_length = 2048;
         j.model.vocab_size = 4096;
       }},
      {"compiled loss, tp2",
       [](model::Job& j) {
         j.memtune.fsdp2.compile = true;
         j.memtune.fsdp2.compile_loss = true;
         j.model.tensor_model_parallel_size = 2;
         j.memtune.world_size = 4;
       }},
      {"eager loss, large vocabulary", [](model::Job& j) { j.model.vocab_size = 8192; }},
  };
  for (const Variant& v : variants) {
    model::Job job = Fsdp2Job("full");
    v.edit(job);
    Recorder rec = Record(job, 2);
    auto e = estimate::EstimateMemory(job);
    ASSERT_TRUE(e) << v.name << ": " << e.error().message;
    EXPECT_EQ(rec.peak_bytes, e->peak_allocated_bytes)
        << v.name << " at " << FormatLabel(rec.peak_label);
  }
}

TEST(Fsdp2SynthReshardTest, WithoutReshardAfterForwardTheTraceStillMatchesTheEstimator) {
  model::Job job = Fsdp2Job("full");
  job.memtune.fsdp2.reshard_after_forward = false;  // every block stays gathered until its backward
  Recorder rec = Record(job, 2);
  auto e = estimate::EstimateMemory(job);
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ(rec.peak_bytes, e->peak_allocated_bytes) << FormatLabel(rec.peak_label);
  int gathers = 0;
  for (const auto& ev : rec.events) {
    gathers +=
        ev.op == EventOp::kAlloc && std::string_view(ev.label.tensor) == "fsdp.all_gather_output";
  }
  EXPECT_EQ(gathers, 2 * 3);  // root and both blocks, once per iteration
}

INSTANTIATE_TEST_SUITE_P(AcModes, Fsdp2SynthTest,
                         ::testing::Values("none", "selective_op", "selective_layer", "full"));

// qk_layernorm (torchtitan's Qwen3 block): the same equality per AC mode, with the q/k
// norms' tensors in the trace and a higher peak than the Llama block's. A 512-token
// sequence puts the peak in backward, where the block's tensors count (the tiny job's
// default peaks at the optimizer step).
class Fsdp2SynthQkNormTest : public ::testing::TestWithParam<const char*> {};

TEST_P(Fsdp2SynthQkNormTest, TracePeakEqualsTheEstimatorsWithQkLayernorm) {
  model::Job job = Fsdp2Job(GetParam());
  job.model.seq_length = 512;
  job.model.qk_layernorm = true;
  Recorder rec = Record(job, 3);
  EXPECT_TRUE(rec.errors.empty()) << rec.errors.front();
  auto e = estimate::EstimateMemory(job);
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ(rec.peak_bytes, e->peak_allocated_bytes) << FormatLabel(rec.peak_label);
  EXPECT_NE(e->ranks.front().peak_phase, "optimizer step");
  EXPECT_EQ(rec.live_before_iteration[1], rec.live_before_iteration[2]);
  // q_norm's rstd: fp32 per (token, head), 4 * 512 * 4 bytes; one per block forward and
  // one per recompute.
  int rstd = 0;
  for (const auto& ev : rec.events) {
    if (ev.op == EventOp::kAlloc && std::string_view(ev.label.tensor) == "qnorm.rstd") {
      EXPECT_EQ(ev.bytes, 4 * 512 * 4);
      ++rstd;
    }
  }
  EXPECT_GE(rstd, 2 * 3);
  model::Job llama_job = job;
  llama_job.model.qk_layernorm = false;
  Recorder llama = Record(llama_job, 3);
  EXPECT_GT(rec.peak_bytes, llama.peak_bytes);
}

INSTANTIATE_TEST_SUITE_P(AcModes, Fsdp2SynthQkNormTest,
                         ::testing::Values("none", "selective_op", "selective_layer", "full"));

TEST(Fsdp2SynthQkNormVariantsTest, TracePeakEqualsTheEstimateWithQkLayernorm) {
  struct Variant {
    const char* name;
    void (*edit)(model::Job&);
  };
  const Variant variants[] = {
      {"tp2",
       [](model::Job& j) {
         j.model.tensor_model_parallel_size = 2;
         j.memtune.world_size = 4;
       }},
      {"long sequence, no AC",
       [](model::Job& j) {
         j.model.seq_length = 1024;
         j.memtune.fsdp2.activation_checkpoint = model::Fsdp2Checkpoint::kNone;
       }},
      {"accumulation, no reshard",
       [](model::Job& j) {
         j.train.global_batch_size = 8;
         j.memtune.fsdp2.reshard_after_forward = false;
       }},
      {"head_dim wider than hidden / heads",
       [](model::Job& j) { j.model.kv_channels = 32; }},  // q = 128 > h = 64 (Qwen3-0.6B-like)
  };
  for (const Variant& v : variants) {
    model::Job job = Fsdp2Job("full");
    job.model.qk_layernorm = true;
    v.edit(job);
    Recorder rec = Record(job, 2);
    auto e = estimate::EstimateMemory(job);
    ASSERT_TRUE(e) << v.name << ": " << e.error().message;
    EXPECT_EQ(rec.peak_bytes, e->peak_allocated_bytes)
        << v.name << " at " << FormatLabel(rec.peak_label);
  }
}

TEST(Fsdp2SynthCpTest, RingAttentionBuffersAddToTheEstimatorsMoments) {
  // Context parallelism: the trace adds ring attention's all-gathered k/v and fp32
  // accumulators inside a block, which the estimator's moments leave out; never less.
  model::Job job = Fsdp2Job("full");
  job.model.context_parallel_size = 2;
  job.memtune.world_size = 4;
  Recorder rec = Record(job, 2);
  EXPECT_TRUE(rec.errors.empty());
  auto e = estimate::EstimateMemory(job);
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_GE(rec.peak_bytes, e->peak_allocated_bytes);
  bool gathered = false;
  for (const auto& ev : rec.events) {
    if (ev.op == EventOp::kAlloc && std::string_view(ev.label.tensor) == "fwd.ring_kv_all_gather") {
      EXPECT_EQ(ev.bytes, 2 * 4 * 16 * 64);  // cp x (k + v) x 2 bytes x 16 tokens x 64 (repeated)
      gathered = true;
    }
  }
  EXPECT_TRUE(gathered);
}

TEST(Fsdp2SynthStreamsTest, GathersAndGradientShardsLiveOnTheirStreams) {
  Recorder rec = Record(Fsdp2Job("full"), 1);
  int gathers = 0, shards = 0;
  for (const auto& e : rec.events) {
    if (e.op != EventOp::kAlloc) continue;
    const std::string_view t = e.label.tensor;
    if (t == "fsdp.all_gather_output") {
      EXPECT_EQ(e.stream, 1u);
      ++gathers;
    } else if (t == "grad_shard") {
      EXPECT_EQ(e.stream, 2u);
      ++shards;
    } else {
      EXPECT_EQ(e.stream, 0u) << t;
    }
  }
  // Forward: root + 2 blocks; backward: block 0 again (block 1 and the root stay gathered).
  EXPECT_EQ(gathers, 4);
  EXPECT_EQ(shards, 3);  // two blocks and the root
}

TEST(Fsdp2SynthStreamsTest, OneBlockAllGatherThenReduceScatterInOrder) {
  Recorder rec = Record(Fsdp2Job("full"), 1);
  // Block 0's forward unshard: the flat bf16 all-gather output (2 * 2 * 18,496 bytes),
  // nine per-parameter copies, then the flat buffer released.
  std::vector<std::string> first;
  for (const auto& e : rec.events) {
    if (e.label.phase != Phase::kForward || e.label.layer != 0) continue;
    first.push_back((e.op == EventOp::kAlloc ? "alloc " : "free ") + std::string(e.label.tensor) +
                    (e.op == EventOp::kAlloc ? " " + std::to_string(e.bytes) : ""));
    if (first.size() == 11) break;
  }
  ASSERT_EQ(first.size(), 11u);
  EXPECT_EQ(first[0], "alloc fsdp.all_gather_output 73984");
  EXPECT_EQ(first[1], "alloc fsdp.unsharded_param 128");   // attention_norm, 64 bf16
  EXPECT_EQ(first[2], "alloc fsdp.unsharded_param 8192");  // wq 64x64
  EXPECT_EQ(first[10], "free fsdp.all_gather_output");
  // Block 1's backward ends: fp32 reduce-scatter input (4 * 2 * 18,496), the unsharded
  // gradients released, the fp32 shard (4 * 18,496) on the reduce-scatter stream.
  bool seen = false;
  for (std::size_t i = 0; i + 1 < rec.events.size(); ++i) {
    const auto& e = rec.events[i];
    if (e.label.phase == Phase::kBackward && e.label.layer == 1 &&
        std::string_view(e.label.tensor) == "fsdp.reduce_scatter_input") {
      EXPECT_EQ(e.bytes, 147968);
      std::size_t j = i + 1;
      int released = 0;
      while (rec.events[j].op == EventOp::kFree) ++released, ++j;
      EXPECT_EQ(released, 9);
      EXPECT_EQ(std::string_view(rec.events[j].label.tensor), "grad_shard");
      EXPECT_EQ(rec.events[j].bytes, 73984);
      seen = true;
      break;
    }
  }
  EXPECT_TRUE(seen);
}

}  // namespace
}  // namespace memtune::synth
