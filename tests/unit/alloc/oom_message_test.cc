// PyTorch's OOM message, byte for byte, per release template (allocator.md section 6).
#include "memtune/alloc/oom_message.h"

#include <gtest/gtest.h>

#include "sim_test_util.h"

namespace memtune::alloc {
namespace {

TEST(FormatSizeTest, Boundaries) {
  EXPECT_EQ(FormatSize(0), "0 bytes");
  EXPECT_EQ(FormatSize(1024), "1024 bytes");
  EXPECT_EQ(FormatSize(1025), "1.00 KiB");
  EXPECT_EQ(FormatSize(1048576), "1024.00 KiB");
  EXPECT_EQ(FormatSize(1048577), "1.00 MiB");
  EXPECT_EQ(FormatSize(1073741824), "1024.00 MiB");
  EXPECT_EQ(FormatSize(546 * kMiB), "546.00 MiB");
  EXPECT_EQ(FormatSize(15 * kGiB + 790 * kMiB), "15.77 GiB");
}

OomReport Sample() {
  OomReport r;
  r.allocation_bytes = 546 * kMiB;
  r.device_total_bytes = 16 * kGiB;
  r.device_free_bytes = 514 * kMiB;
  r.allocated_bytes = 13 * kGiB;
  r.reserved_bytes = 14 * kGiB;
  r.process_bytes = 15 * kGiB;
  return r;
}

TEST(OomMessageTest, Template24WithAllowedAndPrivatePools) {
  OomReport r = Sample();
  r.allowed_bytes = 12 * kGiB;
  r.private_pool_free_bytes = 46 * kMiB;
  EXPECT_EQ(
      FormatOomMessage(r, {2, 4}),
      "CUDA out of memory. Tried to allocate 546.00 MiB. GPU 0 has a total capacity of 16.00 GiB "
      "of "
      "which 514.00 MiB is free. Including non-PyTorch memory, this process has 15.00 GiB memory "
      "in "
      "use. 12.00 GiB allowed; Of the allocated memory 13.04 GiB is allocated by PyTorch, with "
      "46.00 "
      "MiB allocated in private pools (e.g., CUDA Graphs), and 978.00 MiB is reserved by PyTorch "
      "but "
      "unallocated. If reserved but unallocated memory is large try setting "
      "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation "
      "for Memory Management  "
      "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)");
}

TEST(OomMessageTest, Template22StreamsTheDeviceAsAChar) {
  OomReport r = Sample();
  r.process_bytes.reset();  // no NVML: no process part
  const std::string m = FormatOomMessage(r, {2, 2});
  EXPECT_EQ(
      m, std::string("CUDA out of memory. Tried to allocate 546.00 MiB. GPU ") + '\0' +
             " has a total capacity of 16.00 GiB of which 514.00 MiB is free. Of the allocated "
             "memory 13.00 GiB is allocated by PyTorch, and 1024.00 MiB is reserved by PyTorch but "
             "unallocated. If reserved but unallocated memory is large try setting "
             "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
             "documentation for Memory Management  "
             "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)");
}

TEST(OomMessageTest, Template21HasTheCapactyTypo) {
  OomReport r = Sample();
  r.device = 3;
  EXPECT_EQ(
      FormatOomMessage(r, {2, 1}),
      "CUDA out of memory. Tried to allocate 546.00 MiB. GPU 3 has a total capacty of 16.00 GiB of "
      "which 514.00 MiB is free. Including non-PyTorch memory, this process has 15.00 GiB memory "
      "in "
      "use. Of the allocated memory 13.00 GiB is allocated by PyTorch, and 1024.00 MiB is reserved "
      "by "
      "PyTorch but unallocated. If reserved but unallocated memory is large try setting "
      "max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and "
      "PYTORCH_CUDA_ALLOC_CONF");
}

TEST(OomMessageTest, SimulatorReportsSegmentSizeAndPostReleaseState) {
  // A 3 MiB request that cannot get its 20 MiB segment reports "20.00 MiB".
  Simulator s = testing::MakeSim("", 30 * kMiB, {2, 4});
  testing::MustAlloc(s, 0, 15 * kMiB);  // 16 MiB segment, unsplit (rest 0.5 MiB)
  EXPECT_EQ(s.Alloc(1, 3 * kMiB).status, AllocStatus::kOutOfMemory);
  ASSERT_TRUE(s.last_oom().has_value());
  EXPECT_EQ(s.last_oom()->rounded_bytes, 3 * kMiB);
  EXPECT_EQ(s.last_oom()->allocation_bytes, 20 * kMiB);
  EXPECT_EQ(
      s.LastOomMessage(),
      "CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 30.00 MiB of "
      "which 14.00 MiB is free. Including non-PyTorch memory, this process has 16.00 MiB memory in "
      "use. Of the allocated memory 16.00 MiB is allocated by PyTorch, and 0 bytes is reserved by "
      "PyTorch but unallocated. If reserved but unallocated memory is large try setting "
      "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation "
      "for Memory Management  "
      "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)");
}

}  // namespace
}  // namespace memtune::alloc
