// The per-rank pipeline order the trace generator follows: the estimator's
// (memtune/estimate/schedule.h PipelineSchedule), named here for the synthesizer's users.
#pragma once

#include "memtune/estimate/schedule.h"

namespace memtune::synth {

using estimate::PipelineSchedule;
using estimate::PipelineStep;
using estimate::ScheduleTable;

}  // namespace memtune::synth
