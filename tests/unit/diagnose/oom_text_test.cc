// OOM messages of every PyTorch release (written here in PyTorch's formats, numbers made up),
// CUDA, NCCL and cuBLAS failures; round trips through memtune's own message writer.
#include "memtune/diagnose/oom_text.h"

#include <gtest/gtest.h>

#include "memtune/alloc/oom_message.h"

namespace memtune::diagnose {
namespace {

constexpr std::int64_t kMiB = 1LL << 20;
constexpr std::int64_t kGiB = 1LL << 30;

std::int64_t Gib(double v) { return static_cast<std::int64_t>(v * kGiB + 0.5); }
std::int64_t Mib(double v) { return static_cast<std::int64_t>(v * kMiB + 0.5); }

OomText Only(const std::string& text) {
  auto all = FindOomMessages(text);
  EXPECT_EQ(all.size(), 1u) << text;
  return all.empty() ? OomText{} : all.front();
}

TEST(OomTextTest, CachedEraBefore15) {
  const OomText m = Only(
      "RuntimeError: CUDA out of memory. Tried to allocate 64.00 MiB (GPU 2; 11.17 GiB total "
      "capacity; 10.01 GiB already allocated; 12.44 MiB free; 10.75 GiB cached)");
  EXPECT_EQ(m.era, OomEra::kCached);
  EXPECT_EQ(m.device, 2);
  EXPECT_EQ(m.requested_bytes, 64 * kMiB);
  EXPECT_EQ(m.total_bytes, Gib(11.17));
  EXPECT_EQ(m.allocated_bytes, Gib(10.01));
  EXPECT_EQ(m.free_bytes, Mib(12.44));
  EXPECT_EQ(m.reserved_bytes, Gib(10.75));
  EXPECT_EQ(m.unallocated_bytes, Gib(10.75) - Gib(10.01));
  EXPECT_EQ(m.number_count(), 5);
}

TEST(OomTextTest, ReservedInTotalEraWithAllowed) {
  const OomText m = Only(
      "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB (GPU 0; "
      "39.59 GiB total capacity; 30.02 GiB already allocated; 1.19 GiB free; 32.00 GiB allowed; "
      "35.80 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try "
      "setting max_split_size_mb to avoid fragmentation.  See documentation for Memory "
      "Management and PYTORCH_CUDA_ALLOC_CONF");
  EXPECT_EQ(m.era, OomEra::kReservedInTotal);
  EXPECT_EQ(m.requested_bytes, Gib(1.5));
  EXPECT_EQ(m.allowed_bytes, 32 * kGiB);
  EXPECT_EQ(m.reserved_bytes, Gib(35.80));
  EXPECT_EQ(m.free_bytes, Gib(1.19));
  EXPECT_EQ(m.alloc_conf_variable, "PYTORCH_CUDA_ALLOC_CONF");
}

alloc::OomReport Report() {
  alloc::OomReport r;
  r.requested_bytes = 3 * kGiB + 5;
  r.allocation_bytes = 3 * kGiB + 2 * kMiB;
  r.device = 3;
  r.device_total_bytes = Gib(79.11);
  r.device_free_bytes = 917 * kMiB;
  r.allocated_bytes = Gib(70.4);
  r.reserved_bytes = Gib(76.25);
  r.process_bytes = Gib(78.2);
  return r;
}

// What the parser read, printed again as PyTorch prints it, equals the original.
void ExpectRoundTrip(const OomText& m, const alloc::OomReport& r) {
  using alloc::FormatSize;
  ASSERT_TRUE(m.requested_bytes && m.total_bytes && m.free_bytes && m.process_bytes);
  ASSERT_TRUE(m.allocated_bytes && m.unallocated_bytes);
  EXPECT_EQ(FormatSize(*m.requested_bytes), FormatSize(r.allocation_bytes));
  EXPECT_EQ(FormatSize(*m.total_bytes), FormatSize(r.device_total_bytes));
  EXPECT_EQ(FormatSize(*m.free_bytes), FormatSize(r.device_free_bytes));
  EXPECT_EQ(FormatSize(*m.process_bytes), FormatSize(*r.process_bytes));
  EXPECT_EQ(FormatSize(*m.allocated_bytes),
            FormatSize(r.allocated_bytes + r.private_pool_free_bytes));
  EXPECT_EQ(FormatSize(*m.unallocated_bytes),
            FormatSize(r.reserved_bytes - r.allocated_bytes - r.private_pool_free_bytes));
  EXPECT_EQ(m.device, r.device);
}

TEST(OomTextTest, RoundTripV21CapactyTypo) {
  const alloc::OomReport r = Report();
  const OomText m = Only(alloc::FormatOomMessage(r, alloc::TorchVersion{2, 1}));
  EXPECT_EQ(m.era, OomEra::kV21);
  ExpectRoundTrip(m, r);
}

TEST(OomTextTest, RoundTripV22RawDeviceByte) {
  const alloc::OomReport r = Report();
  const std::string text = alloc::FormatOomMessage(r, alloc::TorchVersion{2, 2});
  ASSERT_NE(text.find(std::string("GPU \x03 has")), std::string::npos);
  const OomText m = Only(text);
  EXPECT_EQ(m.era, OomEra::kV22);
  ExpectRoundTrip(m, r);
}

TEST(OomTextTest, BlankDeviceIndexAsPasted) {
  // A NUL byte pasted from a terminal shows as nothing: "GPU  has".
  const OomText m = Only(
      "CUDA out of memory. Tried to allocate 20.00 MiB. GPU  has a total capacity of 23.64 GiB "
      "of which 5.06 MiB is free. Of the allocated memory 22.79 GiB is allocated by PyTorch, "
      "and 394.55 MiB is reserved by PyTorch but unallocated.");
  EXPECT_EQ(m.era, OomEra::kV22);
  EXPECT_FALSE(m.device.has_value());
  EXPECT_EQ(m.unallocated_bytes, Mib(394.55));
  EXPECT_EQ(m.reserved_bytes, Gib(22.79) + Mib(394.55));
}

TEST(OomTextTest, RoundTripCurrentWithPrivatePools) {
  alloc::OomReport r = Report();
  r.private_pool_free_bytes = 768 * kMiB;
  for (alloc::TorchVersion v : {alloc::TorchVersion{2, 4}, alloc::TorchVersion{2, 9}}) {
    const OomText m = Only(alloc::FormatOomMessage(r, v));
    EXPECT_EQ(m.era, OomEra::kCurrent);
    EXPECT_EQ(m.private_pool_bytes, 768 * kMiB);
    ExpectRoundTrip(m, r);
  }
}

TEST(OomTextTest, OtherProcessesAndAllocConfVariable) {
  const OomText m = Only(
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 256.00 MiB. GPU 1 has a "
      "total capacity of 79.25 GiB of which 100.50 MiB is free. Process 4242 has 6.00 GiB "
      "memory in use. Including non-PyTorch memory, this process has 73.10 GiB memory in use. "
      "Process 777 has 1024.00 KiB memory in use. Of the allocated memory 70.00 GiB is allocated "
      "by PyTorch, and 1.20 GiB is reserved by PyTorch but unallocated. If reserved but "
      "unallocated memory is large try setting PYTORCH_ALLOC_CONF=expandable_segments:True to "
      "avoid fragmentation.");
  ASSERT_EQ(m.other_processes.size(), 2u);
  EXPECT_EQ(m.other_processes[0].pid, 4242);
  EXPECT_EQ(m.other_processes[0].bytes, 6 * kGiB);
  EXPECT_EQ(m.other_processes[1].bytes, kMiB);
  EXPECT_EQ(m.process_bytes, Gib(73.10));
  EXPECT_EQ(m.device, 1);
  EXPECT_EQ(m.alloc_conf_variable, "PYTORCH_ALLOC_CONF");
}

TEST(OomTextTest, WrappedMessageAndBytesUnit) {
  const OomText m = Only(
      "[rank3]: torch.OutOfMemoryError: CUDA out of memory.\n"
      "[rank3]: Tried to allocate 512 bytes. GPU 0 has a total capacity of 15.77 GiB of which "
      "0 bytes is free.\n\nunrelated line: 12.00 GiB total capacity");
  EXPECT_EQ(m.line, 1);
  EXPECT_EQ(m.requested_bytes, 512);
  EXPECT_EQ(m.free_bytes, 0);
  EXPECT_EQ(m.total_bytes, Gib(15.77));
}

TEST(OomTextTest, ExabyteRequest) {
  const OomText m =
      Only("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate more than 1EB memory.");
  EXPECT_EQ(m.era, OomEra::kExabyte);
  EXPECT_FALSE(m.requested_bytes.has_value());
}

TEST(OomTextTest, NcclCublasAndCudaErrors) {
  const auto all = FindOomMessages(
      "host:1:2 [0] include/alloc.h:120 NCCL WARN Cuda failure 2 'out of memory'\n"
      "host:1:2 [0] include/alloc.h:130 NCCL WARN Failed to CUDA calloc async 4096 bytes\n"
      "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`\n"
      "RuntimeError: CUDA error: out of memory\n");
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].source, OomSource::kNccl);
  EXPECT_EQ(all[0].failed_bytes, 4096);
  EXPECT_EQ(all[1].source, OomSource::kCublas);
  EXPECT_EQ(all[2].source, OomSource::kCudaError);
  EXPECT_EQ(all[2].line, 4);
}

