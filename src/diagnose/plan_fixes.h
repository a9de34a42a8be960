// With --job: the planner's predicted cost of each playbook fix (plan/plan.h), and its best
// fitting change as one more fix. Private to diagnose.
#pragma once

#include <vector>

#include "memtune/diagnose/diagnose.h"
#include "memtune/model/job.h"

namespace memtune::diagnose {

// Runs plan::PlanJob on `job` (a short search: few simulations); each fix whose playbook
// lever the plan priced gets the predicted throughput change and verdict appended to its
// `cost` / `predicted`, and the plan's fastest fitting change that is not already a fix is
// added last ("plan.best"). Does nothing when the job cannot be planned (no GPU in the
// catalog, say): the fixes keep the playbook's costs.
void AddPlanCosts(const model::Job& job, std::vector<Fix>& fixes);

}  // namespace memtune::diagnose
