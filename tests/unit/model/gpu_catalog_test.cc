// The GPU catalog: every entry parses and cites its sources; lookup by name and alias.
#include "memtune/model/gpu_catalog.h"

#include <gtest/gtest.h>

namespace memtune::model {
namespace {

TEST(GpuCatalogTest, HasTheTenEntries) {
  std::vector<std::string> names;
  for (const GpuSpec& gpu : AllGpus()) names.push_back(gpu.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"a100-40gb", "a100-80gb", "h100-sxm-80gb", "h100-nvl", "h200",
                                      "b200", "gb200", "l40s", "rtx-4090", "mi300x"}));
}

TEST(GpuCatalogTest, EveryNumberHasASource) {
  for (const GpuSpec& gpu : AllGpus()) {
    SCOPED_TRACE(gpu.name);
    for (const char* key : {"total_memory_bytes", "cuda_context_bytes", "compute",
                            "hbm_bandwidth_gbps", "interconnect_bandwidth_gbps", "gpus_per_node"}) {
      ASSERT_TRUE(gpu.sources.count(key)) << key;
      EXPECT_FALSE(gpu.sources.at(key).empty()) << key;
    }
    EXPECT_GT(gpu.total_memory_bytes, gpu.cuda_context_bytes);
    EXPECT_GT(gpu.bf16_dense_tflops, 0);
    EXPECT_GT(gpu.hbm_bandwidth_gbps, 0);
    EXPECT_TRUE(gpu.total_memory_basis == "exact" || gpu.total_memory_basis == "torch_mib" ||
                gpu.total_memory_basis == "nvml_mib");
  }
}

TEST(GpuCatalogTest, H100MatchesTheJobFormat) {
  auto gpu = FindGpu("h100-sxm-80gb");
  ASSERT_TRUE(gpu.has_value());
  EXPECT_EQ(gpu->total_memory_bytes, 85'520'809'984);
  EXPECT_EQ(gpu->fp8_dense_tflops, 1978.9);
  EXPECT_EQ(gpu->interconnect_bandwidth_gbps, 900);
  EXPECT_EQ(gpu->gpus_per_node, 8);
}

TEST(GpuCatalogTest, FindsAliasesIgnoringCaseAndSeparators) {
  EXPECT_EQ(FindGpu("H100")->name, "h100-sxm-80gb");
  EXPECT_EQ(FindGpu("NVIDIA H100 80GB HBM3")->name, "h100-sxm-80gb");
  EXPECT_EQ(FindGpu("a100_80gb")->name, "a100-80gb");
  EXPECT_EQ(FindGpu("MI300X")->name, "mi300x");
}

TEST(GpuCatalogTest, FindGpuEntryPointsIntoTheCatalog) {
  const GpuSpec* h100 = nullptr;
  for (const GpuSpec& gpu : AllGpus()) {
    if (gpu.name == "h100-sxm-80gb") h100 = &gpu;
  }
  ASSERT_NE(h100, nullptr);
  EXPECT_EQ(*FindGpuEntry("h100-sxm-80gb"), h100);  // exact name
  EXPECT_EQ(*FindGpuEntry("NVIDIA H100 80GB HBM3"), h100);  // alias, folded
  auto missing = FindGpuEntry("h300");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().Describe(), FindGpu("h300").error().Describe());
}

TEST(GpuCatalogTest, A100HasNoFp8) {
  EXPECT_FALSE(FindGpu("a100-40gb")->fp8_dense_tflops.has_value());
}

TEST(GpuCatalogTest, UnknownGpuSuggests) {
  auto gpu = FindGpu("h300");
  ASSERT_FALSE(gpu.has_value());
  EXPECT_EQ(gpu.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(gpu.error().field, "memtune.gpu");
  EXPECT_EQ(gpu.error().message, "unknown GPU 'h300'");
  EXPECT_EQ(gpu.error().hint,
            "did you mean 'h200'? known GPUs: a100-40gb, a100-80gb, h100-sxm-80gb, h100-nvl, "
            "h200, b200, gb200, l40s, rtx-4090, mi300x");
}

}  // namespace
}  // namespace memtune::model
