// RenderInspectJson: the memtune.inspect/1 document.
#include <nlohmann/json.hpp>

#include "memtune/report/inspect_report.h"

namespace memtune::report {
namespace {

using json = nlohmann::ordered_json;
using snapshot::PoolType;

json Frames(const std::vector<snapshot::Frame>& frames) {
  json out = json::array();
  for (const auto& f : frames) {
    out.push_back({{"name", f.name}, {"filename", f.filename}, {"line", f.line}});
  }
  return out;
}

json Sites(const std::vector<snapshot::SiteUsage>& sites) {
  json out = json::array();
  for (const auto& s : sites) {
    out.push_back({{"bytes", s.bytes}, {"count", s.count}, {"frames", Frames(s.frames)}});
  }
  return out;
}

json Settings(const snapshot::AllocatorSettings& s) {
  json divisions = json::array();
  for (const auto& [mib, d] : s.roundup_power2_divisions) divisions.push_back({mib, d});
  return {{"recorded", s.present},
          {"PYTORCH_CUDA_ALLOC_CONF", s.alloc_conf},
          {"max_split_size_bytes", s.max_split_size_bytes},
          {"garbage_collection_threshold", s.garbage_collection_threshold},
          {"expandable_segments", s.expandable_segments},
          {"release_lock_on_cudamalloc", s.release_lock_on_cudamalloc},
          {"roundup_power2_divisions", divisions}};
}

json Ooms(const std::vector<snapshot::OomEvent>& ooms) {
  json out = json::array();
  for (const auto& o : ooms) {
    out.push_back({{"event_index", o.event_index},
                   {"size_bytes", o.size_bytes},
                   {"device_free_bytes", o.device_free_bytes},
                   {"stream", o.stream},
                   {"time_us", o.time_us},
                   {"reserved_bytes", o.reserved_bytes},
                   {"requested_bytes", o.requested_bytes}});
  }
  return out;
}

json Trace(const snapshot::TraceSummary& t) {
  return {{"present", t.present},
          {"entries", t.entries},
          {"starts_mid_run", t.starts_mid_run},
          {"reserved_at_start_bytes", t.reserved_at_start_bytes},
          {"requested_at_start_bytes", t.requested_at_start_bytes},
          {"peak_reserved_bytes", t.peak_reserved_bytes},
          {"peak_reserved_event", t.peak_reserved_event},
          {"peak_requested_bytes", t.peak_requested_bytes},
          {"peak_requested_event", t.peak_requested_event},
          {"live_at_peak", Sites(t.live_at_peak)},
          {"first_time_us", t.first_time_us},
          {"last_time_us", t.last_time_us}};
}

json Device(const snapshot::DeviceInspect& d) {
  json pools = json::array();
  for (const auto& p : d.pools) {
    pools.push_back({{"pool", p.pool == PoolType::kSmall ? "small" : "large"},
                     {"kind", p.expandable ? "expandable" : "native"},
                     {"pool_id", {p.pool_id.first, p.pool_id.second}},
                     {"segments", p.segments},
                     {"reserved_bytes", p.reserved_bytes},
                     {"allocated_bytes", p.allocated_bytes},
                     {"largest_free_block_bytes", p.largest_free_block_bytes}});
  }
  return {{"device", d.device},
          {"reserved_bytes", d.reserved_bytes},
          {"allocated_bytes", d.allocated_bytes},
          {"active_bytes", d.active_bytes},
          {"requested_bytes", d.requested_bytes},
          {"inactive_split_bytes", d.inactive_split_bytes},
          {"inactive_split_blocks", d.inactive_split_blocks},
          {"free_bytes", d.free_bytes},
          {"reserved_unallocated_bytes", d.reserved_unallocated_bytes},
          {"largest_free_block_bytes", d.largest_free_block_bytes},
          {"fragmentation", d.fragmentation},
          {"segments", d.segments},
          {"live_allocations", d.live_allocations},
          {"pools", pools},
          {"top_sites", Sites(d.top_sites)},
          {"peak_reserved_bytes", d.trace.peak_reserved_bytes},
          {"peak_requested_bytes", d.trace.peak_requested_bytes},
          {"ooms", Ooms(d.trace.ooms)},
          {"trace", Trace(d.trace)},
          {"notes", d.notes}};
}

}  // namespace

std::string RenderInspectJson(const snapshot::InspectReport& report) {
  json devices = json::array();
  for (const auto& d : report.devices) devices.push_back(Device(d));
  json doc = {{"schema", "memtune.inspect/1"},
              {"format", SnapshotFormatName(report.format)},
              {"options", {{"frames", report.options.frames_depth}, {"top", report.options.top_sites}}},
              {"allocator_settings", Settings(report.settings)},
              {"devices", devices}};
  return doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace memtune::report
