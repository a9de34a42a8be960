// Renderers for `memtune diagnose`: text and JSON (schema "memtune.diagnose/1", fields in
// docs/diagnose.md).
#pragma once

#include <string>

#include "memtune/diagnose/diagnose.h"

namespace memtune::report {

// The text report: the cause and confidence, the evidence (value, source:line, the line),
// the notes, the fixes in order with their cost (and predicted effect), and the comparison
// with the job when there is one.
std::string RenderDiagnoseText(const diagnose::Diagnosis& d);

// The JSON document: {"schema", "cause", "confidence", "evidence": [...], "fixes": [...],
// "notes": [...], "comparison"?}, pretty-printed with 2 spaces, ending with a newline.
std::string RenderDiagnoseJson(const diagnose::Diagnosis& d);

}  // namespace memtune::report
