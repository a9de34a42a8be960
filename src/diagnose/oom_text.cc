// Out-of-memory messages: PyTorch's allocator text of every release, CUDA, NCCL and cuBLAS.
#include "memtune/diagnose/oom_text.h"

#include <cctype>

#include "diagnose/text_scan.h"

namespace memtune::diagnose {
namespace {

// A PyTorch message is one line, but reporters wrap or indent it: read on for at most this
// many lines, up to a blank line or the next message.
constexpr int kMaxMessageLines = 8;
constexpr std::size_t kMaxWindowChars = 4096;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

std::optional<std::int64_t> FirstOf(std::string_view w, std::initializer_list<const char*> keys,
                                    bool after) {
  for (const char* key : keys) {
    auto v = after ? SizeAfter(w, key) : SizeBefore(w, key);
    if (v) return v;
  }
  return std::nullopt;
}

// PyTorch <= 2.0: "(GPU 0; 31.74 GiB total capacity; 28.82 GiB already allocated; 577.12 MiB
// free; [1.00 GiB allowed;] 29.97 GiB reserved in total by PyTorch)"; <= 1.4 says "cached".
void ReadParenthesisedForm(std::string_view w, OomText& m) {
  const bool reserved_form = w.find("reserved in total") != std::string_view::npos;
  m.era = reserved_form
              ? OomEra::kReservedInTotal
              : (w.find(" cached") != std::string_view::npos ? OomEra::kCached : OomEra::kUnknown);
  m.total_bytes = SizeBefore(w, "total capacity");
  m.allocated_bytes = SizeBefore(w, "already allocated");
  m.free_bytes = FirstOf(w, {" free;", " free)", " free "}, false);
  m.reserved_bytes = FirstOf(w, {"reserved in total", " cached)", " cached;"}, false);
  m.allowed_bytes = SizeBefore(w, " allowed;");
  for (const char* key : {"(GPU ", "(NPU ", "(XPU "}) {
    std::size_t pos = w.find(key);
    if (pos == std::string_view::npos) continue;
    pos += 5;
    if (auto index = SmallInt(ScanNumber(w, pos))) m.device = *index;
    break;
  }
}

void ReadOtherProcesses(std::string_view w, OomText& m) {
  // "Process 3721648 has 414.00 MiB memory in use." (2.1+, one per other process).
  std::size_t pos = 0;
  while ((pos = w.find("Process ", pos)) != std::string_view::npos) {
    pos += 8;
    if (pos >= w.size() || !IsDigit(w[pos])) continue;
    std::size_t p = pos;
    auto pid = ScanNumber(w, p);
    if (!pid || w.substr(p, 5) != " has ") continue;
    p += 5;
    if (auto bytes = ScanSize(w, p))
      m.other_processes.push_back({static_cast<std::int64_t>(*pid), *bytes});
  }
}

// The device index after "GPU " of the 2.1+ forms; 2.2-2.3 stream it as a raw byte.
void ReadDevice(std::string_view w, OomText& m) {
  std::size_t pos = w.find("GPU ");
  if (pos == std::string_view::npos || pos + 4 >= w.size()) return;
  pos += 4;
  if (IsDigit(w[pos])) {
    if (auto index = SmallInt(ScanNumber(w, pos))) m.device = *index;
    return;
  }
  const bool blank = w.substr(pos).starts_with(" has a total capacity");  // the byte vanished
  if (blank || w.substr(pos + 1).starts_with(" has a total capacity")) {
    m.era = OomEra::kV22;
    const auto byte = static_cast<unsigned char>(w[pos]);
    if (!blank && byte < 0x20) m.device = byte;
  }
}

// PyTorch 2.1+: "GPU 0 has a total capacity of X of which Y is free. [Process N has Z memory
// in use.] Including non-PyTorch memory, this process has W memory in use. [A allowed; ]Of
// the allocated memory B is allocated by PyTorch, [with P allocated in private pools (e.g.,
// CUDA Graphs), ]and R is reserved by PyTorch but unallocated."
void ReadSentenceForm(std::string_view w, OomText& m) {
  if (w.find("total capacty of") != std::string_view::npos) {
    m.era = OomEra::kV21;
    m.total_bytes = SizeAfter(w, "total capacty of ");
  } else if (w.find("total capacity of") != std::string_view::npos) {
    m.era = OomEra::kCurrent;
    m.total_bytes = SizeAfter(w, "total capacity of ");
  }
  ReadDevice(w, m);
  m.free_bytes = SizeAfter(w, " of which ");
  m.process_bytes = FirstOf(w, {"this process has ", "Process has "}, true);
  ReadOtherProcesses(w, m);
  m.allocated_bytes = SizeAfter(w, "Of the allocated memory ");
  if (w.find("allocated in private pools") != std::string_view::npos) {
    m.private_pool_bytes = SizeBefore(w, "allocated in private pools");
  }
  m.unallocated_bytes = SizeBefore(w, "is reserved by PyTorch but unallocated");
  m.allowed_bytes = SizeBefore(w, " allowed; ");
  // Condensed by a reporter: "GPU 1 total: 178.36 GiB | Free: 44.84 GiB | PyTorch allocated".
  if (!m.total_bytes) m.total_bytes = FirstOf(w, {"total: ", "Total: "}, true);
  if (!m.free_bytes) m.free_bytes = FirstOf(w, {"Free: ", "free: "}, true);
  if (!m.allocated_bytes) m.allocated_bytes = SizeAfter(w, "PyTorch allocated: ");
  // MPS: "MPS backend out of memory (MPS allocated: A, other allocations: O, max allowed: M)."
  if (!m.allocated_bytes) m.allocated_bytes = SizeAfter(w, "MPS allocated: ");
  if (!m.total_bytes) m.total_bytes = SizeAfter(w, "max allowed: ");
  if (m.allocated_bytes && m.unallocated_bytes) {
    m.reserved_bytes = *m.allocated_bytes + *m.unallocated_bytes;
  }
}

void ReadAllocatorMessage(std::string_view w, OomText& m) {
  m.source = OomSource::kCachingAllocator;
  if (w.find("more than 1EB") != std::string_view::npos) {
    m.era = OomEra::kExabyte;
    return;
  }
  m.requested_bytes = SizeAfter(w, "Tried to allocate ");
  if (!m.requested_bytes) m.requested_bytes = SizeAfter(w, "trying to allocate ");  // XLA
  if (w.find("total capacity;") != std::string_view::npos ||
      w.find("already allocated") != std::string_view::npos) {
    ReadParenthesisedForm(w, m);
  } else {
    ReadSentenceForm(w, m);
  }
  if (m.reserved_bytes && m.allocated_bytes && !m.unallocated_bytes) {
    m.unallocated_bytes = *m.reserved_bytes - *m.allocated_bytes;
  }
  if (w.find("PYTORCH_ALLOC_CONF") != std::string_view::npos) {
    m.alloc_conf_variable = "PYTORCH_ALLOC_CONF";
  } else if (w.find("PYTORCH_CUDA_ALLOC_CONF") != std::string_view::npos) {
    m.alloc_conf_variable = "PYTORCH_CUDA_ALLOC_CONF";
  }
}

std::optional<std::int64_t> NcclFailedBytes(std::string_view line) {
  std::size_t pos = FindNoCase(line, "Failed to CUDA ");
  if (pos == std::string_view::npos) return std::nullopt;
  while (pos < line.size() && !IsDigit(line[pos])) ++pos;
  return ScanSize(line, pos);
}

bool IsNcclOom(std::string_view line) {
  return line.find("NCCL WARN") != std::string_view::npos &&
         (line.find("'out of memory'") != std::string_view::npos ||
          line.find("Failed to CUDA") != std::string_view::npos);
}

bool StartsAllocatorMessage(std::string_view line) {
  return FindNoCase(line, "out of memory") != std::string_view::npos ||
         line.find("Tried to allocate") != std::string_view::npos;
}

// Joins lines [i, ...) into the message window: up to a blank line or the next message.
std::string Window(const std::vector<Line>& lines, std::size_t i, std::size_t& end) {
  std::string w(lines[i].text);
  end = i + 1;
  while (end < lines.size() && end < i + kMaxMessageLines && w.size() < kMaxWindowChars) {
    const std::string_view next = lines[end].text;
    if (next.find_first_not_of(" \t") == std::string_view::npos) break;
    if (FindNoCase(next, "out of memory") != std::string_view::npos) break;
    w += ' ';
    w += next;
    ++end;
  }
  return w.substr(0, kMaxWindowChars);
}

OomText Start(const Line& line, OomSource source) {
  OomText m;
  m.source = source;
  m.line = line.number;
  m.line_text = Excerpt(line.text);
  m.rank = RankOf(line.text);
  return m;
}

}  // namespace

namespace {
constexpr model::EnumName<OomEra> kEraNames[] = {
    {"unknown", OomEra::kUnknown},
    {"<=1.4 cached", OomEra::kCached},
    {"1.5-2.0 reserved in total", OomEra::kReservedInTotal},
    {"2.1", OomEra::kV21},
    {"2.2-2.3", OomEra::kV22},
    {">=2.4", OomEra::kCurrent},
    {"1EB", OomEra::kExabyte},
};
}  // namespace

std::span<const model::EnumName<OomEra>> EnumNames(OomEra) { return kEraNames; }

const char* OomEraName(OomEra era) { return model::NameOf(era); }

int OomText::number_count() const {
  int n = 0;
  for (const auto* v :
       {&requested_bytes, &total_bytes, &free_bytes, &process_bytes, &allocated_bytes}) {
    n += v->has_value() ? 1 : 0;
  }
  n += (reserved_bytes || unallocated_bytes) ? 1 : 0;
  return n;
}

std::vector<OomText> FindOomMessages(std::string_view text) {
  const std::vector<Line> lines = SplitLines(text);
  std::vector<OomText> out;
  std::size_t covered = 0;  // lines before this index belong to an earlier message
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string_view l = lines[i].text;
    if (IsNcclOom(l)) {
      auto failed = NcclFailedBytes(l);
      if (failed && !out.empty() && out.back().source == OomSource::kNccl &&
          !out.back().failed_bytes) {
        out.back().failed_bytes = failed;
        continue;
      }
      out.push_back(Start(lines[i], OomSource::kNccl));
      out.back().failed_bytes = failed;
    } else if (l.find("CUBLAS_STATUS_ALLOC_FAILED") != std::string_view::npos) {
      out.push_back(Start(lines[i], OomSource::kCublas));
    } else if (FindNoCase(l, "CUDA error: out of memory") != std::string_view::npos) {
      out.push_back(Start(lines[i], OomSource::kCudaError));
    } else if (i >= covered && StartsAllocatorMessage(l)) {
      std::size_t end = i + 1;
      const std::string w = Window(lines, i, end);
      out.push_back(Start(lines[i], OomSource::kCachingAllocator));
      ReadAllocatorMessage(w, out.back());
      covered = end;
    }
  }
  return out;
}

bool MentionsOom(std::string_view text) {
  if (text.find("OutOfMemory") != std::string_view::npos ||
      FindNoCase(text, "out of memory") != std::string_view::npos) {
    return true;
  }
  // "OOM", "OOMs", "oom" as a word (not "room", "zoom", "bloom").
  auto is_letter = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; };
  for (std::size_t pos = FindNoCase(text, "oom"); pos != std::string_view::npos;
       pos = FindNoCase(text, "oom", pos + 1)) {
    const bool starts = pos == 0 || !is_letter(text[pos - 1]);
    const std::size_t end = pos + 3;
    const bool ends = end >= text.size() || !is_letter(text[end]) ||
                      (text[end] == 's' && (end + 1 >= text.size() || !is_letter(text[end + 1])));
    if (starts && ends) return true;
  }
  return false;
}

}  // namespace memtune::diagnose
