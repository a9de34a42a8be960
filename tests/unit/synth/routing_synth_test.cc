// Routing imbalance in the synthesized step (tensors/moe_load.h, docs/estimator.md "Routing
// imbalance"): MoE layers' sizes follow each micro-batch's expert load in the trace and in
// the estimate, which walks the schedule; the trace's peak equals the estimate with and
// without it, and the varying sizes cost the native allocator reserved memory that
// expandable segments do not.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "memtune/estimate/estimate.h"
#include "memtune/synth/forecast.h"
#include "memtune/synth/synthesize.h"
#include "unit/estimate/test_jobs.h"
#include "unit/synth/synth_test_util.h"

namespace memtune::synth {
namespace {

using estimate::testing::MoeLlama70BJob;
using testing::Recorder;

// The sizes of one tensor's allocations in iteration `it` of rank 0's trace.
std::multiset<std::int64_t> Sizes(const model::Job& job, const std::string& tensor, int it) {
  auto synth = TraceSynthesizer::Create(job);
  EXPECT_TRUE(synth) << synth.error().Describe();
  Recorder rec;
  rec.keep_events = true;
  synth->Synthesize(0, rec);
  std::multiset<std::int64_t> out;
  for (const SynthEvent& e : rec.events) {
    if (e.op == EventOp::kAlloc && e.label.iteration == it && tensor == e.label.tensor)
      out.insert(e.bytes);
  }
  return out;
}

model::Job ImbalancedJob(double spread) {
  auto job = MoeLlama70BJob();  // PP 2, EP 2 of 8 experts, TP 4 with SP
  job.model.expert_model_parallel_size = 4;
  job.memtune.world_size = 32;
  job.memtune.moe_routing_spread = spread;
  return job;
}

TEST(RoutingSynthTest, TracePeakEqualsTheEstimateWithAndWithoutImbalance) {
  struct Variant {
    const char* name;
    void (*apply)(model::Job&);
  };
  const Variant variants[] = {
      {"1F1B", [](model::Job&) {}},
      {"interleaved", [](model::Job& j) { j.model.virtual_pipeline_model_parallel_size = 2; }},
      {"dense first layer, alltoall",
       [](model::Job& j) {
         j.model.moe_layer_freq = {0, 1, 1, 1, 1, 1, 1, 1};
         j.model.moe_layer_freq_is_list = true;
         j.model.moe_token_dispatcher_type = model::MoeTokenDispatcher::kAlltoall;
         j.model.moe_permute_fusion = true;
       }},
      {"capacity factor", [](model::Job& j) { j.model.moe_expert_capacity_factor = 1.05; }},
      {"deferred output wgrad",
       [](model::Job& j) {
         j.model.defer_embedding_wgrad_compute = true;
         j.model.wgrad_deferral_limit = 3;
       }},
      {"interleaved, groups of 4",
       [](model::Job& j) {
         j.model.virtual_pipeline_model_parallel_size = 2;
         j.model.microbatch_group_size_per_vp_stage = 4;
       }},
      {"no pipeline",
       [](model::Job& j) {
         j.model.pipeline_model_parallel_size = 1;
         j.memtune.world_size = 16;
       }},
  };
  for (const Variant& v : variants) {
    for (double spread : {0.0, 0.2, 0.6}) {
      model::Job job = ImbalancedJob(spread);
      v.apply(job);
      const std::string what = std::string(v.name) + ", spread " + std::to_string(spread);
      auto e = estimate::EstimateMemory(job);
      ASSERT_TRUE(e) << what << ": " << e.error().Describe();
      auto synth = TraceSynthesizer::Create(job);
      ASSERT_TRUE(synth) << what << ": " << synth.error().Describe();
      // (Balanced interleaved schedules use the closed form of rank_components.cc, which
      // counts the token ids of the micro-batches in flight at the first backward; later in
      // the interleaved schedule the first chunk can hold a few more: at most the
      // iteration's micro-batches' 8-byte ids. The walk is exact.)
      const bool closed_form = spread == 0;
      const bool interleaved = job.model.virtual_pipeline_model_parallel_size.value_or(1) > 1;
      for (int r = 0; r < synth->num_stages(); ++r) {
        Recorder rec;
        synth->Synthesize(r, rec);
        EXPECT_TRUE(rec.errors.empty()) << what;
        if (closed_form && interleaved) {
          EXPECT_NEAR(static_cast<double>(rec.peak_bytes),
                      static_cast<double>(e->ranks[r].allocated_bytes),
                      static_cast<double>(job.model.seq_length * 8 * 8))  // 8 micro-batches
              << what << ", rank " << r;
        } else {
          EXPECT_EQ(rec.peak_bytes, e->ranks[r].allocated_bytes) << what << ", rank " << r;
        }
        std::int64_t components = 0;
        for (const auto& c : e->ranks[r].components) components += c.bytes;
        EXPECT_EQ(components, e->ranks[r].allocated_bytes) << what << ", rank " << r;
      }
    }
  }
}

TEST(RoutingSynthTest, ExpertTensorsVaryByMicrobatchAndRepeatEachIteration) {
  const auto balanced = Sizes(ImbalancedJob(0), "act.moe_dispatch", 0);
  ASSERT_FALSE(balanced.empty());
  EXPECT_EQ(std::set<std::int64_t>(balanced.begin(), balanced.end()).size(), 1u);
  const auto spread = Sizes(ImbalancedJob(0.5), "act.moe_dispatch", 0);
  ASSERT_EQ(spread.size(), balanced.size());
  // 4 layers x 8 micro-batches on rank 0: nearly all differ.
  EXPECT_GT(std::set<std::int64_t>(spread.begin(), spread.end()).size(), spread.size() / 2);
  EXPECT_EQ(spread, Sizes(ImbalancedJob(0.5), "act.moe_dispatch", 1))
      << "same routing each iteration";
  // Forced balancing (random logits) is the balanced trace; an explicit spread wins.
  model::Job forced = ImbalancedJob(0);
  forced.memtune.moe_routing_spread.reset();
  forced.model.moe_router_force_load_balancing = true;
  EXPECT_EQ(Sizes(forced, "act.moe_dispatch", 0), balanced);
  forced.memtune.moe_routing_spread = 0.5;
  EXPECT_EQ(Sizes(forced, "act.moe_dispatch", 0), spread);
}

// The reserved-memory consequence: the native allocator's cache keeps blocks cut for one
// micro-batch's sizes that the next one's do not fit; expandable segments map what is
// asked. Over the ranks of nine layouts (EP 2, 4, 8 x PP 1, 2), balanced and at the default
// spread: reserved - allocated at the reserved peak, summed (printed per rank:
// docs/estimator.md "Routing imbalance").
TEST(RoutingSynthTest, ImbalanceCostsTheNativeAllocatorReservedMemory) {
  std::int64_t native[2] = {}, expandable[2] = {};
  for (int ep : {2, 4, 8}) {
    for (int pp : {1, 2}) {
      for (int i = 0; i < 2; ++i) {
        model::Job job = ImbalancedJob(i == 0 ? 0.0 : 0.2);
        job.model.expert_model_parallel_size = ep;
        job.model.pipeline_model_parallel_size = pp;
        job.memtune.world_size = 4 * pp * ep;
        auto f = ForecastJob(job, {});
        ASSERT_TRUE(f) << f.error().Describe();
        for (const StageForecast& s : f->stages) {
          const AllocatorRun& n = s.own.expandable_segments ? s.other : s.own;
          const AllocatorRun& x = s.own.expandable_segments ? s.own : s.other;
          const std::int64_t n_gap = n.peak_reserved_bytes - n.peak_allocated_bytes;
          const std::int64_t x_gap = x.peak_reserved_bytes - x.peak_allocated_bytes;
          native[i] += n_gap;
          expandable[i] += x_gap;
          std::printf(
              "EP %d PP %d rank %d spread %.1f: allocated %.3f GB, reserved - allocated "
              "native %.3f GB, expandable %.3f GB\n",
              ep, pp, s.pp_rank, i == 0 ? 0.0 : 0.2, n.peak_allocated_bytes / 1e9, n_gap / 1e9,
              x_gap / 1e9);
        }
      }
    }
  }
  EXPECT_GT(native[1], native[0] + native[0] / 4) << "native: more unusable cache";
  EXPECT_LT(expandable[1], native[1] / 2) << "expandable segments keep little";
}

}  // namespace
}  // namespace memtune::synth
