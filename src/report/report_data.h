// Pieces of the report page data (report/html_report.h) that the job and the snapshot
// reports share: the timeline's label columns and the segment map, as JSON.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace memtune::report {

// Interns strings into a table: the page stores one small index per event instead of text.
class StringTable {
 public:
  // The index of `text`, adding it on first use.
  int Index(const std::string& text);
  const std::vector<std::string>& strings() const { return strings_; }

 private:
  std::map<std::string, int> index_;
  std::vector<std::string> strings_;
};

// One block of a segment map: offset from the segment start, size and state.
struct MapBlock {
  std::int64_t offset_bytes = 0;
  std::int64_t size_bytes = 0;
  bool allocated = false;  // allocated or awaiting a stream's use; false = free (cached)
};

struct MapSegment {
  std::uint64_t address = 0;
  std::int64_t size_bytes = 0;
  bool expandable = false;
  bool small_pool = false;
  std::vector<MapBlock> blocks;  // address order
};

// {"segments": [{"address", "size", "expandable", "small", "blocks": [[offset, size, 0|1],
// ...]}], "reserved_bytes", "allocated_bytes", "free_bytes", "largest_free_bytes"}.
nlohmann::ordered_json SegmentMapJson(const std::vector<MapSegment>& segments);

// The JSON text of another renderer, parsed to embed it (the renderers own their schemas).
nlohmann::ordered_json EmbedJson(const std::string& text);

// The document's head: {"schema": "memtune.report/1", "kind": kind, "title": title}.
nlohmann::ordered_json ReportHead(const std::string& kind, const std::string& title);

// The page data as text: compact (one line), newline-terminated.
std::string DumpReportData(const nlohmann::ordered_json& data);

}  // namespace memtune::report
