// With --job: the facts the rules use, the predicted effect of each fix, and what the inputs
// show next to the prediction. Private to diagnose.
#pragma once

#include <vector>

#include "diagnose/findings.h"
#include "memtune/assess/assess.h"

namespace memtune::diagnose {

// The peak stage's model-state / activation split, the capacity and the layout.
JobFacts FactsOf(const model::Job& job, const assess::Assessment& a);

// Fills Fix::predicted / effect_bytes from the per-mode verdicts and the advice.
void PredictFixes(const assess::Assessment& a, std::vector<Fix>& fixes);

// The observed numbers (the best OOM message, else the logs' peaks) next to the prediction.
JobComparison Compare(const assess::Assessment& a, const Findings& f);

}  // namespace memtune::diagnose
