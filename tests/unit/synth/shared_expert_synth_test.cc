// Shared-expert tensors in the synthesized step (docs/estimator.md section 4): the gate's
// kept output and the overlap's all-gathered fc1 input appear in the trace as in the
// estimate, with and without each switch.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "memtune/alloc/simulator.h"
#include "memtune/estimate/estimate.h"
#include "memtune/synth/synthesize.h"
#include "unit/estimate/test_jobs.h"
#include "unit/synth/synth_test_util.h"

namespace memtune::synth {
namespace {

using estimate::testing::Llama70BJob;
using estimate::testing::MoeLlama70BJob;
using testing::Recorder;

std::int64_t Largest(const Recorder& rec, const std::string& tensor) {
  std::int64_t largest = 0;
  for (const SynthEvent& e : rec.events) {
    if (e.op == EventOp::kAlloc && tensor == e.label.tensor) largest = std::max(largest, e.bytes);
  }
  return largest;
}

TEST(SharedExpertSynthTest, GateAndOverlapTensorsMatchTheEstimate) {
  auto job = MoeLlama70BJob();  // TP 4 with SP, micro-batch 1
  job.model.moe_shared_expert_intermediate_size = 4096;
  job.model.moe_token_dispatcher_type = model::MoeTokenDispatcher::kAlltoall;  // for the overlap
  ASSERT_TRUE(job.model.sequence_parallel);
  const std::int64_t tokens = job.model.seq_length * job.train.micro_batch_size;
  const std::int64_t h = job.model.hidden_size, tp = job.model.tensor_model_parallel_size;
  for (int gate = 0; gate < 2; ++gate) {
    for (int overlap = 0; overlap < 2; ++overlap) {
      job.model.moe_shared_expert_gate = gate == 1;
      job.model.moe_shared_expert_overlap = overlap == 1;
      const std::string what =
          std::string("gate ") + (gate ? "on" : "off") + ", overlap " + (overlap ? "on" : "off");
      auto e = estimate::EstimateMemory(job);
      ASSERT_TRUE(e) << what << ": " << e.error().Describe();
      auto synth = TraceSynthesizer::Create(job);
      ASSERT_TRUE(synth) << synth.error().Describe();
      Recorder rec;
      rec.keep_events = true;
      synth->Synthesize(0, rec);
      EXPECT_TRUE(rec.errors.empty()) << what;
      // Per token of the sequence shard, in whole bytes: the bf16 output and score over TP.
      EXPECT_EQ(Largest(rec, "act.shared_gate_out"), gate ? 2 * (h + 1) / tp * tokens : 0) << what;
      EXPECT_EQ(Largest(rec, "act.shared_fc1_input"), overlap ? 2 * tokens * h : 0) << what;
      EXPECT_EQ(rec.peak_bytes, e->ranks[0].allocated_bytes) << what;
    }
  }
}

}  // namespace
}  // namespace memtune::synth

namespace memtune::synth {
namespace {

// DoRA's kept sums (act.dora_scaled) are in the trace as in the estimate, and only for DoRA.
TEST(DoraSynthTest, ScaledOutputsMatchTheEstimate) {
  auto job = Llama70BJob();
  job.model.num_layers = 8;
  job.model.pipeline_model_parallel_size = 2;
  job.model.virtual_pipeline_model_parallel_size = std::nullopt;
  job.memtune.world_size = 16;
  job.peft = model::PeftConfig{};
  job.peft->dim = 16;
  job.peft->target_modules = {"linear_qkv", "linear_proj", "linear_fc1", "linear_fc2"};
  for (auto method : {model::PeftMethod::kLora, model::PeftMethod::kDora}) {
    job.peft->method = method;
    auto e = estimate::EstimateMemory(job);
    ASSERT_TRUE(e) << e.error().Describe();
    auto synth = TraceSynthesizer::Create(job);
    ASSERT_TRUE(synth) << synth.error().Describe();
    testing::Recorder rec;
    rec.keep_events = true;
    synth->Synthesize(0, rec);
    EXPECT_TRUE(rec.errors.empty());
    EXPECT_EQ(Largest(rec, "act.dora_scaled") > 0, method == model::PeftMethod::kDora);
    EXPECT_EQ(rec.peak_bytes, e->ranks[0].allocated_bytes);
  }
}

}  // namespace
}  // namespace memtune::synth

namespace memtune::synth {
namespace {

// moe_shared_expert_overlap runs the shared expert on its own stream (MCore
// shared_experts.py SharedExpertMLP.stream): its tensors are allocated there, the rest on
// the default stream. Allocated memory is the same; the caching allocator keeps a pool per
// stream, so the side stream's freed blocks cannot serve the main stream (reserved grows).
TEST(SharedExpertSynthTest, OverlapAllocatesTheSharedExpertOnItsStream) {
  auto job = estimate::testing::MoeLlama70BJob();
  job.model.moe_shared_expert_intermediate_size = 4096;
  job.model.moe_token_dispatcher_type = model::MoeTokenDispatcher::kAlltoall;
  job.model.moe_shared_expert_gate = true;
  std::int64_t reserved[2] = {};
  for (int overlap = 0; overlap < 2; ++overlap) {
    job.model.moe_shared_expert_overlap = overlap == 1;
    auto e = estimate::EstimateMemory(job);
    ASSERT_TRUE(e) << e.error().Describe();
    auto synth = TraceSynthesizer::Create(job);
    ASSERT_TRUE(synth) << synth.error().Describe();
    testing::Recorder rec;
    rec.keep_events = true;
    synth->Synthesize(0, rec);
    EXPECT_EQ(rec.peak_bytes, e->ranks[0].allocated_bytes) << "overlap " << overlap;
    int side = 0, shared = 0;
    for (const SynthEvent& ev : rec.events) {
      if (ev.op != EventOp::kAlloc) continue;
      const std::string t = ev.label.tensor;
      const bool is_shared = t.rfind("act.shared_", 0) == 0;
      shared += is_shared;
      side += ev.stream != 0;
      if (ev.stream != 0) {
        EXPECT_TRUE(is_shared) << t;
      }
      if (is_shared) {
        EXPECT_EQ(ev.stream != 0, overlap == 1) << t;
      }
    }
    EXPECT_GT(shared, 0);
    EXPECT_EQ(side > 0, overlap == 1);
    // The same trace through the allocator with and without its stream ids.
    for (int keep_streams = 0; keep_streams < 2 && overlap == 1; ++keep_streams) {
      alloc::Simulator sim{alloc::SimulatorOptions{}};
      for (const SynthEvent& ev : rec.events) {
        if (ev.op == EventOp::kAlloc) {
          ASSERT_EQ(sim.Alloc(ev.handle, ev.bytes, keep_streams ? ev.stream : 0).status,
                    alloc::AllocStatus::kOk);
        } else {
          sim.Free(ev.handle);
        }
      }
      reserved[keep_streams] = sim.stats().reserved_bytes[0].peak;  // (aggregate)
    }
  }
  std::printf("peak reserved, rank 0: %.3f GB on one stream, %.3f GB with the side stream\n",
              reserved[0] / 1e9, reserved[1] / 1e9);
  EXPECT_GT(reserved[1], reserved[0]) << "the side stream's pool is reserved apart";
}

}  // namespace
}  // namespace memtune::synth
