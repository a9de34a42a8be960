// ReplayTrace: drives Simulators from a trace stream and gathers the simulate figures.
#include "memtune/alloc/replay.h"

#include <algorithm>
#include <string>

namespace memtune::alloc {
namespace {

enum class HandleState : std::uint8_t { kUnused, kLive, kPending };

// One simulator and what is known about it during the replay.
struct Lane {
  explicit Lane(const SimulatorOptions& o) : sim(o) {}
  Simulator sim;
  ReplaySummary sum;
  std::vector<std::uint8_t> failed;  // per handle: its allocation raised OOM
  std::int64_t exabyte_ooms = 0;
  std::int64_t best_reserved_peak = 0;
  std::size_t max_notes = 20;

  void Note(std::string text) {
    if (sum.notes.size() < max_notes) {
      sum.notes.push_back(std::move(text));
    } else {
      ++sum.notes_dropped;
    }
  }
};

// Trace-level handle bookkeeping shared by every lane.
class Replayer {
 public:
  Replayer(std::istream& in, std::string_view source, const ReplayOptions& options)
      : reader_(in, std::string(source)), options_(options) {
    for (const SimulatorOptions& o : options.simulators) {
      lanes_.emplace_back(o);
      lanes_.back().max_notes = options.max_notes;
    }
  }

  Result<std::vector<ReplaySummary>> Run() {
    TraceEvent ev;
    std::vector<TimelineSample> samples(lanes_.size());
    for (std::int64_t index = 0;; ++index) {
      MEMTUNE_TRY(bool more, reader_.Next(ev));
      if (!more) break;
      Grow(ev.handle);
      MEMTUNE_RETURN_IF_ERROR(Apply(ev, index));
      for (std::size_t k = 0; k < lanes_.size(); ++k) samples[k] = Observe(lanes_[k], index);
      if (options_.on_event) options_.on_event(index, ev, samples);
      events_ = index + 1;
    }
    std::vector<ReplaySummary> out;
    for (Lane& lane : lanes_) out.push_back(Finish(lane));
    return out;
  }

 private:
  Error Misuse(const TraceEvent& ev, const std::string& message) const {
    return InvalidInput(reader_.source_name() + ":" + std::to_string(ev.line), message);
  }

  void Grow(HandleId h) {
    if (h < state_.size()) return;
    state_.resize(static_cast<std::size_t>(h) + 1, HandleState::kUnused);
    stream_used_.resize(state_.size(), 0);
    alloc_stream_.resize(state_.size(), 0);
    for (Lane& lane : lanes_) lane.failed.resize(state_.size(), 0);
  }

  void ReleaseHandle(HandleId h) {
    state_[h] = HandleState::kUnused;
    reader_.Release(h);
  }

  Status Apply(const TraceEvent& ev, std::int64_t index) {
    const HandleId h = ev.handle;
    switch (ev.op) {
      case TraceOp::kAlloc:
        return Alloc(ev, index);
      case TraceOp::kFree:
        return Free(ev);
      case TraceOp::kFreeCompleted:
        if (state_[h] != HandleState::kPending) {
          return Misuse(ev, "free_completed of handle '" + std::string(ev.handle_name) +
                                "', which has no free waiting for record_stream events");
        }
        for (Lane& lane : lanes_) lane.sim.FreeCompleted(h);
        pending_.erase(std::find(pending_.begin(), pending_.end(), h));
        ReleaseHandle(h);
        return OkStatus();
      case TraceOp::kRecordStream:
        if (state_[h] != HandleState::kLive) {
          return Misuse(ev, "record_stream on handle '" + std::string(ev.handle_name) +
                                "', which is not allocated");
        }
        if (ev.stream != alloc_stream_[h]) stream_used_[h] = 1;
        for (Lane& lane : lanes_) {
          if (!lane.failed[h]) lane.sim.RecordStream(h, ev.stream);
        }
        return OkStatus();
      case TraceOp::kEmptyCache:
        for (Lane& lane : lanes_) lane.sim.EmptyCache();
        for (HandleId p : pending_) ReleaseHandle(p);  // the sync completed every pending free
        pending_.clear();
        return OkStatus();
      case TraceOp::kSetCapacity:
        for (Lane& lane : lanes_) lane.sim.SetCapacity(ev.bytes);
        return OkStatus();
      case TraceOp::kSetNonPytorch:
        for (Lane& lane : lanes_) lane.sim.SetNonPytorchBytes(ev.bytes);
        return OkStatus();
      case TraceOp::kSetMemoryFraction:
        for (Lane& lane : lanes_) lane.sim.SetMemoryFraction(ev.fraction);
        return OkStatus();
      case TraceOp::kResetPeakStats:
        for (Lane& lane : lanes_) lane.sim.ResetPeakStats();
        return OkStatus();
    }
    return OkStatus();
  }

