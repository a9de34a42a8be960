// Labels of synthesized events.
#include "memtune/synth/events.h"

namespace memtune::synth {

const char* PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kStartup:
      return "startup";
    case Phase::kForward:
      return "forward";
    case Phase::kBackward:
      return "backward";
    case Phase::kRecompute:
      return "recompute";
    case Phase::kOptimizer:
      return "optimizer";
    case Phase::kZeroGrad:
      return "zero_grad";
  }
  return "?";
}

std::string FormatLabel(const EventLabel& l) {
  std::string s = "iter " + std::to_string(l.iteration) + " " + PhaseName(l.phase);
  if (l.chunk >= 0) s += " chunk " + std::to_string(l.chunk);
  if (l.microbatch >= 0) s += " mb " + std::to_string(l.microbatch);
  if (l.layer >= 0) s += " layer " + std::to_string(l.layer);
  if (l.tensor != nullptr && *l.tensor != '\0') s += std::string(" ") + l.tensor;
  return s;
}

}  // namespace memtune::synth
