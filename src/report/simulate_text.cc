// Text rendering of `memtune simulate` and the CSV timeline.
#include <cstdio>
#include <sstream>
#include <string>

#include "memtune/core/units.h"
#include "memtune/report/simulate_report.h"

namespace memtune::report {
namespace {

constexpr int kLabelWidth = 32;   // characters of the row-label column
constexpr int kColumnWidth = 30;  // characters of each run column

std::string ConfigName(const alloc::AllocatorConfig& c) {
  return c.settings.empty() ? "(default config)" : c.settings;
}

std::string Pad(const std::string& s, int width) {
  return s.size() >= static_cast<std::size_t>(width) ? s + " "
                                                     : s + std::string(width - s.size(), ' ');
}

void Row(std::ostringstream& out, const std::string& label, const std::vector<std::string>& cells) {
  std::string line = Pad(label, kLabelWidth);
  for (std::size_t i = 0; i < cells.size(); ++i) {
    line += i + 1 < cells.size() ? Pad(cells[i], kColumnWidth) : cells[i];
  }
  out << line << "\n";
}

template <typename F>
std::vector<std::string> Cells(const SimulateReport& r, F f) {
  std::vector<std::string> cells;
  for (const SimulateRun& run : r.runs) cells.push_back(f(run.summary));
  return cells;
}

std::string Bytes(std::int64_t b) { return FormatBytesBinary(b); }

void OomSection(std::ostringstream& out, const SimulateRun& run) {
  const auto& s = run.summary;
  out << "first OOM [" << ConfigName(run.config) << "]: ";
  if (!s.first_oom) {
    out << "none\n";
    return;
  }
  const alloc::FirstOom& f = *s.first_oom;
  out << "event " << f.event_index << " (line " << f.line << ", alloc '" << f.handle << "' of "
      << Bytes(f.requested_bytes) << (f.label.empty() ? "" : ", " + f.label) << ")\n  " << f.message
      << "\n";
}

void NotesSection(std::ostringstream& out, const SimulateRun& run) {
  const std::string name = ConfigName(run.config);
  for (const std::string& n : run.config.not_simulated)
    out << "not simulated [" << name << "]: " << n << "\n";
  for (const std::string& n : run.summary.notes) out << "note [" << name << "]: " << n << "\n";
  if (run.summary.notes_dropped > 0) {
    out << "note [" << name << "]: " << run.summary.notes_dropped << " more notes not shown\n";
  }
}

}  // namespace

std::string RenderSimulateText(const SimulateReport& r) {
  std::ostringstream out;
  const std::int64_t events = r.runs.empty() ? 0 : r.runs[0].summary.events;
  out << "trace      " << r.trace << " (" << events << " events)\n";
  out << "PyTorch    " << r.torch_version.ToString() << "\n";
  out << "capacity   " << Bytes(r.capacity_bytes) << " (non-PyTorch " << Bytes(r.non_pytorch_bytes)
      << ")\n\n";
  std::vector<std::string> names;
  for (const SimulateRun& run : r.runs) names.push_back(ConfigName(run.config));
  Row(out, "", names);
  using S = alloc::ReplaySummary;
  Row(out, "peak allocated", Cells(r, [](const S& s) { return Bytes(s.peak_allocated_bytes); }));
  Row(out, "peak reserved", Cells(r, [](const S& s) { return Bytes(s.peak_reserved_bytes); }));
  Row(out, "reserved-unallocated at peak", Cells(r, [](const S& s) {
        return Bytes(s.reserved_unallocated_at_peak_bytes) +
               (s.peak_reserved_event_index >= 0
                    ? " (event " + std::to_string(s.peak_reserved_event_index) + ")"
                    : "");
      }));
  Row(out, "final allocated / reserved", Cells(r, [](const S& s) {
        return Bytes(s.final_allocated_bytes) + " / " + Bytes(s.final_reserved_bytes);
      }));
  Row(out, "segments peak / final", Cells(r, [](const S& s) {
        return std::to_string(alloc::All(s.stats.segment).peak) + " / " +
               std::to_string(alloc::All(s.stats.segment).current);
      }));
  Row(out, "device allocs / frees", Cells(r, [](const S& s) {
        return std::to_string(s.stats.num_device_alloc) + " / " +
               std::to_string(s.stats.num_device_free);
      }));
  Row(out, "alloc retries",
      Cells(r, [](const S& s) { return std::to_string(s.stats.num_alloc_retries); }));
  Row(out, "OOMs", Cells(r, [](const S& s) { return std::to_string(s.ooms); }));
  out << "\n";
  for (const SimulateRun& run : r.runs) OomSection(out, run);
  for (const SimulateRun& run : r.runs) NotesSection(out, run);
  return out.str();
}

void WriteTimelineCsvHeader(std::ostream& out, std::size_t runs) {
  out << "event,line,op,label";
  for (std::size_t k = 0; k < runs; ++k) {
    const std::string p = k == 0 ? "" : "compare_";
    out << "," << p << "allocated_bytes," << p << "reserved_bytes," << p << "active_bytes," << p
        << "requested_bytes," << p << "segments," << p << "ooms";
  }
  out << "\n";
}

void WriteTimelineCsvRow(std::ostream& out, std::int64_t event_index,
                         const alloc::TraceEvent& event,
                         const std::vector<alloc::TimelineSample>& samples) {
  out << event_index << ',' << event.line << ',' << alloc::TraceOpName(event.op) << ',';
  if (event.label.find_first_of(",\"\n") != std::string_view::npos) {
    out << '"';
    for (char c : event.label) out << (c == '"' ? "\"\"" : std::string(1, c));
    out << '"';
  } else {
    out << event.label;
  }
  for (const alloc::TimelineSample& s : samples) {
    out << ',' << s.allocated_bytes << ',' << s.reserved_bytes << ',' << s.active_bytes << ','
        << s.requested_bytes << ',' << s.segments << ',' << s.ooms;
  }
  out << '\n';
}

}  // namespace memtune::report
