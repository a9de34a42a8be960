// `memtune report`: one self-contained HTML page (styles, scripts and data inline, no
// network) that shows a job's estimate, allocator timeline, segment map and plan, a
// snapshot's recorded timeline and what-if replay, or an OOM's diagnosis. The page data is
// one JSON document (schema memtune.report/1, docs/report.md) built from the other
// renderers' JSON (estimate, plan, diagnose, inspect, replay) plus the timeline series and
// the segment map; the front end (report/web/) draws it. Pure functions; nothing prints.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "memtune/assess/assess.h"
#include "memtune/core/result.h"
#include "memtune/diagnose/diagnose.h"
#include "memtune/model/job.h"
#include "memtune/plan/plan.h"
#include "memtune/report/estimate_report.h"
#include "memtune/snapshot/snapshot.h"

namespace memtune::report {

// What a job report shows besides the assessment.
struct JobReportInput {
  const model::Job* job = nullptr;                 // the effective job (required)
  const assess::Assessment* assessment = nullptr;  // AssessJob(*job, options) (required)
  assess::AssessOptions options;                   // the options it was assessed with
  EstimateReportContext context;                   // as for RenderEstimateJson
  const plan::Plan* plan = nullptr;                // nullptr: no plan section
};

// The page data of a job: {"schema": "memtune.report/1", "kind": "job", "title",
// "estimate" (memtune.estimate/1), "plan" (memtune.plan/1 or null), "timeline", "segments"}.
// The timeline replays the rank that decides the job's own verdict (else the most loaded)
// under both allocator modes, event by event: allocated, reserved per mode, the OOM point
// per mode, iteration starts, phase runs and each event's label (phase, iteration, layer,
// tensor, bytes). The segment map lists each mode's segments and blocks at its reserved
// peak. Without a forecast (a job the synthesizer does not model, --no-allocator) both are
// null. Errors: those of synth::TraceSynthesizer::Create and synth::JobAllocatorConfig.
Result<std::string> RenderJobReportData(const JobReportInput& input);

// The page data of a snapshot: "kind": "snapshot", "inspect" (memtune.inspect/1), "replay"
// (memtune.replay/1, under the other segment mode than the recorded one), "timeline" (the
// recorded trace of the first device with one: allocated (requested) and reserved bytes per
// entry, the OOMs) and "segments" (the snapshot's final state of that device).
// Errors: those of snapshot::Inspect and snapshot::Replay.
Result<std::string> RenderSnapshotReportData(const snapshot::Snapshot& snapshot,
                                             const std::string& name,
                                             alloc::TorchVersion torch_version);

// The page data of a diagnosis: "kind": "oom", "title", "diagnosis" (memtune.diagnose/1).
std::string RenderDiagnosisReportData(const diagnose::Diagnosis& diagnosis,
                                      const std::string& name);

// Whether this build embeds the front end (the charting library from npm): false when it
// was configured without npm or without network and cache (docs/report.md).
bool HtmlFrontEndAvailable();

// The HTML page around `data_json` (one of the documents above): the front end's template
// with its styles, the charting library and the script inlined, and the data in a
// <script type="application/json"> element. Errors: kUnsupported when
// !HtmlFrontEndAvailable().
Result<std::string> RenderHtmlReport(std::string_view data_json, std::string_view title);

}  // namespace memtune::report
