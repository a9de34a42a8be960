// PYTORCH_CUDA_ALLOC_CONF parsing: syntax, defaults, limits and PyTorch's error texts,
// per parser family (2.1-2.8 legacy lexer, 2.9+ AcceleratorAllocatorConfig).
#include "memtune/alloc/config.h"

#include <gtest/gtest.h>

namespace memtune::alloc {
namespace {

constexpr TorchVersion k24{2, 4};
constexpr TorchVersion k28{2, 8};
constexpr TorchVersion k29{2, 9};
constexpr TorchVersion kMain{2, TorchVersion::kMainMinor};

std::string ErrorOf(std::string_view s, TorchVersion v) {
  auto c = ParseAllocatorConfig(s, v);
  return c ? "<ok>" : c.error().message;
}

TEST(ConfigTest, Defaults) {
  auto c = ParseAllocatorConfig("", k24);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->max_split_size_bytes, kUnlimitedBytes);
  EXPECT_FALSE(c->HasMaxSplitSize());
  EXPECT_EQ(c->max_non_split_rounding_bytes, 20 * kMiB);
  EXPECT_EQ(c->garbage_collection_threshold, 0.0);
  EXPECT_FALSE(c->expandable_segments);
  for (auto d : c->roundup_power2_divisions) EXPECT_EQ(d, 0);
  EXPECT_TRUE(c->not_simulated.empty());
}

TEST(ConfigTest, ParsesCommonOptions) {
  auto c = ParseAllocatorConfig(
      "expandable_segments:True, max_split_size_mb:128,garbage_collection_threshold:0.8", k24);
  ASSERT_TRUE(c.has_value()) << c.error().Describe();
  EXPECT_TRUE(c->expandable_segments);
  EXPECT_EQ(c->max_split_size_bytes, 128 * kMiB);
  EXPECT_DOUBLE_EQ(c->garbage_collection_threshold, 0.8);
  EXPECT_EQ(c->settings,
            "expandable_segments:True, max_split_size_mb:128,garbage_collection_threshold:0.8");
}

TEST(ConfigTest, MaxSplitSizeBoundChangedIn29) {
  EXPECT_EQ(ErrorOf("max_split_size_mb:20", k28),
            "CachingAllocator option max_split_size_mb too small, must be > 20");
  EXPECT_EQ(ErrorOf("max_split_size_mb:21", k28), "<ok>");
  EXPECT_EQ(ErrorOf("max_split_size_mb:19", k29),
            "CachingAllocator option max_split_size_mb too small, must be >= 20");
  EXPECT_EQ(ErrorOf("max_split_size_mb:20", k29), "<ok>");
}

TEST(ConfigTest, GcThresholdTexts) {
  EXPECT_EQ(ErrorOf("garbage_collection_threshold:0", k24),
            "garbage_collect_threshold too small, set it 0.0~1.0");
  EXPECT_EQ(ErrorOf("garbage_collection_threshold:1.0", k24),
            "garbage_collect_threshold too big, set it 0.0~1.0");
  EXPECT_EQ(ErrorOf("garbage_collection_threshold:1.5", k29),
            "garbage_collect_threshold is invalid, set it in (0.0, 1.0)");
}

TEST(ConfigTest, BooleansAreCaseSensitive) {
  EXPECT_EQ(ErrorOf("expandable_segments:true", k24),
            "Expected a single True/False argument for expandable_segments");
  EXPECT_EQ(ErrorOf("expandable_segments:true", k29),
            "Expected 'True' or 'False' at index 2 in ConfigTokenizer but got 'true'");
}

TEST(ConfigTest, UnknownKeys) {
  auto c = ParseAllocatorConfig("max_split_sise_mb:100", k24);
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error().message, "Unrecognized CachingAllocator option: max_split_sise_mb");
  EXPECT_EQ(c.error().field, "max_split_sise_mb");
  EXPECT_EQ(ErrorOf("foo:1", k29), "Unrecognized key 'foo' in CUDA allocator config.");
  // Options newer than the version are unknown to it.
  EXPECT_EQ(ErrorOf("max_non_split_rounding_mb:40", k24),
            "Unrecognized CachingAllocator option: max_non_split_rounding_mb");
  EXPECT_EQ(ErrorOf("large_segment_size_mb:40", k29),
            "Unrecognized key 'large_segment_size_mb' in CUDA allocator config.");
}