TEST(OomTextTest, TruncatedMessageHasNoInventedNumbers) {
  const OomText m = Only("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 16.");
  EXPECT_EQ(m.number_count(), 0);
}

TEST(OomTextTest, RankPrefixMpsXlaAndHugeNumbers) {
  const OomText m = Only(
      "[rank5]: MPS backend out of memory (MPS allocated: 17.00 GiB, other allocations: 1.00 "
      "GiB, max allowed: 18.13 GiB). Tried to allocate 256.00 MiB on private pool.");
  EXPECT_EQ(m.rank, 5);
  EXPECT_EQ(m.allocated_bytes, 17 * kGiB);
  EXPECT_EQ(m.total_bytes, Gib(18.13));
  EXPECT_EQ(m.requested_bytes, 256 * kMiB);
  const OomText xla =
      Only("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1048576 bytes.");
  EXPECT_EQ(xla.requested_bytes, kMiB);
  // Numbers no log prints are not read (and never overflow).
  const OomText huge = Only(
      "CUDA out of memory. Tried to allocate 99999999999999999999 GiB (GPU 77777777777777777777; "
      "1 GiB total capacity; 2 GiB already allocated; 3 GiB free; 4 GiB cached)");
  EXPECT_FALSE(huge.requested_bytes.has_value());
  EXPECT_FALSE(huge.device.has_value());
  EXPECT_EQ(huge.total_bytes, kGiB);
}

TEST(OomTextTest, MentionsOomAsAWord) {
  EXPECT_TRUE(MentionsOom("the job OOMs at step 3"));
  EXPECT_TRUE(MentionsOom("it always oom in make_graphed_callables"));
  EXPECT_TRUE(MentionsOom("torch.OutOfMemoryError"));
  EXPECT_FALSE(MentionsOom("plenty of room in the zoom bloom"));
  EXPECT_TRUE(FindOomMessages("no numbers here").empty());
}

}  // namespace
}  // namespace memtune::diagnose
