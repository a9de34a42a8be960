// Which variable supplies which allocator options, per PyTorch release, and the other
// segment mode written back as a settings string.
#include "memtune/alloc/env_config.h"

#include <gtest/gtest.h>

namespace memtune::alloc {
namespace {

using Env = std::map<std::string, std::string>;
constexpr TorchVersion k24{2, 4};
constexpr TorchVersion k29{2, 9};

TEST(AllocatorConfigFromEnvTest, NothingSetGivesDefaults) {
  auto r = AllocatorConfigFromEnv({}, k29);
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(r->config.expandable_segments);
  EXPECT_EQ(r->source_var, "");
  EXPECT_EQ(r->config.settings, "");
}

TEST(AllocatorConfigFromEnvTest, BeforeTwoNineOnlyTheCudaVariableIsRead) {
  const Env env{{"PYTORCH_ALLOC_CONF", "expandable_segments:True"}};
  auto old = AllocatorConfigFromEnv(env, k24);
  ASSERT_TRUE(old.has_value());
  EXPECT_FALSE(old->config.expandable_segments);
  EXPECT_EQ(old->source_var, "");
  auto now = AllocatorConfigFromEnv(env, k29);
  ASSERT_TRUE(now.has_value());
  EXPECT_TRUE(now->config.expandable_segments);
  EXPECT_EQ(now->source_var, "PYTORCH_ALLOC_CONF");
}

TEST(AllocatorConfigFromEnvTest, GenericOptionsPreferAllocConfCudaOptionsPreferCudaAllocConf) {
  const Env env{{"PYTORCH_ALLOC_CONF", "expandable_segments:True"},
                {"PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:128,backend:cudaMallocAsync"}};
  auto r = AllocatorConfigFromEnv(env, k29);
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->config.expandable_segments);
  EXPECT_FALSE(r->config.HasMaxSplitSize());  // from PYTORCH_ALLOC_CONF, which does not set it
  EXPECT_EQ(r->config.backend, Backend::kCudaMallocAsync);
  EXPECT_EQ(r->source_var, "PYTORCH_ALLOC_CONF");
  EXPECT_EQ(r->cuda_source_var, "PYTORCH_CUDA_ALLOC_CONF");
  auto old = AllocatorConfigFromEnv(env, k24);  // 2.4 reads the CUDA variable alone
  ASSERT_TRUE(old.has_value());
  EXPECT_FALSE(old->config.expandable_segments);
  EXPECT_TRUE(old->config.HasMaxSplitSize());
}

TEST(AllocatorConfigFromEnvTest, ErrorsNameTheVariable) {
  auto r = AllocatorConfigFromEnv({{"PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:true"}}, k29,
                                  "memtune.env.");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidConfig);
  EXPECT_EQ(r.error().field.rfind("memtune.env.PYTORCH_CUDA_ALLOC_CONF (", 0), 0u)
      << r.error().field;
}

TEST(WithExpandableSegmentsTest, AppendsOrRewritesInPlace) {
  auto base = ParseAllocatorConfig("max_split_size_mb:128", k29);
  ASSERT_TRUE(base.has_value());
  const AllocatorConfig on = WithExpandableSegments(*base, true);
  EXPECT_TRUE(on.expandable_segments);
  EXPECT_EQ(on.settings, "max_split_size_mb:128,expandable_segments:True");
  const AllocatorConfig off = WithExpandableSegments(on, false);
  EXPECT_EQ(off.settings, "max_split_size_mb:128,expandable_segments:False");
  EXPECT_EQ(WithExpandableSegments(AllocatorConfig{}, true).settings, "expandable_segments:True");
  // The rewritten string parses to the same mode (one interpretation).
  for (const AllocatorConfig* c : {&on, &off}) {
    auto again = ParseAllocatorConfig(c->settings, k29);
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(again->expandable_segments, c->expandable_segments);
    EXPECT_EQ(again->max_split_size_bytes, base->max_split_size_bytes);
  }
}

}  // namespace
}  // namespace memtune::alloc
