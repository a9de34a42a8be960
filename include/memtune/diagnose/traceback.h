// The training phase an out-of-memory error happened in, read from the Python traceback
// around it (frame and function names) or, without a traceback, from the words of the text.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "memtune/model/job.h"

namespace memtune::diagnose {

enum class Phase {
  kSetup,          // model construction, sharding, moving to the GPU (accelerator.prepare, FSDP())
  kForward,        // forward pass and loss
  kBackward,       // loss.backward(), autograd, gradient reduction in backward
  kOptimizerStep,  // optimizer.step(), main-param copies
  kParameterGather,  // sharded parameters gathered for use (ZeRO-3 fetch, FSDP unshard)
  kCheckpoint,       // loading or saving a checkpoint (load_state_dict, torch.load, async save)
  kEvaluation,       // evaluation / validation loop
  kGeneration,       // generate(), rollout, sampling
};
// "setup", "forward", "backward", "optimizer step", "parameter all-gather", "checkpoint
// load/save", "evaluation", "generation" (the name table, for model::NameOf, and a shorthand).
std::span<const model::EnumName<Phase>> EnumNames(Phase);
const char* PhaseName(Phase phase);

// How specific a phase is when several appear (higher wins): checkpoint 6, evaluation and
// generation 5, setup 4, optimizer step and parameter all-gather 3, backward 2, forward 1.
int PhaseSpecificity(Phase phase);

// Where the phase was read.
struct PhaseEvidence {
  Phase phase = Phase::kForward;
  int line = 0;           // 1-based
  std::string line_text;  // excerpt
  std::string token;      // the name that decided it, e.g. "loss.backward"
};

// The phase of the text's traceback: frames ("File ..., line N, in NAME" and the code line
// after) when the text has any, otherwise every line. When several phases appear the most
// specific wins: checkpoint > evaluation/generation > setup > optimizer step > backward >
// forward (a recompute in backward shows forward frames; an evaluation calls forward; a
// parameter all-gather runs inside forward or backward).
// nullopt when no name matches.
std::optional<PhaseEvidence> FindPhase(std::string_view text);

}  // namespace memtune::diagnose
