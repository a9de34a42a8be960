// JSON rendering of `memtune simulate` (schema memtune.simulate/1).
#include <nlohmann/json.hpp>

#include "memtune/report/simulate_report.h"

namespace memtune::report {
namespace {

using Json = nlohmann::ordered_json;

Json FirstOomJson(const alloc::ReplaySummary& s) {
  if (!s.first_oom) return Json();
  const alloc::FirstOom& f = *s.first_oom;
  Json j = Json::object();
  j["event_index"] = f.event_index;
  j["line"] = f.line;
  j["handle"] = f.handle;
  j["label"] = f.label;
  j["requested_bytes"] = f.requested_bytes;
  j["rounded_bytes"] = f.report.rounded_bytes;
  j["allocation_bytes"] = f.report.allocation_bytes;
  j["device_free_bytes"] = f.report.device_free_bytes;
  j["message"] = f.message;
  return j;
}

// Writes the figures of `run` into the object `j`.
void AddRun(Json& j, const SimulateRun& run) {
  const alloc::ReplaySummary& s = run.summary;
  j["alloc_conf"] = run.config.settings;
  j["expandable_segments"] = run.config.expandable_segments;
  j["events"] = s.events;
  j["peak_allocated_bytes"] = s.peak_allocated_bytes;
  j["peak_reserved_bytes"] = s.peak_reserved_bytes;
  j["peak_active_bytes"] = s.peak_active_bytes;
  j["peak_requested_bytes"] = s.peak_requested_bytes;
  j["peak_reserved_event_index"] = s.peak_reserved_event_index;
  j["allocated_at_peak_reserved_bytes"] = s.allocated_at_peak_reserved_bytes;
  j["reserved_unallocated_at_peak_bytes"] = s.reserved_unallocated_at_peak_bytes;
  j["final_allocated_bytes"] = s.final_allocated_bytes;
  j["final_reserved_bytes"] = s.final_reserved_bytes;
  j["segments_peak"] = alloc::All(s.stats.segment).peak;
  j["segments_final"] = alloc::All(s.stats.segment).current;
  j["num_device_alloc"] = s.stats.num_device_alloc;
  j["num_device_free"] = s.stats.num_device_free;
  j["num_alloc_retries"] = s.stats.num_alloc_retries;
  j["num_sync_all_streams"] = s.stats.num_sync_all_streams;
  j["ooms"] = s.ooms;
  j["first_oom"] = FirstOomJson(s);
  j["notes"] = s.notes;
  j["notes_dropped"] = s.notes_dropped;
  j["not_simulated"] = run.config.not_simulated;
  j["warnings"] = run.config.warnings;
}

}  // namespace

std::string RenderSimulateJson(const SimulateReport& r) {
  Json j = Json::object();
  j["schema"] = "memtune.simulate/1";
  j["trace"] = r.trace;
  j["torch_version"] = r.torch_version.ToString();
  j["capacity_bytes"] = r.capacity_bytes;
  j["non_pytorch_bytes"] = r.non_pytorch_bytes;
  if (!r.runs.empty()) AddRun(j, r.runs[0]);
  Json compare;
  if (r.runs.size() > 1) {
    compare = Json::object();
    AddRun(compare, r.runs[1]);
  }
  j["compare"] = compare;
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace memtune::report
