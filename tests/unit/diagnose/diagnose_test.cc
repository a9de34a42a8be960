// Diagnose(): one cause per kind of input, snapshots replayed, bad input rejected.
#include "memtune/diagnose/diagnose.h"

#include <gtest/gtest.h>

#include "memtune/core/file.h"
#include "memtune/model/examples.h"
#include "memtune/model/job_parse.h"

namespace memtune::diagnose {
namespace {

Diagnosis DiagnoseText(const std::string& text) {
  auto input = ReadDiagnoseInput("t.log", text);
  EXPECT_TRUE(input.has_value()) << input.error().Describe();
  auto d = Diagnose({*input});
  EXPECT_TRUE(d.has_value()) << d.error().Describe();
  return d ? *d : Diagnosis{};
}

std::string Name(Cause c) { return model::NameOf(c); }

TEST(DiagnoseTest, FragmentationWhenUnallocatedCouldServeTheRequest) {
  const Diagnosis d = DiagnoseText(
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
      "capacity of 79.15 GiB of which 1.50 GiB is free. Including non-PyTorch memory, this "
      "process has 77.60 GiB memory in use. Of the allocated memory 60.00 GiB is allocated by "
      "PyTorch, and 16.60 GiB is reserved by PyTorch but unallocated.");
  EXPECT_EQ(Name(d.cause), "fragmentation");
  EXPECT_EQ(d.confidence, Confidence::kHigh);
  ASSERT_FALSE(d.fixes.empty());
  EXPECT_EQ(d.fixes[0].id, "allocator.expandable-segments");
  EXPECT_EQ(d.fixes[0].cost, "none");
  EXPECT_EQ(d.evidence[0].what, "requested");
  EXPECT_EQ(d.evidence[0].value_bytes, 2LL << 30);
  EXPECT_EQ(d.evidence[0].line, 1);
}

TEST(DiagnoseTest, CapacityWithPhaseAndExpandableAlreadySet) {
  const Diagnosis d = DiagnoseText(
      "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n"
      "  File \"train.py\", line 3, in step_fn\n"
      "    optimizer.step()\n"
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total "
      "capacity of 79.15 GiB of which 1.50 GiB is free. Including non-PyTorch memory, this "
      "process has 77.60 GiB memory in use. Of the allocated memory 70.00 GiB is allocated by "
      "PyTorch, and 6.60 GiB is reserved by PyTorch but unallocated.");
  EXPECT_EQ(Name(d.cause), "capacity_model_state");
  ASSERT_FALSE(d.fixes.empty());
  EXPECT_EQ(d.fixes[0].id, "parallel.distributed-optimizer");
}

TEST(DiagnoseTest, OtherProcessAndNonPytorch) {
  const Diagnosis other = DiagnoseText(
      "CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 39.50 GiB "
      "of which 200.00 MiB is free. Process 99 has 8.00 GiB memory in use. Including non-PyTorch "
      "memory, this process has 31.00 GiB memory in use. Of the allocated memory 30.00 GiB is "
      "allocated by PyTorch, and 100.00 MiB is reserved by PyTorch but unallocated.");
  EXPECT_EQ(Name(other.cause), "other_process");
  const Diagnosis outside = DiagnoseText(
      "CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 79.00 GiB "
      "of which 200.00 MiB is free. Including non-PyTorch memory, this process has 78.50 GiB "
      "memory in use. Of the allocated memory 60.00 GiB is allocated by PyTorch, and 500.00 MiB "
      "is reserved by PyTorch but unallocated.");
  EXPECT_EQ(Name(outside.cause), "non_pytorch");
  const Diagnosis nccl =
      DiagnoseText("x [0] include/alloc.h:1 NCCL WARN Cuda failure 'out of memory'\n");
  EXPECT_EQ(Name(nccl.cause), "non_pytorch");
}

std::string MegatronLine(int rank, int iteration, double allocated_mb, double max_reserved_mb) {
  return "[Rank " + std::to_string(rank) + "] (after " + std::to_string(iteration) +
         " iterations) memory (MB) | allocated: " + std::to_string(allocated_mb) +
         " | max allocated: " + std::to_string(allocated_mb + 1000) +
         " | reserved: " + std::to_string(max_reserved_mb) +
         " | max reserved: " + std::to_string(max_reserved_mb) + "\n";
}

TEST(DiagnoseTest, LeakAndImbalanceFromLogs) {
  std::string leak;
  for (int it = 10; it <= 60; it += 10) leak += MegatronLine(0, it, 1000.0 + 50.0 * it, 9000.0);
  EXPECT_EQ(Name(DiagnoseText(leak).cause), "leak");

  std::string ranks = "  pipeline_model_parallel_size ..... 2\n  world_size ..... 4\n";
  for (int r = 0; r < 4; ++r) ranks += MegatronLine(r, 50, 3000.0, r == 3 ? 75000.0 : 50000.0);
  const Diagnosis d = DiagnoseText(ranks);
  EXPECT_EQ(Name(d.cause), "imbalance");
  ASSERT_FALSE(d.evidence.empty());
  EXPECT_EQ(d.evidence[0].value, "rank 3 (pipeline stage 1 of 2)");
}

TEST(DiagnoseTest, OneRankOutOfManyAlikeIsFragmentation) {
  std::string log;
  for (int r = 0; r < 4; ++r) log += MegatronLine(r, 50, 3000.0, 60000.0 + r);
  log +=
      "[rank2]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 2 has "
      "a total capacity of 79.00 GiB of which 1.00 GiB is free. Including non-PyTorch memory, "
      "this process has 78.00 GiB memory in use. Of the allocated memory 74.00 GiB is allocated "
      "by PyTorch, and 3.00 GiB is reserved by PyTorch but unallocated.\n";
  const Diagnosis d = DiagnoseText(log);
  EXPECT_EQ(Name(d.cause), "fragmentation");
  EXPECT_EQ(d.confidence, Confidence::kMedium);
  // Without the peers' lines it is the capacity the message shows.
  const std::size_t oom = log.find("[rank2]: torch");
  EXPECT_EQ(Name(DiagnoseText(log.substr(oom)).cause), "capacity_activations");
}

TEST(DiagnoseTest, ConfigConflictGivesTheExactFix) {
  const Diagnosis d = DiagnoseText(
      "Traceback (most recent call last):\n"
      "ValueError: Currently there is no support for Pipeline parallelism with CPU offloading\n");
  EXPECT_EQ(Name(d.cause), "config_conflict");
  ASSERT_EQ(d.fixes.size(), 1u);
  EXPECT_EQ(d.fixes[0].id, "megatron.pp-cpu-offload");
}

TEST(DiagnoseTest, PhasesAndCorruptedSizes) {
  EXPECT_EQ(
      Name(DiagnoseText("  File \"eval.py\", line 9, in evaluate\n    out = model(x)\n"
                        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.")
               .cause),
      "eval_or_generation");
  const Diagnosis eb = DiagnoseText("CUDA out of memory. Tried to allocate more than 1EB memory.");
  EXPECT_EQ(Name(eb.cause), "unknown");
  EXPECT_EQ(eb.confidence, Confidence::kHigh);
  EXPECT_EQ(Name(DiagnoseText("total_loss += loss\n").cause), "leak");
  EXPECT_EQ(Name(DiagnoseText("total_loss += loss.item()\nthe run OOMs\n").cause),
            "capacity_activations");
}

std::string SmiTable(int extra_pid_on_gpu0) {
  return "|   0  NVIDIA A100-SXM4-80GB  On | 00000000:07:00.0 Off |  0 |\n"
         "| N/A 30C P0 90W / 400W |  79000MiB /  81920MiB |  90%  Default |\n"
         "|   1  NVIDIA A100-SXM4-80GB  On | 00000000:0B:00.0 Off |  0 |\n"
         "| N/A 30C P0 90W / 400W |  60000MiB /  81920MiB |  90%  Default |\n"
         "| Processes: |\n"
         "|    0   N/A  N/A     1000      C   python     60000MiB |\n"
         "|    0   N/A  N/A     " +
         std::to_string(extra_pid_on_gpu0) +
         "      C   python     19000MiB |\n"
         "|    1   N/A  N/A     1001      C   python     60000MiB |\n";
}

TEST(DiagnoseTest, NvidiaSmiTellsOtherRanksFromOtherJobs) {
  const Diagnosis ranks = DiagnoseText(SmiTable(1001));  // rank 1's process also on GPU 0
  EXPECT_EQ(Name(ranks.cause), "imbalance");
  const Diagnosis job = DiagnoseText(SmiTable(4242));  // a process on no other GPU
  EXPECT_EQ(Name(job.cause), "other_process");
}

// The playbook's Llama3-70B case with VPP 2: the forecast is at risk natively and fits with
// expandable segments, so an OOM with a little unallocated memory is still fragmentation;
// the fix carries the prediction and the comparison the verdicts.
TEST(DiagnoseTest, JobForecastTurnsACapacityMessageIntoFragmentation) {
  auto yaml = model::ExampleJobYaml("llama3-70b-32xh100");
  ASSERT_TRUE(yaml.has_value());
  auto doc = model::ParseJobText(*yaml);
  ASSERT_TRUE(doc.has_value()) << doc.error().Describe();
  doc->job.model.virtual_pipeline_model_parallel_size = 2;
  auto input = ReadDiagnoseInput(
      "oom.txt",
      "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB "
      "of which 1.20 GiB is free. Including non-PyTorch memory, this process has 77.98 GiB memory "
      "in use. Of the allocated memory 74.50 GiB is allocated by PyTorch, and 1.10 GiB is "
      "reserved by PyTorch but unallocated.");
  ASSERT_TRUE(input.has_value());
  DiagnoseOptions options;
  options.job = doc->job;
  auto d = Diagnose({*input}, options);
  ASSERT_TRUE(d.has_value()) << d.error().Describe();
  EXPECT_EQ(Name(d->cause), "fragmentation");
  ASSERT_FALSE(d->fixes.empty());
  EXPECT_EQ(d->fixes[0].id, "allocator.expandable-segments");
  EXPECT_NE(d->fixes[0].predicted.find("; fits"), std::string::npos);
  ASSERT_TRUE(d->comparison.has_value());
  ASSERT_EQ(d->comparison->verdicts.size(), 2u);
  EXPECT_EQ(d->comparison->verdicts[1].rfind("expandable: fits", 0), 0u);
  // Without the job the same message is a capacity limit.
  EXPECT_EQ(Name(Diagnose({*input})->cause), "capacity_activations");
}

Diagnosis RunSnapshot(const std::string& file) {
  auto bytes =
      ReadInputFile(std::string(MEMTUNE_SOURCE_DIR) + "/tests/data/snapshots/" + file, "f");
  EXPECT_TRUE(bytes.has_value());
  auto input = ReadDiagnoseInput(file, bytes ? *bytes : "");
  EXPECT_TRUE(input.has_value()) << input.error().Describe();
  EXPECT_TRUE(input->snapshot.has_value());
  auto d = Diagnose({*input});
  EXPECT_TRUE(d.has_value());
  return d ? *d : Diagnosis{};
}

TEST(DiagnoseTest, SnapshotReplayDecidesFragmentationOrCapacity) {
  const Diagnosis frag = RunSnapshot("oom_native.pickle");
  EXPECT_EQ(Name(frag.cause), "fragmentation");
  EXPECT_EQ(frag.fixes[0].predicted, "replayed: peak reserved 840.00 MiB; fits");
  const Diagnosis cap = RunSnapshot("oom_capacity.pickle");
  EXPECT_EQ(Name(cap.cause), "capacity_model_state");  // the failing request is optimizer.step
  EXPECT_EQ(cap.fixes[0].id, "parallel.distributed-optimizer");
}

TEST(DiagnoseTest, BadInputSaysWhatWasLookedFor) {
  auto empty = ReadDiagnoseInput("a.txt", "  \n");
  ASSERT_FALSE(empty.has_value());
  EXPECT_EQ(empty.error().Describe(), "a.txt: empty input");
  auto binary = ReadDiagnoseInput("b.bin", std::string("\x01\x02\x03\x04\x05 abc", 9));
  ASSERT_FALSE(binary.has_value());
  EXPECT_EQ(binary.error().Describe(),
            "b.bin: binary data that is not a memory snapshot (neither gzip nor pickle)");
  auto plain = ReadDiagnoseInput("c.log", "step 1 done\n");
  ASSERT_TRUE(plain.has_value());
  auto none = Diagnose({*plain});
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().Describe(), "c.log: no memory information found");
  EXPECT_NE(none.error().hint.find("out-of-memory message"), std::string::npos);
  EXPECT_FALSE(Diagnose({}).has_value());
}

}  // namespace
}  // namespace memtune::diagnose
