// RenderInspectText: the human-readable `memtune inspect` report.
#include <fmt/format.h>

#include "memtune/core/units.h"
#include "memtune/report/inspect_report.h"

namespace memtune::report {
namespace {

using snapshot::DeviceInspect;
using snapshot::PoolType;

constexpr double kPercent = 100.0;

std::string B(std::int64_t bytes) { return FormatBytesBinary(bytes); }

std::string Event(std::int64_t index) {
  return index < 0 ? std::string("before the first entry") : "after entry " + FormatWithCommas(index);
}

std::string SiteLine(const snapshot::SiteUsage& site) {
  std::string where;
  for (const auto& f : site.frames) {
    if (!where.empty()) where += " < ";
    where += snapshot::FormatFrame(f);
  }
  if (where.empty()) where = "<no stack recorded>";
  return fmt::format("    {:>12}  {:>5} x  {}\n", B(site.bytes), site.count, where);
}

void State(std::string& out, const DeviceInspect& d) {
  out += fmt::format("  reserved              {:>12}  ({} B) in {} segment{}\n", B(d.reserved_bytes),
                     FormatWithCommas(d.reserved_bytes), d.segments, d.segments == 1 ? "" : "s");
  out += fmt::format("  allocated             {:>12}  ({} live allocation{})\n", B(d.allocated_bytes),
                     d.live_allocations, d.live_allocations == 1 ? "" : "s");
  out += fmt::format("  active                {:>12}\n", B(d.active_bytes));
  out += fmt::format("  requested             {:>12}\n", B(d.requested_bytes));
  out += fmt::format("  inactive split        {:>12}  ({} block{})\n", B(d.inactive_split_bytes),
                     d.inactive_split_blocks, d.inactive_split_blocks == 1 ? "" : "s");
  out += fmt::format("  reserved unallocated  {:>12}\n", B(d.reserved_unallocated_bytes));
  out += fmt::format("  largest free block    {:>12}  (fragmentation {:.1f}%: the largest request "
                     "served without new memory vs. reserved unallocated)\n",
                     B(d.largest_free_block_bytes), d.fragmentation * kPercent);
  if (d.pools.empty()) return;
  out += "  segments by pool:\n";
  out += fmt::format("    {:<6} {:<10} {:>8} {:>12} {:>12} {:>13}\n", "pool", "kind", "segments",
                     "reserved", "allocated", "largest free");
  for (const auto& p : d.pools) {
    std::string pool = p.pool == PoolType::kSmall ? "small" : "large";
    if (p.pool_id != std::pair<std::int64_t, std::int64_t>{0, 0}) {
      pool += fmt::format(" (private {},{})", p.pool_id.first, p.pool_id.second);
    }
    out += fmt::format("    {:<6} {:<10} {:>8} {:>12} {:>12} {:>13}\n", pool,
                       p.expandable ? "expandable" : "native", p.segments, B(p.reserved_bytes),
                       B(p.allocated_bytes), B(p.largest_free_block_bytes));
  }
}

void Trace(std::string& out, const DeviceInspect& d) {
  const auto& t = d.trace;
  if (!t.present) {
    out += "  trace: none recorded (peaks are the current values)\n";
    return;
  }
  std::string span;
  if (t.first_time_us >= 0) span = fmt::format(" over {} us", FormatWithCommas(t.last_time_us - t.first_time_us));
  out += fmt::format("  trace: {} entr{}{}", FormatWithCommas(t.entries), t.entries == 1 ? "y" : "ies", span);
  if (t.starts_mid_run) {
    out += fmt::format("; starts mid-run ({} reserved, {} requested before the first entry)\n",
                       B(t.reserved_at_start_bytes), B(t.requested_at_start_bytes));
  } else {
    out += "; complete (nothing reserved before the first entry)\n";
  }
  out += fmt::format("    peak reserved         {:>12}  {}\n", B(t.peak_reserved_bytes), Event(t.peak_reserved_event));
  out += fmt::format("    peak live (requested) {:>12}  {}; live then:\n", B(t.peak_requested_bytes),
                     Event(t.peak_requested_event));
  for (const auto& site : t.live_at_peak) out += "  " + SiteLine(site);
  if (t.ooms.empty()) {
    out += "    OOMs: none recorded\n";
    return;
  }
  for (const auto& o : t.ooms) {
    out += fmt::format("    OOM at entry {}: tried to allocate {} with {} free on the device; "
                       "reserved {}, live requested {}\n",
                       FormatWithCommas(o.event_index), B(o.size_bytes), B(o.device_free_bytes),
                       B(o.reserved_bytes), B(o.requested_bytes));
  }
}

}  // namespace

const char* SnapshotFormatName(snapshot::SnapshotFormat format) {
  switch (format) {
    case snapshot::SnapshotFormat::kCurrent: return "current";
    case snapshot::SnapshotFormat::kHistory: return "history";
    case snapshot::SnapshotFormat::kSegmentList: return "segment_list";
  }
  return "current";
}

std::string DescribeSettings(const snapshot::AllocatorSettings& s) {
  if (!s.present) return "not recorded (snapshot older than PyTorch ~2.4)";
  std::string divisions;
  for (const auto& [mib, d] : s.roundup_power2_divisions) {
    if (d != 0) divisions += fmt::format("{}{}MiB:{}", divisions.empty() ? "" : ",", mib, d);
  }
  return fmt::format(
      "PYTORCH_CUDA_ALLOC_CONF=\"{}\"; expandable_segments: {}; max_split_size: {}; "
      "garbage_collection_threshold: {}; roundup_power2_divisions: {}",
      s.alloc_conf, s.expandable_segments ? "True" : "False",
      s.max_split_size_bytes < 0 ? std::string("unlimited") : B(s.max_split_size_bytes),
      s.garbage_collection_threshold, divisions.empty() ? std::string("off") : "[" + divisions + "]");
}

std::string RenderInspectText(const snapshot::InspectReport& report) {
  std::string out = fmt::format("snapshot format: {}\nallocator settings: {}\n",
                                SnapshotFormatName(report.format), DescribeSettings(report.settings));
  for (const DeviceInspect& d : report.devices) {
    out += fmt::format("\ndevice {}\n", d.device);
    State(out, d);
    out += fmt::format("  top allocation sites by live bytes ({} frame{}, innermost first):\n",
                       report.options.frames_depth, report.options.frames_depth == 1 ? "" : "s");
    if (d.top_sites.empty()) out += "    none\n";
    for (const auto& site : d.top_sites) out += SiteLine(site);
    Trace(out, d);
    for (const auto& note : d.notes) out += "  note: " + note + "\n";
  }
  return out;
}

}  // namespace memtune::report
