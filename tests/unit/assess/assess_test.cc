// AssessJob: verdicts per allocator mode from the forecast, and advice whose edit does what
// it predicts.
#include "memtune/assess/assess.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "memtune/model/examples.h"
#include "memtune/model/job_parse.h"

namespace memtune::assess {
namespace {

model::Job SeedJob() {
  auto text = model::ExampleJobYaml("llama3-70b-32xh100");
  EXPECT_TRUE(text.has_value());
  auto doc = model::ParseJobText(text ? *text : "");
  EXPECT_TRUE(doc.has_value()) << doc.error().Describe();
  return doc ? doc->job : model::Job{};
}

model::Job TinyJob(std::int64_t gpu_bytes) {
  const std::string text =
      "model: {num_layers: 2, hidden_size: 256, num_attention_heads: 4, ffn_hidden_size: 1024, "
      "vocab_size: "
      "1024, seq_length: 512}\ntrain: {micro_batch_size: 2, global_batch_size: 2}\nmemtune: "
      "{gpu_memory_bytes: " +
      std::to_string(gpu_bytes) + "}\n";
  auto doc = model::ParseJobText(text);
  EXPECT_TRUE(doc.has_value()) << doc.error().Describe();
  return doc ? doc->job : model::Job{};
}

// The verdict's numbers follow from the forecast: the margin is the smallest over the
// ranks of usable minus the unlimited replay's peak reserved.
void ExpectVerdictFollowsForecast(const Assessment& a, const ModeVerdict& v) {
  ASSERT_TRUE(a.forecast);
  const synth::Forecast& f = *a.forecast;
  std::int64_t smallest = INT64_MAX;
  for (const auto& s : f.stages) {
    const synth::AllocatorRun& run = v.job_config ? s.own : s.other;
    EXPECT_EQ(run.expandable_segments, v.mode == AllocatorMode::kExpandable);
    EXPECT_EQ(s.non_pytorch_bytes, a.non_pytorch[s.pp_rank].TotalBytes());
    smallest = std::min(smallest,
                        f.capacity_bytes - s.non_pytorch_bytes - run.unlimited_peak_reserved_bytes);
  }
  EXPECT_EQ(v.margin_bytes, smallest);
  const synth::AllocatorRun& deciding =
      v.job_config ? f.stages[v.pp_rank].own : f.stages[v.pp_rank].other;
  EXPECT_EQ(v.state == VerdictState::kOom, deciding.oom);
  EXPECT_EQ(v.moment, deciding.oom ? deciding.oom_event : deciding.peak_event);
}

// The seed case fits natively, but fragmentation (what expandable segments win back) costs
// more than the native allocator leaves spare: expandable segments are still the first advice.
TEST(AssessJobTest, SeedCaseFragmentsMoreThanItsNativeSpareSoExpandableComesFirst) {
  auto a = AssessJob(SeedJob());
  ASSERT_TRUE(a.has_value()) << a.error().Describe();
  ASSERT_EQ(a->verdicts.size(), 2u);
  const ModeVerdict& own = a->verdicts[0];
  EXPECT_TRUE(own.job_config);
  EXPECT_EQ(own.mode, AllocatorMode::kNative);
  EXPECT_EQ(own.state, VerdictState::kFits);
  EXPECT_GT(own.margin_bytes, own.uncertainty_bytes);
  const ModeVerdict* expandable = FindVerdict(*a, AllocatorMode::kExpandable);
  ASSERT_NE(expandable, nullptr);
  EXPECT_EQ(expandable->state, VerdictState::kFits);
  EXPECT_EQ(expandable->alloc_conf, "expandable_segments:True");
  EXPECT_GT(expandable->margin_bytes - own.margin_bytes, own.margin_bytes);
  for (const ModeVerdict& v : a->verdicts) ExpectVerdictFollowsForecast(*a, v);

  ASSERT_FALSE(a->advice.empty());
  const Advice& first = a->advice.front();
  EXPECT_EQ(first.id, "allocator.expandable-segments");
  EXPECT_EQ(first.playbook_step, "Quick Decision step 1");
  ASSERT_EQ(first.changes.size(), 1u);
  EXPECT_EQ(first.changes[0].field, "memtune.env.PYTORCH_CUDA_ALLOC_CONF");
  EXPECT_EQ(first.changes[0].value_json, "\"expandable_segments:True\"");
  EXPECT_EQ(first.effect_bytes, expandable->margin_bytes - own.margin_bytes);
  ASSERT_TRUE(a->allocated_fit);
  EXPECT_TRUE(a->allocated_fit->fits);
}

// With VPP 2 the seed case is at risk natively (its spare inside the band) and fits with
// expandable segments.
TEST(AssessJobTest, SeedCaseWithVpp2IsAtRiskNativelyAndFitsWithExpandableSegments) {
  model::Job job = SeedJob();
  job.model.virtual_pipeline_model_parallel_size = 2;
  auto a = AssessJob(job);
  ASSERT_TRUE(a.has_value()) << a.error().Describe();
  ASSERT_EQ(a->verdicts.size(), 2u);
  const ModeVerdict& own = a->verdicts[0];
  EXPECT_EQ(own.state, VerdictState::kAtRisk);
  EXPECT_GT(own.margin_bytes, 0);
  EXPECT_LT(own.margin_bytes, own.uncertainty_bytes);
  const ModeVerdict* expandable = FindVerdict(*a, AllocatorMode::kExpandable);
  ASSERT_NE(expandable, nullptr);
  EXPECT_EQ(expandable->state, VerdictState::kFits);
  ASSERT_FALSE(a->advice.empty());
  EXPECT_EQ(a->advice.front().id, "allocator.expandable-segments");
}

TEST(AssessJobTest, TheAdvisedEditDeliversThePredictedMargin) {
  model::Job job = SeedJob();
  auto before = AssessJob(job);
  ASSERT_TRUE(before.has_value());
  ASSERT_FALSE(before->advice.empty());
  const Advice& advice = before->advice.front();
  // Apply the edit (an env field; its JSON string value without the quotes).
  const std::string& value = advice.changes[0].value_json;
  job.memtune.env[advice.changes[0].field.substr(std::string("memtune.env.").size())] =
      value.substr(1, value.size() - 2);
  auto after = AssessJob(job);
  ASSERT_TRUE(after.has_value());
  ASSERT_EQ(after->verdicts.size(), 2u);
  EXPECT_EQ(after->verdicts[0].mode, AllocatorMode::kExpandable);  // the job's own mode now
  EXPECT_EQ(after->verdicts[0].margin_bytes,
            before->verdicts[0].margin_bytes + advice.effect_bytes);
  EXPECT_TRUE(after->advice.empty());  // nothing left to say about the allocator
}

TEST(AssessJobTest, AJobTooLargeForTheGpuIsOutOfMemoryInBothModes) {
  auto roomy = AssessJob(TinyJob(std::int64_t{80} << 30));
  ASSERT_TRUE(roomy.has_value()) << roomy.error().Describe();
  ASSERT_EQ(roomy->verdicts.size(), 2u);
  EXPECT_EQ(roomy->verdicts[0].state, VerdictState::kFits);
  EXPECT_TRUE(roomy->advice.empty());
  // The same job on a device that holds the CUDA context and barely more.
  const std::int64_t tight = roomy->non_pytorch[0].TotalBytes() + (std::int64_t{8} << 20);
  auto a = AssessJob(TinyJob(tight));
  ASSERT_TRUE(a.has_value()) << a.error().Describe();
  ASSERT_EQ(a->verdicts.size(), 2u);
  for (const ModeVerdict& v : a->verdicts) {
    EXPECT_EQ(v.state, VerdictState::kOom) << AllocatorModeName(v.mode);
    EXPECT_LT(v.margin_bytes, 0);
    EXPECT_FALSE(v.oom_message.empty());
    ExpectVerdictFollowsForecast(*a, v);
  }
  ASSERT_EQ(a->advice.size(), 1u);
  EXPECT_EQ(a->advice[0].id, "memory.reduce-model-or-activations");
  EXPECT_TRUE(a->advice[0].changes.empty());
  EXPECT_FALSE(a->allocated_fit->fits);
}

// The band combines the reserved prediction's and the memory outside PyTorch's uncertainty
// (root sum of squares); a spare inside it is at risk.
TEST(AssessJobTest, AtRiskMeansInsideTheUncertaintyBand) {
  for (const double reserved_uncertainty : {0.0, kDefaultReservedUncertainty}) {
    AssessOptions options;
    options.reserved_uncertainty = reserved_uncertainty;
    auto a = AssessJob(SeedJob(), options);
    ASSERT_TRUE(a.has_value());
    for (const ModeVerdict& v : a->verdicts) {
      ASSERT_NE(v.state, VerdictState::kOom);
      const auto& outside = a->non_pytorch[v.pp_rank];
      const double outside_band = static_cast<double>(outside.HighBytes() - outside.TotalBytes());
      ASSERT_GT(outside_band, 0);
      const synth::StageForecast& s = a->forecast->stages[v.pp_rank];
      const double need = static_cast<double>(v.job_config ? s.own.unlimited_peak_reserved_bytes
                                                           : s.other.unlimited_peak_reserved_bytes);
      const double reserved_band = reserved_uncertainty * need;
      EXPECT_NEAR(static_cast<double>(v.uncertainty_bytes),
                  std::sqrt(outside_band * outside_band + reserved_band * reserved_band), 1.0);
      EXPECT_EQ(v.state == VerdictState::kAtRisk, v.margin_bytes < v.uncertainty_bytes);
    }
  }
}

TEST(AssessJobTest, CompatibilityModesAndNoAllocatorHaveNoVerdict) {
  AssessOptions bridge;
  bridge.estimate.mode = estimate::Mode::kBridge;
  auto a = AssessJob(SeedJob(), bridge);
  ASSERT_TRUE(a.has_value());
  EXPECT_FALSE(a->forecast);
  EXPECT_TRUE(a->verdicts.empty());
  EXPECT_TRUE(a->advice.empty());
  EXPECT_TRUE(a->allocated_fit);
  AssessOptions off;
  off.simulate_allocator = false;
  auto b = AssessJob(SeedJob(), off);
  ASSERT_TRUE(b.has_value());
  EXPECT_FALSE(b->forecast);
  EXPECT_TRUE(b->verdicts.empty());
}

TEST(AssessJobTest, OptionsOutOfRangeNameTheField) {
  AssessOptions o;
  o.iterations = 0;
  auto a = AssessJob(SeedJob(), o);
  ASSERT_FALSE(a.has_value());
  EXPECT_EQ(a.error().Describe(), "iterations: 0 is out of range; allowed: 1 to 100");
  o.iterations = 2;
  o.reserved_uncertainty = 1.5;
  auto b = AssessJob(SeedJob(), o);
  ASSERT_FALSE(b.has_value());
  EXPECT_EQ(b.error().field, "reserved_uncertainty");
}

TEST(AssessJobTest, AnAllocatorConfigPyTorchRejectsIsAnError) {
  model::Job job = SeedJob();
  job.memtune.env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:true";
  auto a = AssessJob(job);
  ASSERT_FALSE(a.has_value());
  EXPECT_EQ(a.error().code, ErrorCode::kInvalidConfig);
  EXPECT_EQ(a.error().field.rfind("memtune.env.PYTORCH_CUDA_ALLOC_CONF", 0), 0u) << a.error().field;
}

}  // namespace
}  // namespace memtune::assess