TEST(ConfigTest, SeparatorErrorsOnlyInLegacyParser) {
  EXPECT_EQ(ErrorOf("expandable_segments:True;max_split_size_mb:200", k24),
            "Expected a single True/False argument for expandable_segments");
  EXPECT_EQ(ErrorOf("max_split_size_mb:200 expandable_segments:True", k24),
            "Error parsing CachingAllocator settings, expected ,");
  // 2.9+ ignores checkToken's result, so a ':' where ',' belongs is accepted...
  auto c = ParseAllocatorConfig("max_split_size_mb:200:expandable_segments:True", k29);
  ASSERT_TRUE(c.has_value()) << c.error().Describe();
  EXPECT_EQ(c->max_split_size_bytes, 200 * kMiB);
  EXPECT_TRUE(c->expandable_segments);
  EXPECT_EQ(ErrorOf("max_split_size_mb:200:expandable_segments:True", k28),
            "Error parsing CachingAllocator settings, expected ,");
  // ...but dropped spaces glue "200expandable_segments" together and "True" becomes a key.
  EXPECT_EQ(ErrorOf("max_split_size_mb:200 expandable_segments:True", k29),
            "Index out of bounds in ConfigTokenizer");
}

TEST(ConfigTest, RoundupErrors) {
  EXPECT_EQ(ErrorOf("roundup_power2_divisions:3", k24),
            "For roundups, the divisons has to be power of 2");
  EXPECT_EQ(ErrorOf("roundup_power2_divisions:3", k29),
            "For roundups, the divisions has to be power of 2");
  EXPECT_EQ(ErrorOf("roundup_power2_divisions:[64:3]", k28),
            "For roundups, the divisions has to be power of 2 or 0 to disable roundup");
  EXPECT_EQ(ErrorOf("roundup_power2_divisions:[64:0]", k24), "<ok>");
  EXPECT_EQ(ErrorOf("roundup_power2_divisions:[64:0]", {2, 2}),
            "For roundups, the divisons has to be power of 2");
  EXPECT_EQ(ErrorOf("roundup_power2_divisions:[48:4]", k29),
            "For roundups, the intervals have to be power of 2");
}

TEST(ConfigTest, NotSimulatedOptionsAreReported) {
  auto c = ParseAllocatorConfig(
      "backend:cudaMallocAsync,release_lock_on_cudamalloc:True,"
      "pinned_num_register_threads:8",
      k24);
  ASSERT_TRUE(c.has_value()) << c.error().Describe();
  ASSERT_EQ(c->not_simulated.size(), 3u);
  EXPECT_EQ(
      c->not_simulated[0],
      "backend:cudaMallocAsync (memtune simulates the native caching allocator; cudaMallocAsync "
      "pools are not modelled)");
  EXPECT_EQ(c->not_simulated[1],
            "release_lock_on_cudamalloc:True (lock handling only; no effect on memory)");
  ASSERT_EQ(c->warnings.size(), 1u);
  EXPECT_EQ(c->warnings[0],
            "backend:cudaMallocAsync ignores max_split_size_mb,roundup_power2_divisions, and "
            "garbage_collect_threshold.");
  EXPECT_EQ(ErrorOf("backend:foo", k24),
            "Unknown allocator backend, options are native and cudaMallocAsync");
  EXPECT_EQ(ErrorOf("pinned_num_register_threads:256", k24),
            "Number of register threads should be less than or equal to 128");
  EXPECT_EQ(ErrorOf("pinned_num_register_threads:3", k29),
            "Number of register threads has to be power of 2, got 3");
}

