// memtune.versions switches in the synthesized step: each adds or removes its tensors in
// the trace as in the estimate (docs/versions.md).
#include <gtest/gtest.h>

#include <string>
#include <unordered_map>

#include "memtune/estimate/estimate.h"
#include "memtune/synth/synthesize.h"
#include "unit/estimate/test_jobs.h"
#include "unit/synth/synth_test_util.h"

namespace memtune::synth {
namespace {

using estimate::testing::Llama70BJob;
using testing::Recorder;

Recorder RecordRank(const model::Job& job, int rank) {
  auto synth = TraceSynthesizer::Create(job);
  EXPECT_TRUE(synth) << synth.error().Describe();
  Recorder rec;
  rec.keep_events = true;
  synth->Synthesize(rank, rec);
  EXPECT_TRUE(rec.errors.empty()) << rec.errors.front();
  return rec;
}

// The largest allocation of `tensor` in the trace, and the sum over its allocations.
struct TensorBytes {
  std::int64_t largest = 0, total = 0;
};
TensorBytes Bytes(const Recorder& rec, const std::string& tensor) {
  TensorBytes b;
  for (const SynthEvent& e : rec.events) {
    if (e.op != EventOp::kAlloc || tensor != e.label.tensor) continue;
    b.largest = std::max(b.largest, e.bytes);
    b.total += e.bytes;
  }
  return b;
}

std::int64_t Component(const estimate::RankEstimate& r, const std::string& name) {
  for (const auto& c : r.components) {
    if (c.name == name) return c.bytes;
  }
  return 0;
}

// TE < 2.3: no cached placeholders; every linear's backward returns a new weight-sized
// tensor instead (the fc1 one is the largest of a layer), and before Megatron-Core 0.14 the
// output layer does the same. The trace's peak of a middle stage (a layer backward) still
// equals the estimator's.
TEST(VersionsSynthTest, TransformerEngineBefore23HasNoCachedWgradPlaceholders) {
  struct Case {
    const char* te;
    const char* mcore;
    bool layer_cached, output_cached;
  };
  for (const Case& c : {Case{"", "", true, true}, Case{"2.2", "", false, false},
                        Case{"2.3", "0.13", true, false}, Case{"2.3", "0.14", true, true}}) {
    auto job = Llama70BJob();
    job.model.tensor_model_parallel_size = 4;
    job.memtune.versions.transformer_engine = c.te;
    job.memtune.versions.megatron_core = c.mcore;
    auto e = estimate::EstimateMemory(job);
    ASSERT_TRUE(e) << e.error().Describe();
    const int last = static_cast<int>(e->ranks.size()) - 1;
    const Recorder rec = RecordRank(job, last);
    const std::int64_t layer_shapes =
        2 * (2560LL * 8192 + 8192LL * 2048 + 14336LL * 8192 + 8192LL * 7168);
    const std::int64_t output_shape = 2 * 32128LL * 8192;
    const std::int64_t dummies =
        (c.layer_cached ? layer_shapes : 0) + (c.output_cached ? output_shape : 0);
    const std::string at = std::string("te ") + c.te + " mcore " + c.mcore;
    EXPECT_EQ(Bytes(rec, "ws.dummy_wgrad").total, dummies) << at;
    EXPECT_EQ(Component(e->ranks[last], "ws.dummy_wgrad"), dummies) << at;
    EXPECT_EQ(Bytes(rec, "bwd.fc1_wgrad").largest, c.layer_cached ? 0 : 2 * 14336LL * 8192) << at;
    EXPECT_EQ(Bytes(rec, "bwd.output_wgrad").largest, c.output_cached ? 0 : output_shape) << at;
    EXPECT_EQ(RecordRank(job, 1).peak_bytes, e->ranks[1].allocated_bytes) << at;
  }
}

// Megatron-Core < 0.13 keeps the expert outputs for the weighted un-permute: one
// act.moe_combine per MoE layer and micro-batch in flight, in the trace as in the estimate.
TEST(VersionsSynthTest, MoeCombineFollowsMegatronCoreVersion) {
  auto job = estimate::testing::MoeLlama70BJob();
  std::int64_t peaks[2] = {0, 0};
  for (int old = 0; old < 2; ++old) {
    job.memtune.versions.megatron_core = old ? "0.12" : "";
    auto e = estimate::EstimateMemory(job);
    ASSERT_TRUE(e) << e.error().Describe();
    const Recorder rec = RecordRank(job, 0);
    EXPECT_EQ(Bytes(rec, "act.moe_combine").largest > 0, old == 1);
    EXPECT_EQ(rec.peak_bytes, e->ranks[0].allocated_bytes) << "mcore " << (old ? "0.12" : "newest");
    peaks[old] = e->ranks[0].backward_peak_bytes;
  }
  EXPECT_GT(peaks[1], peaks[0]);
}

// PyTorch's AdamW temporaries: foreach makes the sqrt of every exp_avg_sq (as many bytes as
// the second moments), for_loop three of the largest parameter shard (the first stage's
// word embedding, [128512 / TP 4, 8192], over the distributed optimizer's DP 2 shards); the
// step's trace peak matches the estimate's.
TEST(VersionsSynthTest, AdamImplementationTemporaries) {
  for (auto impl : {model::OptimizerImpl::kFused, model::OptimizerImpl::kForeach,
                    model::OptimizerImpl::kForLoop}) {
    auto job = Llama70BJob();
    job.memtune.optimizer_implementation = impl;
    auto e = estimate::EstimateMemory(job);
    ASSERT_TRUE(e) << e.error().Describe();
    const Recorder rec = RecordRank(job, 0);
    const TensorBytes work = Bytes(rec, "optimizer.adam_workspace");
    const std::int64_t moments = Bytes(rec, "optimizer.exp_avg_sq").total;  // made once
    ASSERT_GT(moments, 0);
    const int iterations = 2;
    switch (impl) {
      case model::OptimizerImpl::kFused:
        EXPECT_EQ(work.total, 0);
        break;
      case model::OptimizerImpl::kForeach:
        EXPECT_EQ(work.total, iterations * moments);
        break;
      case model::OptimizerImpl::kForLoop:
        ASSERT_EQ(model::DataParallelSize(job), 2);
        EXPECT_EQ(work.largest, 3 * 4 * (32128LL * 8192 / 2));
        break;
    }
    // The trace's peak of the step equals the estimator's step peak.
    std::int64_t live = 0, step_peak = 0;
    std::unordered_map<alloc::HandleId, std::int64_t> sizes;
    for (const SynthEvent& ev : rec.events) {
      if (ev.op == EventOp::kAlloc) {
        sizes[ev.handle] = ev.bytes;
        live += ev.bytes;
      } else {
        live -= sizes[ev.handle];
      }
      if (ev.label.phase == Phase::kOptimizer && ev.label.iteration == 1)
        step_peak = std::max(step_peak, live);
    }
    EXPECT_EQ(step_peak, e->ranks[0].step_peak_bytes) << static_cast<int>(impl);
  }
}

}  // namespace
}  // namespace memtune::synth
