// Gathering what every reader finds in the inputs.
#include "diagnose/findings.h"

#include <cctype>

#include "diagnose/text_scan.h"
#include "memtune/snapshot/replay.h"

namespace memtune::diagnose {
namespace {

bool IsWordChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// "loss_sum += loss" keeps every step's autograd graph alive (PyTorch FAQ, "My model reports
// cuda runtime error(2): out of memory": don't accumulate history across the training loop);
// "+= loss.item()" / ".detach()" does not.
bool AccumulatesLoss(std::string_view line) {
  const std::size_t pos = line.find("+= loss");
  if (pos == std::string_view::npos) return false;
  const std::string_view rest = line.substr(pos + 7);
  if (!rest.empty() && IsWordChar(rest.front())) return false;
  for (const char* keep : {".item(", ".detach(", ".cpu(", ".tolist("}) {
    if (rest.starts_with(keep)) return false;
  }
  return true;
}

// `lower`: the line in lower case.
bool MentionsCudaGraph(std::string_view lower) {
  for (const char* key : {"cuda graph", "cudagraph", "make_graphed_callables", "cuda_graph"}) {
    if (lower.find(key) != std::string_view::npos) return true;
  }
  return false;
}

bool SetsExpandable(std::string_view line) {
  return line.find("expandable_segments:True") != std::string_view::npos &&
         line.find("try setting") == std::string_view::npos &&
         line.find("not supported with nccl_ub") == std::string_view::npos &&
         line.find("NCCL_GRAPH_REGISTER") == std::string_view::npos;
}

bool MentionsUnallocated(std::string_view line) {
  if (line.find("is reserved by PyTorch but unallocated") != std::string_view::npos) return false;
  return SizeBefore(line, "reserved-but-unallocated") ||
         SizeBefore(line, "reserved but unallocated");
}

// A user's account of every rank's process holding memory on one GPU ("the processes on GPUs
// 1, 2 and 3 use memory on GPU0"): the device-0 context / map_location problem.
bool OtherRanksOnOneGpu(std::string_view lower) {
  auto has = [lower](const char* key) { return lower.find(key) != std::string_view::npos; };
  return has("processes") && has("gpus") && (has("on gpu0") || has("on gpu 0") || has("on cuda:0"));
}

void ReadMentions(const std::string& source, const std::string& text, Findings& out) {
  bool oom_seen = false;
  for (const Line& line : SplitLines(text)) {
    const std::string_view l = line.text;
    auto mention = [&] { return Mention{source, line.number, Excerpt(l)}; };
    const std::string lower = ToLower(l);
    if (AccumulatesLoss(l)) out.loss_accumulation.push_back(mention());
    if (MentionsCudaGraph(lower)) out.cuda_graph_mentions.push_back(mention());
    if (SetsExpandable(l)) out.expandable_set.push_back(mention());
    if (MentionsUnallocated(l)) out.unallocated_mentions.push_back(mention());
    if (OtherRanksOnOneGpu(lower)) out.cross_rank_device.push_back(mention());
    if (!oom_seen && MentionsOom(l)) {
      oom_seen = true;
      out.oom_mentions.push_back(mention());
    }
  }
}

// The failing request's stack as traceback lines, for FindPhase.
std::string StackText(const snapshot::Snapshot& snap, snapshot::StackId stack) {
  std::string text;
  if (stack < 0 || static_cast<std::size_t>(stack) >= snap.stacks.size()) return text;
  for (std::int32_t frame : snap.stacks[stack]) {
    if (frame < 0 || static_cast<std::size_t>(frame) >= snap.frames.size()) continue;
    const snapshot::Frame& f = snap.frames[frame];
    text +=
        "  File \"" + f.filename + "\", line " + std::to_string(f.line) + ", in " + f.name + "\n";
  }
  return text;
}

}  // namespace

void ReadText(const std::string& source, const std::string& text, Findings& out) {
  for (OomText& m : FindOomMessages(text)) out.ooms.push_back({source, std::move(m)});
  for (ConfigError& e : FindConfigErrors(text)) out.config_errors.push_back({source, std::move(e)});
  if (auto phase = FindPhase(text)) out.phases.push_back({source, std::move(*phase)});
  LogMemory log = ParseLogMemory(text);
  if (!log.samples.empty() || log.theoretical || !log.held_by_other_engine.empty()) {
    out.logs.push_back({source, std::move(log)});
  }
  if (auto smi = ParseNvidiaSmi(text)) out.smi.push_back({source, std::move(*smi)});
  ReadMentions(source, text, out);
}

Status ReadSnapshot(const std::string& source, const snapshot::Snapshot& snap,
                    alloc::TorchVersion version, Findings& out) {
  bool has_trace = false;
  for (const auto& trace : snap.device_traces) has_trace |= !trace.empty();
  if (!has_trace) {
    return InvalidInput(source, "the snapshot has no allocation trace, so no OOM event to replay",
                        "record one with torch.cuda.memory._record_memory_history() before the "
                        "OOM and dump it from an OOM observer");
  }
  snapshot::ReplayOptions own;
  own.torch_version = version;
  MEMTUNE_TRY(const snapshot::ReplayReport recorded, snapshot::Replay(snap, own));
  snapshot::ReplayOptions expandable = own;
  expandable.alloc_conf = "expandable_segments:True";
  MEMTUNE_TRY(const snapshot::ReplayReport what_if, snapshot::Replay(snap, expandable));
  bool any = false;
  for (std::size_t i = 0; i < recorded.devices.size(); ++i) {
    const snapshot::DeviceReplay& d = recorded.devices[i];
    if (!d.recorded.oom) continue;
    any = true;
    SnapshotFinding f;
    f.source = source;
    f.device = d.device;
    f.request_bytes = d.recorded.oom_request_bytes;
    f.device_free_bytes = d.recorded.oom_device_free_bytes;
    f.reserved_bytes = d.recorded.oom_reserved_bytes;
    f.unallocated_bytes = d.recorded.oom_reserved_unallocated_bytes;
    f.capacity_bytes = d.capacity_bytes.value_or(0);
    f.recorded_expandable = d.expandable_segments;
    if (i < what_if.devices.size()) {
      f.expandable_oom = what_if.devices[i].replayed.oom;
      f.expandable_peak_reserved_bytes = what_if.devices[i].replayed.peak_reserved_bytes;
    }
    const auto& trace = snap.device_traces[static_cast<std::size_t>(d.device)];
    const auto index = static_cast<std::size_t>(d.recorded.oom_event_index);
    if (index < trace.size()) f.phase = FindPhase(StackText(snap, trace[index].stack));
    out.snapshots.push_back(std::move(f));
  }
  if (!any) out.snapshots_without_oom.push_back(source);
  return OkStatus();
}

bool HasAnything(const Findings& f) {
  return !f.ooms.empty() || !f.config_errors.empty() || !f.logs.empty() || !f.smi.empty() ||
         !f.snapshots.empty() || !f.loss_accumulation.empty() || !f.oom_mentions.empty() ||
         !f.unallocated_mentions.empty() || !f.cross_rank_device.empty() || !f.phases.empty();
}

}  // namespace memtune::diagnose
