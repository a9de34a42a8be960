// RenderReplayText / RenderReplayJson for `memtune replay`.
#include "memtune/report/replay_report.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "memtune/core/units.h"

namespace memtune::report {
namespace {

using json = nlohmann::ordered_json;
using snapshot::DeviceReplay;

std::string B(std::int64_t bytes) { return FormatBytesBinary(bytes); }

std::string Config(const DeviceReplay& d) {
  return d.alloc_conf.empty() ? std::string("the default settings") : d.alloc_conf;
}

std::string RecordedLine(const snapshot::RecordedOutcome& r) {
  if (!r.oom) return fmt::format("recorded: peak reserved {}, no OOM", B(r.peak_reserved_bytes));
  std::string unalloc =
      r.oom_reserved_unallocated_bytes >= 0
          ? fmt::format(" with {} reserved but unallocated", B(r.oom_reserved_unallocated_bytes))
          : std::string();
  return fmt::format("recorded: OOM at entry {} (request {}){}; peak reserved {}",
                     FormatWithCommas(r.oom_event_index), B(r.oom_request_bytes), unalloc,
                     B(r.peak_reserved_bytes));
}

std::string ReplayedLine(const DeviceReplay& d) {
  const auto& o = d.replayed;
  std::string verdict =
      !o.oom ? std::string("no OOM")
             : fmt::format("OOM at entry {} (request {}, {} reserved but unallocated)",
                           FormatWithCommas(o.oom_event_index), B(o.oom_request_bytes),
                           B(o.oom_reserved_unallocated_bytes));
  if (!d.capacity_bytes && !o.oom)
    verdict = "no capacity limit known (give --capacity for an OOM verdict)";
  if (!o.oom && d.capacity_lower_bound_bytes &&
      o.peak_reserved_bytes > *d.capacity_lower_bound_bytes) {
    verdict = fmt::format(
        "no OOM below the proven bound, but above the {} the device is known to hold: may not fit",
        B(*d.capacity_lower_bound_bytes));
  }
  return fmt::format("with {}: peak reserved {}, peak allocated {}, {}", Config(d),
                     B(o.peak_reserved_bytes), B(o.peak_allocated_bytes), verdict);
}

std::string CapacityText(const DeviceReplay& d) {
  if (!d.capacity_bytes) return "unlimited (no OOM recorded, no --capacity)";
  if (d.capacity_lower_bound_bytes) {
    return fmt::format("below {}, at least {} ({})", B(*d.capacity_bytes + 1),
                       B(*d.capacity_lower_bound_bytes), d.capacity_source);
  }
  return B(*d.capacity_bytes) + " (" + d.capacity_source + ")";
}

void Device(std::string& out, const DeviceReplay& d) {
  out += fmt::format(
      "device {}: {} trace entries, {} malloc{}, {} free{}, {} empty_cache run{}{}\n", d.device,
      FormatWithCommas(d.events), FormatWithCommas(d.mallocs), d.mallocs == 1 ? "" : "s",
      FormatWithCommas(d.frees), d.frees == 1 ? "" : "s", d.empty_caches,
      d.empty_caches == 1 ? "" : "s",
      d.rebuilt_start ? "; the trace starts mid-run: starting state rebuilt from the final snapshot"
                      : "");
  if (d.divergence) {
    out += fmt::format(
        "  check under the recorded settings: DIVERGES at entry {}: recorded {}; replay {} "
        "({} of {} events differ)\n",
        FormatWithCommas(d.divergence->event_index), d.divergence->recorded, d.divergence->replayed,
        FormatWithCommas(d.mismatched_events), FormatWithCommas(d.compared_events));
  } else {
    out += fmt::format(
        "  check under the recorded settings: all {} recorded events reproduced "
        "(segment events, sizes and addresses)\n",
        FormatWithCommas(d.compared_events));
  }
  out += "  capacity: " + CapacityText(d) + "\n";
  out += "  " + RecordedLine(d.recorded) + "\n";
  out += "  " + ReplayedLine(d) + "\n";
  for (const auto& note : d.notes) out += "  note: " + note + "\n";
}

json DeviceJson(const DeviceReplay& d) {
  json div = nullptr;
  if (d.divergence) {
    div = {{"event_index", d.divergence->event_index},
           {"recorded", d.divergence->recorded},
           {"replayed", d.divergence->replayed}};
  }
  const auto& r = d.recorded;
  const auto& o = d.replayed;
  return {{"device", d.device},
          {"own_settings", d.own_settings},
          {"alloc_conf", d.alloc_conf},
          {"capacity_bytes", d.capacity_bytes ? json(*d.capacity_bytes) : json(nullptr)},
          {"capacity_lower_bound_bytes",
           d.capacity_lower_bound_bytes ? json(*d.capacity_lower_bound_bytes) : json(nullptr)},
          {"capacity_source", d.capacity_source},
          {"rebuilt_start", d.rebuilt_start},
          {"events", d.events},
          {"mallocs", d.mallocs},
          {"frees", d.frees},
          {"empty_caches", d.empty_caches},
          {"compared_events", d.compared_events},
          {"mismatched_events", d.mismatched_events},
          {"reproduced", !d.divergence.has_value()},
          {"divergence", div},
          {"recorded",
           {{"peak_reserved_bytes", r.peak_reserved_bytes},
            {"oom", r.oom},
            {"oom_event_index", r.oom_event_index},
            {"oom_request_bytes", r.oom_request_bytes},
            {"oom_device_free_bytes", r.oom_device_free_bytes},
            {"oom_reserved_bytes", r.oom_reserved_bytes},
            {"oom_reserved_unallocated_bytes", r.oom_reserved_unallocated_bytes}}},
          {"replayed",
           {{"peak_reserved_bytes", o.peak_reserved_bytes},
            {"peak_allocated_bytes", o.peak_allocated_bytes},
            {"final_reserved_bytes", o.final_reserved_bytes},
            {"oom", o.oom},
            {"oom_event_index", o.oom_event_index},
            {"oom_request_bytes", o.oom_request_bytes},
            {"oom_reserved_unallocated_bytes", o.oom_reserved_unallocated_bytes},
            {"ooms", o.ooms},
            {"oom_message", o.oom_message}}},
          {"notes", d.notes}};
}

}  // namespace

std::string RenderReplayText(const snapshot::ReplayReport& report) {
  std::string out;
  for (const DeviceReplay& d : report.devices) Device(out, d);
  return out;
}

std::string RenderReplayJson(const snapshot::ReplayReport& report) {
  json devices = json::array();
  for (const DeviceReplay& d : report.devices) devices.push_back(DeviceJson(d));
  json doc = {{"schema", "memtune.replay/1"}, {"devices", devices}};
  return doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace memtune::report
