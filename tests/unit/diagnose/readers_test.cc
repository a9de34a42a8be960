// Tracebacks (phase), configuration errors and nvidia-smi output.
#include <gtest/gtest.h>

#include "memtune/diagnose/config_errors.h"
#include "memtune/diagnose/nvidia_smi.h"
#include "memtune/diagnose/traceback.h"

namespace memtune::diagnose {
namespace {

TEST(TracebackTest, MostSpecificFrameWins) {
  auto p = FindPhase(
      "Traceback (most recent call last):\n"
      "  File \"train.py\", line 10, in train_step\n"
      "    loss.backward()\n"
      "  File \"model.py\", line 40, in forward\n"
      "    y = self.mlp(x)\n");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->phase, Phase::kBackward);
  EXPECT_EQ(p->line, 3);
  EXPECT_EQ(p->token, "loss.backward");
}

TEST(TracebackTest, CheckpointAndOptimizerFrames) {
  auto ckpt = FindPhase(
      "  File \"megatron/training/checkpointing.py\", line 900, in load_checkpoint\n"
      "    model.load_state_dict(state)\n");
  ASSERT_TRUE(ckpt.has_value());
  EXPECT_EQ(ckpt->phase, Phase::kCheckpoint);
  auto step =
      FindPhase("  File \"/usr/lib/python3/site-packages/torch/optim/adam.py\", line 5, in step\n");
  ASSERT_TRUE(step.has_value());
  EXPECT_EQ(step->phase, Phase::kOptimizerStep);
  EXPECT_FALSE(FindPhase("nothing here").has_value());
  EXPECT_STREQ(PhaseName(Phase::kEvaluation), "evaluation");
}

TEST(TracebackTest, ParameterGatherAndMegatronValidationLines) {
  auto gather = FindPhase(
      "  File \"deepspeed/runtime/zero/parameter_offload.py\", line 9, in "
      "_pre_forward_module_hook\n"
      "    self.pre_sub_module_forward_function(module)\n"
      "  File \"model.py\", line 40, in forward\n");
  ASSERT_TRUE(gather.has_value());
  EXPECT_EQ(gather->phase, Phase::kParameterGather);
  EXPECT_FALSE(
      FindPhase(" validation loss at iteration 100 on validation set | lm loss value: 2.1\n")
          .has_value());
}

TEST(ConfigErrorsTest, MegatronAndAllocatorParserErrors) {
  const auto errors = FindConfigErrors(
      "ValueError: Currently there is no support for Pipeline parallelism with CPU offloading\n"
      "ValueError: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True is currently not supported "
      "with nccl_ub due to compatibility issue with torch.cuda.MemPool API.\n"
      "AssertionError: Setting NCCL_GRAPH_REGISTER=0 to avoid illegal memory access when using "
      "CUDA Graph with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.\n"
      "RuntimeError: Unrecognized CachingAllocator option: expandable_segment\n"
      "ValueError: Currently there is no support for Pipeline parallelism with CPU offloading\n");
  ASSERT_EQ(errors.size(), 4u);
  EXPECT_EQ(errors[0].id, "megatron.pp-cpu-offload");
  EXPECT_EQ(errors[0].line, 1);
  EXPECT_EQ(errors[0].fix,
            "disable CPU offloading (cpu_offloading=False) or set pipeline_model_parallel_size=1");
  EXPECT_EQ(errors[1].id, "megatron.nccl-ub-expandable");
  EXPECT_EQ(errors[2].id, "megatron.cudagraph-nccl-graph-register");
  EXPECT_EQ(errors[2].fix, "export NCCL_GRAPH_REGISTER=0");
  EXPECT_EQ(errors[3].id, "torch.alloc-conf-unknown-option");
}

TEST(NvidiaSmiTest, TableWithProcesses) {
  auto smi = ParseNvidiaSmi(
      "|   0  NVIDIA H100 80GB HBM3          On  |   00000000:18:00.0 Off |                    0 "
      "|\n"
      "| N/A   35C    P0            120W /  700W |   70000MiB /  81559MiB |     95%      Default "
      "|\n"
      "|   1  NVIDIA H100 80GB HBM3          On  |   00000000:2A:00.0 Off |                    0 "
      "|\n"
      "| N/A   34C    P0            118W /  700W |   41000MiB /  81559MiB |     93%      Default "
      "|\n"
      "| Processes:                                                                              "
      "|\n"
      "|    0   N/A  N/A     12345      C   python                                   40000MiB |\n"
      "|    0   N/A  N/A     12346      C   python                                   30000MiB |\n"
      "|    1   N/A  N/A     12346      C   python                                   41000MiB |\n");
  ASSERT_TRUE(smi.has_value());
  ASSERT_EQ(smi->gpus.size(), 2u);
  EXPECT_EQ(smi->gpus[0].used_bytes, 70000LL << 20);
  EXPECT_EQ(smi->gpus[0].total_bytes, 81559LL << 20);
  ASSERT_EQ(smi->processes.size(), 3u);
  EXPECT_EQ(smi->processes[1].pid, 12346);
  EXPECT_EQ(smi->processes[1].bytes, 30000LL << 20);
  EXPECT_EQ(smi->processes[2].gpu, 1);
}

TEST(NvidiaSmiTest, QueryCsv) {
  auto smi = ParseNvidiaSmi(
      "index, memory.used [MiB], memory.total [MiB]\n0, 1024 MiB, 81559 MiB\n1, 2048, 81559\n");
  ASSERT_TRUE(smi.has_value());
  ASSERT_EQ(smi->gpus.size(), 2u);
  EXPECT_EQ(smi->gpus[0].used_bytes, 1LL << 30);
  EXPECT_EQ(smi->gpus[1].index, 1);
  EXPECT_EQ(smi->gpus[1].used_bytes, 2LL << 30);
  EXPECT_FALSE(ParseNvidiaSmi("no gpus").has_value());
}

}  // namespace
}  // namespace memtune::diagnose
