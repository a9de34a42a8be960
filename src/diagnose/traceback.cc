// The phase of an OOM from traceback frame names.
#include "memtune/diagnose/traceback.h"

#include <vector>

#include "diagnose/text_scan.h"

namespace memtune::diagnose {
namespace {

struct PhaseToken {
  const char* token;  // matched ignoring case
  Phase phase;
  const char* unless = nullptr;  // not on a line that also holds this (lower case)
};

// The names PyTorch, Megatron-LM, Bridge, HF Trainer/Accelerate, Lightning, DeepSpeed and
// torchtitan give these steps in their training loops.
constexpr PhaseToken kTokens[] = {
    {"load_checkpoint", Phase::kCheckpoint},
    {"load_state_dict", Phase::kCheckpoint},
    {"torch.load", Phase::kCheckpoint},
    {"load_from_checkpoint", Phase::kCheckpoint},
    {"resume_from_checkpoint", Phase::kCheckpoint},
    {"save_checkpoint", Phase::kCheckpoint},
    {"dist_checkpointing", Phase::kCheckpoint},
    {"filesystem_async", Phase::kCheckpoint},
    {"load_model_state", Phase::kCheckpoint},
    {"resuming from", Phase::kCheckpoint},
    {"loading checkpoint", Phase::kCheckpoint},
    {"load_optimizer_state", Phase::kCheckpoint},
    {"_load_from_state_dict", Phase::kCheckpoint},
    {"in generate", Phase::kGeneration},
    {".generate(", Phase::kGeneration},
    {"generate_sequences", Phase::kGeneration},
    {"rollout", Phase::kGeneration},
    {"in evaluate", Phase::kEvaluation},
    {"evaluate(", Phase::kEvaluation},
    {"evaluation_loop", Phase::kEvaluation},
    {"validation_step", Phase::kEvaluation},
    {"eval_step", Phase::kEvaluation},
    // Megatron prints "validation loss at iteration N" in every healthy log.
    {"validation", Phase::kEvaluation, "validation loss"},
    {"accelerator.prepare", Phase::kSetup},
    {"FSDP(model", Phase::kSetup},
    {"shard()", Phase::kSetup},
    {"setup_model_and_optimizer", Phase::kSetup},
    {"in get_model", Phase::kSetup},
    {"from_pretrained", Phase::kSetup},
    {"fully_shard(", Phase::kSetup},
    {"_init_param", Phase::kSetup},
    {"fetch_sub_module", Phase::kParameterGather},
    {"pre_sub_module_forward", Phase::kParameterGather},
    {"_allgather_params", Phase::kParameterGather},
    {"in _unshard", Phase::kParameterGather},
    {"in unshard", Phase::kParameterGather},
    {"optimizer.step", Phase::kOptimizerStep},
    {"optimizer_step", Phase::kOptimizerStep},
    {"step_optimizer", Phase::kOptimizerStep},
    {"_copy_main_params", Phase::kOptimizerStep},
    {"in _single_tensor_adam", Phase::kOptimizerStep},
    {"in _multi_tensor_adam", Phase::kOptimizerStep},
    {"loss.backward", Phase::kBackward},
    {".backward(", Phase::kBackward},
    {"in backward", Phase::kBackward},
    {"backward_step", Phase::kBackward},
    {"autograd.grad", Phase::kBackward},
    {"_engine_run_backward", Phase::kBackward},
    {"run_backward", Phase::kBackward},
    {"in forward", Phase::kForward},
    {"forward_step", Phase::kForward},
    {"forward_backward", Phase::kForward},
    {"logits", Phase::kForward},
    {"cross_entropy", Phase::kForward},
    {"loss computation", Phase::kForward},
};

}  // namespace

int PhaseSpecificity(Phase phase) {
  switch (phase) {
    case Phase::kCheckpoint:
      return 6;
    case Phase::kEvaluation:
    case Phase::kGeneration:
      return 5;
    case Phase::kSetup:
      return 4;
    case Phase::kOptimizerStep:
    case Phase::kParameterGather:
      return 3;
    case Phase::kBackward:
      return 2;
    case Phase::kForward:
      return 1;
  }
  return 0;
}

namespace {

bool IsFrameLine(std::string_view line) {
  return line.find("File \"") != std::string_view::npos &&
         line.find(", line ") != std::string_view::npos;
}

// The lines to read: each frame line and the code line after it; all lines when none.
std::vector<Line> PhaseLines(const std::vector<Line>& lines) {
  std::vector<Line> out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (!IsFrameLine(lines[i].text)) continue;
    out.push_back(lines[i]);
    if (i + 1 < lines.size() && !IsFrameLine(lines[i + 1].text)) out.push_back(lines[i + 1]);
  }
  return out.empty() ? lines : out;
}

// kTokens in lower case, made once.
const std::vector<std::string>& LowerTokens() {
  static const std::vector<std::string> tokens = [] {
    std::vector<std::string> out;
    for (const PhaseToken& t : kTokens) out.push_back(ToLower(t.token));
    return out;
  }();
  return tokens;
}

}  // namespace

namespace {
constexpr model::EnumName<Phase> kPhaseNames[] = {
    {"setup", Phase::kSetup},
    {"forward", Phase::kForward},
    {"backward", Phase::kBackward},
    {"parameter all-gather", Phase::kParameterGather},
    {"optimizer step", Phase::kOptimizerStep},
    {"checkpoint load/save", Phase::kCheckpoint},
    {"evaluation", Phase::kEvaluation},
    {"generation", Phase::kGeneration},
};
}  // namespace

std::span<const model::EnumName<Phase>> EnumNames(Phase) { return kPhaseNames; }

const char* PhaseName(Phase phase) { return model::NameOf(phase); }

std::optional<PhaseEvidence> FindPhase(std::string_view text) {
  std::optional<PhaseEvidence> best;
  const std::vector<std::string>& tokens = LowerTokens();
  for (const Line& line : PhaseLines(SplitLines(text))) {
    const std::string lower = ToLower(line.text);
    // torch/optim/*.py (and optimizer wrappers) name the update "step".
    if (IsFrameLine(line.text) && lower.find("optim") != std::string::npos &&
        line.text.ends_with(", in step") &&
        (!best || PhaseSpecificity(best->phase) < PhaseSpecificity(Phase::kOptimizerStep))) {
      best = PhaseEvidence{Phase::kOptimizerStep, line.number, Excerpt(line.text), "optim step"};
    }
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      const PhaseToken& t = kTokens[i];
      if (lower.find(tokens[i]) == std::string::npos) continue;
      if (t.unless && lower.find(t.unless) != std::string::npos) continue;
      if (best && PhaseSpecificity(best->phase) >= PhaseSpecificity(t.phase)) continue;
      best = PhaseEvidence{t.phase, line.number, Excerpt(line.text), t.token};
    }
  }
  return best;
}

}  // namespace memtune::diagnose
