// nvidia-smi table and CSV output.
#include "memtune/diagnose/nvidia_smi.h"

#include "diagnose/text_scan.h"

namespace memtune::diagnose {
namespace {

constexpr std::int64_t kMiB = 1LL << 20;

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    std::size_t end = s.find(sep, start);
    if (end == std::string_view::npos) end = s.size();
    std::string_view part = s.substr(start, end - start);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
    out.push_back(part);
    start = end + 1;
  }
  return out;
}

std::optional<std::int64_t> CsvSize(std::string_view cell, bool header_says_mib) {
  std::size_t pos = 0;
  if (auto bytes = ScanSize(cell, pos)) return bytes;
  pos = 0;
  auto n = ScanNumber(cell, pos);
  if (!n || !header_says_mib) return std::nullopt;
  return ScaleBytes(n, kMiB);
}

// "| N/A 34C P0 71W / 700W |  81000MiB / 81559MiB | 0% Default |"
void TableRow(const Line& line, SmiReport& out) {
  const std::size_t slash = line.text.find("MiB /");
  if (slash == std::string_view::npos) return;
  std::size_t start = slash;
  while (start > 0 && line.text[start - 1] >= '0' && line.text[start - 1] <= '9') --start;
  auto used = ScanSize(line.text, start);
  std::size_t pos = slash + 5;
  while (pos < line.text.size() && line.text[pos] == ' ') ++pos;
  auto total = ScanSize(line.text, pos);
  if (!used || !total) return;
  out.gpus.push_back(
      {static_cast<int>(out.gpus.size()), *used, *total, line.number, Excerpt(line.text)});
}

// "|    0   N/A  N/A   12345      C   python      40000MiB |"
void ProcessRow(const Line& line, SmiReport& out) {
  std::string_view t = line.text;
  while (!t.empty() && (t.front() == '|' || t.front() == ' ')) t.remove_prefix(1);
  while (!t.empty() && (t.back() == '|' || t.back() == ' ')) t.remove_suffix(1);
  std::vector<std::string_view> words;
  for (std::string_view w : Split(t, ' ')) {
    if (!w.empty()) words.push_back(w);
  }
  if (words.size() < 4 || !words.back().ends_with("MiB")) return;
  std::size_t pos = 0;
  auto gpu = SmallInt(ScanNumber(words[0], pos));
  std::size_t mem_pos = 0;
  auto bytes = ScanSize(words.back(), mem_pos);
  std::optional<double> pid;
  for (std::size_t i = 1; i + 1 < words.size() && !pid; ++i) {
    const std::string_view next = words[i + 1];
    if (next == "C" || next == "G" || next == "C+G") {
      std::size_t p = 0;
      pid = ScanNumber(words[i], p);
    }
  }
  if (!gpu || !bytes || !pid) return;
  out.processes.push_back(
      {*gpu, static_cast<std::int64_t>(*pid), *bytes, line.number, Excerpt(line.text)});
}

bool ReadCsv(const std::vector<Line>& lines, SmiReport& out) {
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const auto header = Split(lines[i].text, ',');
    int used_col = -1, total_col = -1, index_col = -1;
    for (std::size_t c = 0; c < header.size(); ++c) {
      if (header[c].starts_with("memory.used")) used_col = static_cast<int>(c);
      if (header[c].starts_with("memory.total")) total_col = static_cast<int>(c);
      if (header[c] == "index") index_col = static_cast<int>(c);
    }
    if (used_col < 0 || total_col < 0) continue;
    const bool mib = lines[i].text.find("[MiB]") != std::string_view::npos;
    for (std::size_t j = i + 1; j < lines.size(); ++j) {
      const auto cells = Split(lines[j].text, ',');
      if (cells.size() != header.size()) break;
      auto used = CsvSize(cells[used_col], mib);
      auto total = CsvSize(cells[total_col], mib);
      if (!used || !total) break;
      int index = static_cast<int>(out.gpus.size());
      std::size_t p = 0;
      if (index_col >= 0) {
        if (auto n = SmallInt(ScanNumber(cells[index_col], p))) index = *n;
      }
      out.gpus.push_back({index, *used, *total, lines[j].number, Excerpt(lines[j].text)});
    }
    return true;
  }
  return false;
}

}  // namespace

std::optional<SmiReport> ParseNvidiaSmi(std::string_view text) {
  const std::vector<Line> lines = SplitLines(text);
  SmiReport out;
  if (!ReadCsv(lines, out)) {
    bool in_processes = false;
    for (const Line& line : lines) {
      if (line.text.find("Processes:") != std::string_view::npos) in_processes = true;
      if (in_processes) {
        ProcessRow(line, out);
      } else {
        TableRow(line, out);
      }
    }
  }
  if (out.gpus.empty() && out.processes.empty()) return std::nullopt;
  return out;
}

}  // namespace memtune::diagnose