TEST(ConfigTest, MainOnlyOptions) {
  auto c = ParseAllocatorConfig("large_segment_size_mb:64,max_split_size_mb:128", kMain);
  ASSERT_TRUE(c.has_value()) << c.error().Describe();
  EXPECT_EQ(c->large_segment_size_bytes, 64 * kMiB);
  EXPECT_EQ(c->max_non_split_rounding_bytes, 64 * kMiB);  // its default follows large_segment_size
  EXPECT_EQ(ErrorOf("large_segment_size_mb:10", kMain), "large_segment_size_mb must be > 10 MB");
  EXPECT_EQ(ErrorOf("large_segment_size_mb:64,max_split_size_mb:40", kMain),
            "CachingAllocator option max_split_size_mb too small, must be >= 64");
  auto f = ParseAllocatorConfig("per_process_memory_fraction:0.5", {2, 10});
  ASSERT_TRUE(f.has_value());
  EXPECT_DOUBLE_EQ(*f->per_process_memory_fraction, 0.5);
  EXPECT_EQ(ErrorOf("per_process_memory_fraction:1.5", {2, 10}),
            "per_process_memory_fraction is invalid, set it in [0.0, 1.0]");
}

TEST(ConfigTest, MissingValuesAndBadNumbers) {
  EXPECT_EQ(ErrorOf("max_split_size_mb", k24),
            "Error parsing CachingAllocator settings, expected :");
  EXPECT_EQ(ErrorOf("max_split_size_mb:", k24), "Error, expecting max_split_size_mb value");
  EXPECT_EQ(ErrorOf("max_split_size_mb:", k29), "Index out of bounds in ConfigTokenizer");
  auto c = ParseAllocatorConfig("max_split_size_mb:abc", k24);
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error().message, "'abc' is not a valid number for max_split_size_mb");
  EXPECT_EQ(ErrorOf("roundup_power2_divisions:[64:4", k29),
            "Index out of bounds in ConfigTokenizer");
  EXPECT_EQ(ErrorOf("roundup_power2_divisions:[64:4,", k29),
            "Expected closing bracket ']' in ConfigTokenizer but reached end of config");
}

TEST(VersionTest, ParsesAndOrders) {
  EXPECT_EQ(ParseTorchVersion("2.4", "v")->minor, 4);
  EXPECT_EQ(ParseTorchVersion("2.4.1+cu121", "v")->minor, 4);
  EXPECT_EQ(ParseTorchVersion("v2.10", "v")->minor, 10);
  EXPECT_TRUE(ParseTorchVersion("main", "v")->IsMain());
  EXPECT_LT((TorchVersion{2, 9}), (TorchVersion{2, 10}));
  EXPECT_LT((TorchVersion{2, 10}), kMain);
  EXPECT_EQ(kMain.ToString(), "main");
  auto bad = ParseTorchVersion("2.0", "--torch-version");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code, ErrorCode::kUnsupported);
  EXPECT_EQ(bad.error().message, "PyTorch 2.0 is not modelled");
  EXPECT_EQ(ParseTorchVersion("two", "v").error().message, "'two' is not a PyTorch version");
}

TEST(VersionTest, RulesBoundaries) {
  EXPECT_EQ(RulesFor({2, 1}).oom_template, OomTemplate::kV21);
  EXPECT_EQ(RulesFor({2, 3}).oom_template, OomTemplate::kV22);
  EXPECT_EQ(RulesFor({2, 4}).oom_template, OomTemplate::kV24);
  EXPECT_FALSE(RulesFor({2, 3}).roundup_needs_two_divisions);
  EXPECT_TRUE(RulesFor({2, 4}).roundup_needs_two_divisions);
  EXPECT_FALSE(RulesFor({2, 8}).core_config_parser);
  EXPECT_TRUE(RulesFor({2, 9}).core_config_parser);
  EXPECT_TRUE(RulesFor(kMain).has_large_segment_size);
}

}  // namespace
}  // namespace memtune::alloc