  Status Alloc(const TraceEvent& ev, std::int64_t index) {
    const HandleId h = ev.handle;
    if (state_[h] == HandleState::kLive) {
      return Misuse(
          ev, "alloc of handle '" + std::string(ev.handle_name) + "', which is already allocated");
    }
    if (state_[h] == HandleState::kPending)
      pending_.erase(std::find(pending_.begin(), pending_.end(), h));
    state_[h] = HandleState::kLive;
    stream_used_[h] = 0;
    alloc_stream_[h] = ev.stream;
    for (Lane& lane : lanes_) {
      const AllocResult r = lane.sim.Alloc(h, ev.bytes, ev.stream);
      lane.failed[h] = r.status == AllocStatus::kOutOfMemory;
      if (r.status == AllocStatus::kHandleInUse) {
        return Error{
            ErrorCode::kInternal,
            reader_.source_name() + ":" + std::to_string(ev.line),
            "simulator and trace disagree about handle '" + std::string(ev.handle_name) + "'",
            {}};
      }
      if (r.status != AllocStatus::kOutOfMemory) continue;
      if (lane.sim.last_oom()->exabyte_request) ++lane.exabyte_ooms;
      if (!lane.sum.first_oom) {
        FirstOom f;
        f.event_index = index;
        f.line = ev.line;
        f.handle = std::string(ev.handle_name);
        f.label = std::string(ev.label);
        f.requested_bytes = ev.bytes;
        f.message = lane.sim.LastOomMessage();
        f.report = *lane.sim.last_oom();
        lane.sum.first_oom = std::move(f);
      }
    }
    return OkStatus();
  }

  Status Free(const TraceEvent& ev) {
    const HandleId h = ev.handle;
    if (state_[h] != HandleState::kLive) {
      const std::string name(ev.handle_name);
      const bool twice = state_[h] == HandleState::kPending || reader_.RecentlyReleased(name);
      if (state_[h] == HandleState::kUnused) reader_.Release(h);
      return Misuse(ev, twice ? "double free of handle '" + name + "'"
                              : "free of unknown handle '" + name + "'");
    }
    for (Lane& lane : lanes_) {
      if (lane.failed[h]) {
        lane.failed[h] = 0;
        lane.Note("line " + std::to_string(ev.line) + ": free of '" + std::string(ev.handle_name) +
                  "' ignored: its allocation failed with OOM");
        continue;
      }
      lane.sim.Free(h);
    }
    if (stream_used_[h]) {
      state_[h] = HandleState::kPending;
      pending_.push_back(h);
    } else {
      ReleaseHandle(h);
    }
    return OkStatus();
  }

  TimelineSample Observe(Lane& lane, std::int64_t index) {
    const DeviceStats& s = lane.sim.stats();
    ReplaySummary& sum = lane.sum;
    sum.peak_allocated_bytes = std::max(sum.peak_allocated_bytes, All(s.allocated_bytes).peak);
    sum.peak_active_bytes = std::max(sum.peak_active_bytes, All(s.active_bytes).peak);
    sum.peak_requested_bytes = std::max(sum.peak_requested_bytes, All(s.requested_bytes).peak);
    const std::int64_t reserved_peak = All(s.reserved_bytes).peak;
    if (reserved_peak > lane.best_reserved_peak) {
      lane.best_reserved_peak = reserved_peak;
      sum.peak_reserved_event_index = index;
      sum.allocated_at_peak_reserved_bytes = All(s.allocated_bytes).current;
    }
    TimelineSample t;
    t.allocated_bytes = All(s.allocated_bytes).current;
    t.reserved_bytes = All(s.reserved_bytes).current;
    t.active_bytes = All(s.active_bytes).current;
    t.requested_bytes = All(s.requested_bytes).current;
    t.segments = All(s.segment).current;
    t.ooms = s.num_ooms + lane.exabyte_ooms;
    return t;
  }

  ReplaySummary Finish(Lane& lane) {
    ReplaySummary sum = std::move(lane.sum);
    const DeviceStats& s = lane.sim.stats();
    sum.events = events_;
    sum.peak_reserved_bytes = lane.best_reserved_peak;
    sum.reserved_unallocated_at_peak_bytes =
        sum.peak_reserved_bytes - sum.allocated_at_peak_reserved_bytes;
    sum.final_allocated_bytes = All(s.allocated_bytes).current;
    sum.final_reserved_bytes = All(s.reserved_bytes).current;
    sum.ooms = s.num_ooms + lane.exabyte_ooms;
    sum.stats = s;
    return sum;
  }

  TraceReader reader_;
  const ReplayOptions& options_;
  std::vector<Lane> lanes_;
  std::vector<HandleState> state_;
  std::vector<std::uint8_t> stream_used_;
  std::vector<StreamId> alloc_stream_;
  std::vector<HandleId> pending_;
  std::int64_t events_ = 0;
};

}  // namespace

Result<std::vector<ReplaySummary>> ReplayTrace(std::istream& in, std::string_view source_name,
                                               const ReplayOptions& options) {
  Replayer replayer(in, source_name, options);
  return replayer.Run();
}

}  // namespace memtune::alloc
