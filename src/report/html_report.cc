// The HTML page of `memtune report` (the embedded front end, report/web/) and the page data
// pieces the job and snapshot reports share.
#include "memtune/report/html_report.h"

#include <algorithm>
#include <cstring>

#include "memtune/core/embedded.h"
#include "memtune/report/diagnose_report.h"
#include "report/report_data.h"

namespace memtune {
// report/web/ compiled in by CMake (cmake/report_front_end.cmake); the charting library's
// files are missing when the build had no npm.
extern const EmbeddedFile kReportWebFiles[];
}  // namespace memtune

namespace memtune::report {
namespace {

using nlohmann::ordered_json;

const char* WebFile(const char* name) {
  for (const EmbeddedFile* f = kReportWebFiles; f->name != nullptr; ++f) {
    if (std::strcmp(f->name, name) == 0) return f->contents;
  }
  return nullptr;
}

// Replaces every `token` in `page` by `text`, never looking inside what it inserted.
void Fill(std::string& page, std::string_view token, std::string_view text) {
  for (std::size_t at = page.find(token); at != std::string::npos;
       at = page.find(token, at + text.size())) {
    page.replace(at, token.size(), text);
  }
}

// Text inside a <script> element must not close it: "</" becomes "<\/", which JSON and
// JavaScript strings read as the same two characters.
std::string ScriptSafe(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    out += text[i];
    if (text[i] == '<' && i + 1 < text.size() && text[i + 1] == '/') out += '\\';
  }
  return out;
}

std::string HtmlEscape(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace

int StringTable::Index(const std::string& text) {
  const auto [it, added] = index_.emplace(text, static_cast<int>(strings_.size()));
  if (added) strings_.push_back(text);
  return it->second;
}

ordered_json SegmentMapJson(const std::vector<MapSegment>& segments) {
  ordered_json list = ordered_json::array();
  std::int64_t reserved = 0, allocated = 0, largest_free = 0;
  for (const MapSegment& s : segments) {
    ordered_json blocks = ordered_json::array();
    for (const MapBlock& b : s.blocks) {
      blocks.push_back({b.offset_bytes, b.size_bytes, b.allocated ? 1 : 0});
      if (b.allocated) allocated += b.size_bytes;
      if (!b.allocated) largest_free = std::max(largest_free, b.size_bytes);
    }
    reserved += s.size_bytes;
    list.push_back({{"address", s.address},
                    {"size", s.size_bytes},
                    {"expandable", s.expandable},
                    {"small", s.small_pool},
                    {"blocks", std::move(blocks)}});
  }
  return {{"reserved_bytes", reserved},
          {"allocated_bytes", allocated},
          {"free_bytes", reserved - allocated},
          {"largest_free_bytes", largest_free},
          {"segments", std::move(list)}};
}

ordered_json EmbedJson(const std::string& text) { return ordered_json::parse(text); }

ordered_json ReportHead(const std::string& kind, const std::string& title) {
  return {{"schema", "memtune.report/1"}, {"kind", kind}, {"title", title}};
}

std::string DumpReportData(const ordered_json& data) {
  return data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string RenderDiagnosisReportData(const diagnose::Diagnosis& diagnosis,
                                      const std::string& name) {
  ordered_json data = ReportHead("oom", "memtune report: " + name);
  data["diagnosis"] = EmbedJson(RenderDiagnoseJson(diagnosis));
  return DumpReportData(data);
}

bool HtmlFrontEndAvailable() {
  return WebFile("uPlot.iife.min.js") != nullptr && WebFile("uPlot.min.css") != nullptr;
}

Result<std::string> RenderHtmlReport(std::string_view data_json, std::string_view title) {
  if (!HtmlFrontEndAvailable()) {
    return Unsupported("--format html",
                       "this memtune was built without the report front end (no npm, npm ci "
                       "failed, or MEMTUNE_REPORT_FRONT_END=OFF when it was configured)",
                       "install npm and reconfigure, or use --format json (docs/report.md)");
  }
  std::string page = WebFile("template.html");
  Fill(page, "@@TITLE@@", HtmlEscape(title));
  Fill(page, "@@UPLOT_CSS@@", WebFile("uPlot.min.css"));
  Fill(page, "@@REPORT_CSS@@", WebFile("report.css"));
  Fill(page, "@@UPLOT_JS@@", ScriptSafe(WebFile("uPlot.iife.min.js")));
  Fill(page, "@@REPORT_JS@@", ScriptSafe(WebFile("report.js")));
  Fill(page, "@@DATA@@", ScriptSafe(data_json));
  return page;
}

}  // namespace memtune::report
