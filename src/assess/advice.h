// The playbook's advice from the verdicts (private to assess).
#pragma once

#include <vector>

#include "memtune/assess/assess.h"

namespace memtune::assess::internal {

// Advice for `a` (verdicts and forecast filled), best first. `alloc_conf_field` is the job
// field the allocator config came from (Forecast::alloc_conf_field).
std::vector<Advice> DecideAdvice(const Assessment& a);

}  // namespace memtune::assess::internal
