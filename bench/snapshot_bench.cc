// Snapshot reader throughput: a synthetic snapshot pickle shaped like
// torch.cuda.memory._dump_snapshot() output (protocol 4, memoized keys and shared frame
// lists, as Python's pickler writes them) is generated in memory, then parsed, converted
// and inspected. Compare with bench/pickle_load_peer.py (docs/performance.md).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <unordered_map>

#include "memtune/snapshot/inspect.h"
#include "memtune/snapshot/snapshot.h"

namespace {

constexpr int kTraceEntries = 300000;
constexpr int kSegments = 2000;
constexpr int kBlocksPerSegment = 10;
constexpr int kStacks = 100;
constexpr int kFramesPerStack = 8;
constexpr int kBatch = 1000;  // Python's pickler batches SETITEMS/APPENDS by 1000

// A minimal protocol-4 writer: strings are memoized by value (Python memoizes by object
// identity; repeated keys are the same interned objects, so the output is the same).
class Writer {
 public:
  Writer() { out_ += "\x80\x04"; }
  std::string Finish() { return out_ + "."; }

  void Str(const std::string& s) {
    auto it = memo_.find(s);
    if (it != memo_.end()) return Get(it->second);
    if (s.size() < 256) {
      out_ += '\x8c';
      out_ += static_cast<char>(s.size());
    } else {
      out_ += 'X';
      Le(s.size(), 4);
    }
    out_ += s;
    memo_.emplace(s, Memoize());
  }
  void Int(std::int64_t v) {
    if (v >= 0 && v < 256) {
      out_ += 'K';
      out_ += static_cast<char>(v);
    } else if (v >= 0 && v < 65536) {
      out_ += 'M';
      Le(static_cast<std::uint64_t>(v), 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      out_ += 'J';
      Le(static_cast<std::uint64_t>(v), 4);
    } else {
      out_ += '\x8a';
      out_ += '\x08';
      Le(static_cast<std::uint64_t>(v), 8);
    }
  }
  void Bool(bool b) { out_ += b ? '\x88' : '\x89'; }
  std::uint32_t Open(char empty) {  // '}' or ']'
    out_ += empty;
    return Memoize();
  }
  void Mark() { out_ += '('; }
  void SetItems() { out_ += 'u'; }
  void Appends() { out_ += 'e'; }
  void Append() { out_ += 'a'; }
  void Get(std::uint32_t id) {
    if (id < 256) {
      out_ += 'h';
      out_ += static_cast<char>(id);
    } else {
      out_ += 'j';
      Le(id, 4);
    }
  }

 private:
  std::uint32_t Memoize() {
    out_ += '\x94';
    return next_++;
  }
  void Le(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_ += static_cast<char>((v >> (8 * i)) & 0xff);
  }
  std::string out_;
  std::unordered_map<std::string, std::uint32_t> memo_;
  std::uint32_t next_ = 0;
};

// Frame list `s`, written in full the first time and as a memo reference afterwards.
void Stack(Writer& w, std::uint32_t* ids, int s) {
  if (ids[s] != 0) return w.Get(ids[s]);
  ids[s] = w.Open(']');
  w.Mark();
  for (int f = 0; f < kFramesPerStack; ++f) {
    w.Open('}');
    w.Mark();
    w.Str("name");
    w.Str("function_" + std::to_string(s * kFramesPerStack + f));
    w.Str("filename");
    w.Str("/workspace/project/module_" + std::to_string(f) + ".py");
    w.Str("line");
    w.Int(10 + s + f);
    w.SetItems();
  }
  w.Appends();
}

void Segments(Writer& w, std::uint32_t* stacks) {
  w.Str("segments");
  w.Open(']');
  w.Mark();
  for (int s = 0; s < kSegments; ++s) {
    if (s > 0 && s % kBatch == 0) {
      w.Appends();
      w.Mark();
    }
    const std::int64_t base = 0x7f0000000000LL + s * (64LL << 20);
    w.Open('}');
    w.Mark();
    w.Str("device"); w.Int(0);
    w.Str("address"); w.Int(base);
    w.Str("total_size"); w.Int(kBlocksPerSegment * (2 << 20));
    w.Str("stream"); w.Int(0);
    w.Str("segment_type"); w.Str("large");
    w.Str("is_expandable"); w.Bool(false);
    w.Str("blocks");
    w.Open(']');
    w.Mark();
    for (int b = 0; b < kBlocksPerSegment; ++b) {
      w.Open('}');
      w.Mark();
      w.Str("address"); w.Int(base + b * (2 << 20));
      w.Str("size"); w.Int(2 << 20);
      w.Str("requested_size"); w.Int((2 << 20) - 100);
      w.Str("state"); w.Str(b % 3 == 0 ? "inactive" : "active_allocated");
      w.Str("frames"); Stack(w, stacks, (s + b) % kStacks);
      w.SetItems();
    }
    w.Appends();
    w.SetItems();
  }
  w.Appends();
}

void Trace(Writer& w, std::uint32_t* stacks) {
  static const char* kActions[] = {"alloc", "free_requested", "free_completed", "segment_alloc"};
  w.Str("device_traces");
  w.Open(']');
  w.Open(']');
  w.Mark();
  for (int i = 0; i < kTraceEntries; ++i) {
    if (i > 0 && i % kBatch == 0) {
      w.Appends();
      w.Mark();
    }
    w.Open('}');
    w.Mark();
    w.Str("action"); w.Str(kActions[i % 4]);
    w.Str("addr"); w.Int(0x7f0000000000LL + (i % 5000) * 4096LL);
    w.Str("size"); w.Int(4096 + (i % 977) * 512);
    w.Str("stream"); w.Int(0);
    w.Str("time_us"); w.Int(1700000000000000LL + i);
    w.Str("compile_context"); w.Str("N/A");
    w.Str("user_metadata"); w.Str("");
    w.Str("frames"); Stack(w, stacks, i % kStacks);
    w.SetItems();
  }
  w.Appends();
  w.Append();
}

// The whole file: {"segments": [...], "device_traces": [[...]], "allocator_settings": {}}.
const std::string& SyntheticSnapshot() {
  static const std::string bytes = [] {
    Writer w;
    std::uint32_t stacks[kStacks] = {};  // memo ids; 0 = not written yet (id 0 is the root)
    w.Open('}');
    w.Mark();
    Segments(w, stacks);
    Trace(w, stacks);
    w.Str("allocator_settings");
    w.Open('}');
    w.Mark();
    w.Str("PYTORCH_CUDA_ALLOC_CONF");
    w.Str("expandable_segments:True");
    w.Str("expandable_segments");
    w.Bool(true);
    w.SetItems();
    w.SetItems();
    return w.Finish();
  }();
  return bytes;
}

void BM_SnapshotReadPickle(benchmark::State& state) {
  const std::string& bytes = SyntheticSnapshot();
  for (auto _ : state) {
    auto doc = memtune::snapshot::ReadPickle(bytes);
    if (!doc) state.SkipWithError(doc.error().message.c_str());
    benchmark::DoNotOptimize(doc);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(bytes.size()));
}
BENCHMARK(BM_SnapshotReadPickle)->Unit(benchmark::kMillisecond);

void BM_SnapshotLoad(benchmark::State& state) {
  const std::string& bytes = SyntheticSnapshot();
  for (auto _ : state) {
    auto snap = memtune::snapshot::LoadSnapshot(bytes);
    if (!snap) state.SkipWithError(snap.error().message.c_str());
    benchmark::DoNotOptimize(snap);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(bytes.size()));
}
BENCHMARK(BM_SnapshotLoad)->Unit(benchmark::kMillisecond);

void BM_SnapshotInspect(benchmark::State& state) {
  const std::string& bytes = SyntheticSnapshot();
  for (auto _ : state) {
    auto snap = memtune::snapshot::LoadSnapshot(bytes);
    if (!snap) state.SkipWithError(snap.error().message.c_str());
    auto report = memtune::snapshot::Inspect(*snap);
    benchmark::DoNotOptimize(report);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(bytes.size()));
}
BENCHMARK(BM_SnapshotInspect)->Unit(benchmark::kMillisecond);

}  // namespace
