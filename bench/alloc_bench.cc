// Allocator simulator throughput: replay of a generated training-like trace.
//
// The trace mimics a data-parallel training step: parameters allocated once, then per step a
// layered forward pass (activations kept, workspaces freed at once), a backward pass in
// reverse (activations freed, gradient temporaries, first-step gradient buffers), gradient
// buckets on a communication stream (record_stream, rare), and an optimizer sweep. Sizes
// jitter with a varying sequence length. Run:
//   ninja -C build-alloc alloc_bench && build-alloc/bench/alloc_bench
#include <benchmark/benchmark.h>

#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "memtune/alloc/replay.h"
#include "memtune/alloc/simulator.h"

namespace {

using memtune::kGiB;
using memtune::kKiB;
using memtune::kMiB;
using memtune::alloc::HandleId;

enum class OpKind : std::uint8_t { kAlloc, kFree, kRecordStream };

struct Op {
  OpKind kind;
  HandleId handle;
  std::int64_t bytes;
  std::uint64_t stream;
};

class TraceBuilder {
 public:
  HandleId Alloc(std::int64_t bytes, std::uint64_t stream = 0) {
    HandleId h;
    if (!free_.empty()) {
      h = free_.back();
      free_.pop_back();
    } else {
      h = next_++;
    }
    ops.push_back({OpKind::kAlloc, h, bytes, stream});
    return h;
  }
  void Free(HandleId h) {
    ops.push_back({OpKind::kFree, h, 0, 0});
    free_.push_back(h);
  }
  void RecordStream(HandleId h, std::uint64_t stream) {
    ops.push_back({OpKind::kRecordStream, h, 0, stream});
  }
  std::vector<Op> ops;

