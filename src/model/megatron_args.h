// A Megatron-LM launch command line -> a job document.
//
// Reads `[ENV=VALUE ...] [torchrun LAUNCHER_FLAGS] pretrain_gpt.py MEGATRON_FLAGS` (or just
// the flags) and writes the job memtune would build from the same run: model, train,
// optimizer, ddp, mixed_precision, dataset and memtune sections. Megatron-LM's own defaults
// apply, which differ from Bridge's (megatron/training/arguments.py @ d98e8a64): the vocab is
// always padded (should_pad_vocab), --swiglu means a gated SiLU MLP whose default
// ffn_hidden_size is int(4h * 2/3 / 64) * 64, the model defaults to LayerNorm, GeLU, biases,
// learned absolute positions and tied embeddings, and --bf16 accumulates and reduces grads
// in fp32 unless --grad-reduce-in-bf16.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>
#include <vector>

#include "memtune/core/result.h"

namespace memtune::model {

// The job built from a command line and what was left out of it.
struct MegatronArgsJob {
  YAML::Node job;  // a whole job document (feed YAML::Dump(job) to ParseJobText)
  // Arguments memtune does not use, in command-line order: unknown Megatron flags as
  // written ("--lr"), and stray words after the script. Shown under --verbose.
  std::vector<std::string> ignored_flags;
  // When the vocabulary size is unknown (a file-based tokenizer memtune does not know, no
  // --vocab-size): how to give it, for the "model.vocab_size is required" error.
  std::string vocab_hint;
};

// Converts a launch command line. World size comes from torchrun's --nnodes x
// --nproc-per-node (also --nproc_per_node); leading VAR=VALUE words go to memtune.env.
// Errors (kInvalidInput, field = the flag, e.g. "--num-layers"): a known flag without its
// value, a value of the wrong type or outside its choices, an unterminated quote; and
// kInvalidConfig for a --num-layers-per-virtual-pipeline-stage that does not divide the
// layers per pipeline stage.
// Example:
//   auto r = MegatronArgsToJobNode("torchrun --nproc-per-node 8 pretrain_gpt.py "
//                                  "--num-layers 32 --hidden-size 4096 ...");
//   r->job["memtune"]["world_size"].as<int>() == 8
Result<MegatronArgsJob> MegatronArgsToJobNode(std::string_view command_line);

namespace internal {

// The Megatron flags memtune reads, as collected from the command line (names without
// the leading "--"): switches that were given, single values, and list values.
struct MegatronFlags {
  std::vector<std::string> switches;
  std::vector<std::pair<std::string, std::string>> values;
  std::vector<std::pair<std::string, std::vector<std::string>>> lists;
  std::vector<std::pair<std::string, std::string>> env;  // leading VAR=VALUE words
  int nnodes = 0;                                        // torchrun; 0 = not given
  int nproc_per_node = 0;
};

// Builds the job document from collected flags (megatron_args_build.cc).
Result<YAML::Node> BuildMegatronJob(const MegatronFlags& flags);

// Whether memtune reads a Megatron-LM flag ("--num-layers"; the rest go to ignored_flags).
bool IsReadMegatronFlag(std::string_view flag);

}  // namespace internal
}  // namespace memtune::model
