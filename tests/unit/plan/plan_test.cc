// The planner (memtune/plan/plan.h) on the seed example.
#include "memtune/plan/plan.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "memtune/model/examples.h"
#include "memtune/model/job_parse.h"

namespace memtune::plan {
namespace {

model::Job Example() {
  auto text = model::ExampleJobYaml("llama3-70b-32xh100");
  EXPECT_TRUE(text.has_value());
  auto doc = model::ParseJobText(*text);
  EXPECT_TRUE(doc.has_value());
  return doc->job;
}

const Candidate* WithPlaybook(const Plan& plan, const std::string& label) {
  for (const Candidate& c : plan.candidates) {
    if (c.playbook == label) return &c;
  }
  return nullptr;
}

int IndexOf(const Plan& plan, const Candidate* c) {
  return static_cast<int>(c - plan.candidates.data());
}

TEST(PlanTest, SeedPutsExpandableSegmentsFirstAndTp8BelowPp8) {
  auto plan = PlanJob(Example());
  ASSERT_TRUE(plan.has_value()) << plan.error().Describe();
  ASSERT_FALSE(plan->candidates.empty());
  const Candidate& first = plan->candidates.front();
  ASSERT_EQ(first.changes.size(), 1u);
  EXPECT_EQ(first.changes[0].field, "memtune.env.PYTORCH_CUDA_ALLOC_CONF");
  EXPECT_EQ(first.changes[0].value_json, "\"expandable_segments:True\"");
  EXPECT_DOUBLE_EQ(first.relative_throughput, 1.0);
  const Candidate* tp = WithPlaybook(*plan, "more TP (DP halves)");
  const Candidate* pp = WithPlaybook(*plan, "more PP (DP halves)");
  ASSERT_NE(tp, nullptr);
  ASSERT_NE(pp, nullptr);
  EXPECT_LT(tp->relative_throughput, pp->relative_throughput);
  EXPECT_LT(pp->relative_throughput, 1.0);
  EXPECT_GT(IndexOf(*plan, tp), IndexOf(*plan, pp));
  for (std::size_t i = 2; i < plan->candidates.size(); ++i) {
    EXPECT_GE(plan->candidates[i - 1].relative_throughput + 5e-4,
              plan->candidates[i].relative_throughput);
  }
  EXPECT_GT(plan->searched, 1000);
  EXPECT_LE(plan->simulated, 24 + 16);
}

TEST(PlanTest, KeptFieldsDoNotChange) {
  PlanOptions options;
  options.keep = {"model.tensor_model_parallel_size", "model.pipeline_model_parallel_size"};
  auto plan = PlanJob(Example(), options);
  ASSERT_TRUE(plan.has_value());
  for (const Candidate& c : plan->candidates) {
    EXPECT_EQ(c.job.model.tensor_model_parallel_size, 4);
    EXPECT_EQ(c.job.model.pipeline_model_parallel_size, 4);
  }
}

TEST(PlanTest, UnknownKeepFieldIsAnError) {
  PlanOptions options;
  options.keep = {"model.hidden_size"};
  auto plan = PlanJob(Example(), options);
  ASSERT_FALSE(plan.has_value());
  EXPECT_EQ(plan.error().field, "--keep");
  EXPECT_NE(plan.error().hint.find("model.tensor_model_parallel_size"), std::string::npos);
}

TEST(PlanTest, ZeroGpusIsAnError) {
  PlanOptions options;
  options.gpus = 0;
  auto plan = PlanJob(Example(), options);
  ASSERT_FALSE(plan.has_value());
  EXPECT_EQ(plan.error().field, "--gpus");
}

TEST(PlanTest, TooFewGpusNamesTheSmallestCountThatFits) {
  PlanOptions options;
  options.gpus = 8;
  options.limit = 2;
  auto plan = PlanJob(Example(), options);
  ASSERT_TRUE(plan.has_value()) << plan.error().Describe();
  EXPECT_NE(plan->nothing_fits.find("nothing fits on 8 GPUs"), std::string::npos);
  EXPECT_GT(plan->gpus, 8);
  ASSERT_FALSE(plan->candidates.empty());
  EXPECT_EQ(plan->candidates.front().job.memtune.world_size, plan->gpus);
}

}  // namespace
}  // namespace memtune::plan