 private:
  std::vector<HandleId> free_;
  HandleId next_ = 0;
};

constexpr int kLayers = 24;
constexpr std::int64_t kHidden = 2048;
constexpr std::int64_t kBytesPerElement = 2;  // bf16
constexpr std::uint64_t kCommStream = 0x7f10;

std::vector<Op> MakeTrainingTrace(int steps, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  TraceBuilder t;
  std::vector<HandleId> params, grads;
  for (int l = 0; l < kLayers; ++l) {
    for (std::int64_t w :
         {3 * kHidden * kHidden, kHidden * kHidden, 4 * kHidden * kHidden, 4 * kHidden * kHidden}) {
      params.push_back(t.Alloc(w * kBytesPerElement));
    }
    params.push_back(t.Alloc(kHidden * 4));  // norm weight (small pool)
    params.push_back(t.Alloc(kHidden * 4));
  }
  for (int step = 0; step < steps; ++step) {
    const std::int64_t tokens =
        4096 + static_cast<std::int64_t>(rng() % 8) * 256;  // varying sequence
    const std::int64_t act = tokens * kHidden * kBytesPerElement;
    std::vector<std::vector<HandleId>> saved(kLayers);
    for (int l = 0; l < kLayers; ++l) {  // forward
      const HandleId ln = t.Alloc(act);
      const HandleId qkv = t.Alloc(3 * act);
      const HandleId scores = t.Alloc(tokens * 16 * 4 + 1024);  // softmax stats
      const HandleId ws = t.Alloc(8 * kMiB + static_cast<std::int64_t>(rng() % 4096));
      t.Free(ws);
      const HandleId attn = t.Alloc(act);
      const HandleId mlp = t.Alloc(4 * act);
      const HandleId tmp = t.Alloc(4 * act);
      t.Free(tmp);
      const HandleId out = t.Alloc(act);
      saved[static_cast<std::size_t>(l)] = {ln, qkv, scores, attn, mlp, out};
    }
    const HandleId loss = t.Alloc(tokens * 4);
    for (int l = kLayers - 1; l >= 0; --l) {  // backward
      const HandleId dmlp = t.Alloc(4 * act);
      const HandleId dws = t.Alloc(8 * kMiB);
      t.Free(dws);
      for (HandleId h : saved[static_cast<std::size_t>(l)]) t.Free(h);
      const HandleId dattn = t.Alloc(3 * act);
      t.Free(dmlp);
      t.Free(dattn);
      if (step == 0) {
        for (int k = 0; k < 6; ++k) {
          const std::int64_t bytes =
              k < 4 ? (k == 0 ? 3 : (k == 1 ? 1 : 4)) * kHidden * kHidden * kBytesPerElement
                    : kHidden * 4;
          grads.push_back(t.Alloc(bytes));
        }
      }
      if (l % 6 == 0) {  // a gradient bucket reduced on the communication stream (rare)
        const HandleId bucket = t.Alloc(25 * kMiB, kCommStream);
        t.RecordStream(bucket, 0);
        t.Free(bucket);
      }
    }
    t.Free(loss);
    for (std::size_t p = 0; p < params.size(); p += 2) {  // optimizer: fused temporaries
      const HandleId a = t.Alloc(512 * kKiB + static_cast<std::int64_t>(p) * 64);
      const HandleId b = t.Alloc(64 * kKiB);
      t.Free(b);
      t.Free(a);
    }
  }
  return t.ops;
}

const std::vector<Op>& TrainingTrace() {
  static const std::vector<Op> ops = MakeTrainingTrace(/*steps=*/60, /*seed=*/2024);
  return ops;
}

void Replay(benchmark::State& state, const char* conf) {
  const std::vector<Op>& ops = TrainingTrace();
  memtune::alloc::SimulatorOptions options;
  options.config = *memtune::alloc::ParseAllocatorConfig(conf);
  options.capacity_bytes = 80 * kGiB;
  for (auto _ : state) {
    memtune::alloc::Simulator sim(options);
    for (const Op& op : ops) {
      switch (op.kind) {
        case OpKind::kAlloc:
          benchmark::DoNotOptimize(sim.Alloc(op.handle, op.bytes, op.stream));
          break;
        case OpKind::kFree:
          benchmark::DoNotOptimize(sim.Free(op.handle));
          break;
        case OpKind::kRecordStream:
          benchmark::DoNotOptimize(sim.RecordStream(op.handle, op.stream));
          break;
      }
    }
    benchmark::DoNotOptimize(sim.stats());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(ops.size()));
  state.counters["events"] = static_cast<double>(ops.size());
}

void BM_AllocReplayNative(benchmark::State& state) { Replay(state, ""); }
void BM_AllocReplayExpandable(benchmark::State& state) {
  Replay(state, "expandable_segments:True");
}
void BM_AllocReplayMaxSplit(benchmark::State& state) { Replay(state, "max_split_size_mb:128"); }

// The text path: parse + intern + replay, from an in-memory trace.
void BM_AllocTraceReplayText(benchmark::State& state) {
  std::ostringstream text;
  for (const Op& op : TrainingTrace()) {
    switch (op.kind) {
      case OpKind::kAlloc:
        text << "alloc t" << op.handle << ' ' << op.bytes << ' ' << op.stream << '\n';
        break;
      case OpKind::kFree:
        text << "free t" << op.handle << '\n';
        break;
      case OpKind::kRecordStream:
        text << "record_stream t" << op.handle << ' ' << op.stream << '\n';
        break;
    }
  }
  const std::string trace = text.str();
  memtune::alloc::ReplayOptions options;
  options.simulators.resize(1);
  options.simulators[0].capacity_bytes = 80 * kGiB;
  for (auto _ : state) {
    std::istringstream in(trace);
    auto r = memtune::alloc::ReplayTrace(in, "bench", options);
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(TrainingTrace().size()));
}

BENCHMARK(BM_AllocReplayNative)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AllocReplayExpandable)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AllocReplayMaxSplit)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AllocTraceReplayText)->Unit(benchmark::kMillisecond);

}  // namespace
