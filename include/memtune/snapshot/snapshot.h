// A PyTorch CUDA memory snapshot as typed data: segments and blocks (the allocator state
// when the snapshot was taken), per-device trace entries, and the allocator settings.
//
// Reads what torch.cuda.memory._dump_snapshot() (Python pickle, protocol 4/5) and
// torch::cuda::_memory_snapshot_pickled() (TorchScript pickler, protocol 2) write, plus the
// legacy forms: a bare list of segments (torch.cuda.memory_snapshot(), <= 1.13) and the 2.0
// "history" blocks. Layout reference: docs/allocator.md section 8 (snap-py, snap-cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "memtune/core/result.h"
#include "memtune/snapshot/pickle.h"

namespace memtune::snapshot {

// Which snapshot layout the file used.
enum class SnapshotFormat {
  kCurrent,      // dict with "segments", "device_traces" (+ "allocator_settings" >= ~2.4)
  kHistory,      // dict or list whose blocks carry "history" instead of "address" (~2.0)
  kSegmentList,  // bare list of segments (torch.cuda.memory_snapshot(), <= 1.13)
};

// One stack frame; frames[0] of a stack is the innermost (the allocating function).
struct Frame {
  std::string name;
  std::string filename;
  std::int64_t line = 0;
};

// Index into Snapshot::stacks; kNoStack when no stack was recorded.
using StackId = std::int32_t;
inline constexpr StackId kNoStack = -1;

enum class BlockState { kActiveAllocated, kActivePendingFree, kInactive };

struct Block {
  std::int64_t address = 0;  // computed from the segment start when absent (legacy)
  std::int64_t size_bytes = 0;
  std::int64_t requested_bytes = 0;  // stale for inactive blocks (allocator.md 8.4)
  BlockState state = BlockState::kInactive;
  StackId stack = kNoStack;  // allocation stack (legacy: last "history" entry)
};

enum class PoolType { kSmall, kLarge };

struct Segment {
  int device = 0;
  std::int64_t address = 0;
  std::int64_t total_size_bytes = 0;
  std::int64_t allocated_size_bytes = 0;
  std::int64_t active_size_bytes = 0;
  std::int64_t requested_size_bytes = 0;
  std::int64_t stream = 0;  // raw cudaStream_t value
  PoolType segment_type = PoolType::kLarge;
  std::pair<std::int64_t, std::int64_t> pool_id{0, 0};  // (0, 0) = default pool
  bool is_expandable = false;
  StackId stack = kNoStack;
  std::vector<Block> blocks;  // address order, sizes sum to total_size_bytes
};

enum class TraceAction {
  kAlloc,
  kFreeRequested,
  kFreeCompleted,
  kSegmentAlloc,
  kSegmentFree,
  kSegmentMap,
  kSegmentUnmap,
  kSnapshot,
  kOom,
  kOther,  // an action this version does not know ("annotate", ...); kept, ignored
};

// "alloc", "free_requested", ... (the strings PyTorch writes).
const char* TraceActionName(TraceAction action);

struct TraceEntry {
  TraceAction action = TraceAction::kOther;
  std::int64_t addr = 0;        // for kOom: device_free (free bytes per cudaMemGetInfo)
  std::int64_t size_bytes = 0;  // kAlloc: the unrounded request; kOom: the rounded request
  std::int64_t stream = 0;
  std::int64_t time_us = -1;  // -1 when absent
  StackId stack = kNoStack;
};

// The "allocator_settings" dict (allocator.md 8.6); present == false for older files.
struct AllocatorSettings {
  bool present = false;
  std::string alloc_conf;                  // "PYTORCH_CUDA_ALLOC_CONF" as recorded
  std::int64_t max_split_size_bytes = -1;  // -1 = unlimited (SIZE_MAX)
  double garbage_collection_threshold = 0.0;
  bool expandable_segments = false;
  bool expandable_segments_recorded = false;  // the "expandable_segments" key was present
  bool release_lock_on_cudamalloc = false;
  // (interval start in MiB, divisions), sorted by interval; empty when absent.
  std::vector<std::pair<std::int64_t, std::int64_t>> roundup_power2_divisions;
};

struct Snapshot {
  SnapshotFormat format = SnapshotFormat::kCurrent;
  std::vector<Segment> segments;                       // all devices
  std::vector<std::vector<TraceEntry>> device_traces;  // index = device, oldest first
  AllocatorSettings settings;
  std::vector<Frame> frames;                      // interned; shared by stacks
  std::vector<std::vector<std::int32_t>> stacks;  // frame indexes, innermost first

  // Number of devices seen in segments or traces (at least 1 when either is non-empty).
  int device_count() const;
};

// Bounds for LoadSnapshot.
struct SnapshotLimits {
  PickleLimits pickle;
  // Largest decompressed size accepted for a gzip'd file, in bytes. 512 MiB is far above
  // real snapshots (a full 1 M-entry trace with stacks is a few hundred MB) and keeps a
  // gzip bomb near 512 MiB of memory; the CLI raises it with --max-snapshot-size.
  std::int64_t max_decompressed_bytes = std::int64_t{512} << 20;
};

// Converts a parsed pickle to a Snapshot. Unknown keys are ignored; missing optional keys
// take the defaults above. Errors (kInvalidInput): "not a memory snapshot: ..." when the
// top level has neither "segments" nor a list of segment dicts; otherwise the field path and
// the expected type, e.g. "segments[3].blocks[0].size: expected int, got str".
Result<Snapshot> ParseSnapshot(const PickleDocument& document);

// True when `bytes` starts with the gzip magic (1f 8b).
bool IsGzip(std::string_view bytes);

// Decompresses a gzip stream (all members). Errors: "corrupt gzip data: ..." (with zlib's
// reason), "truncated gzip data", "gzip data expands beyond <limit> bytes".
Result<std::string> Gunzip(std::string_view bytes, std::int64_t max_output_bytes);

// Bytes of a snapshot file (gzip'd or not) -> Snapshot. Example:
//   auto snap = LoadSnapshot(ReadWholeFile(path)); if (!snap) report snap.error();
Result<Snapshot> LoadSnapshot(std::string bytes, const SnapshotLimits& limits = {});

// Reads the file at `path` and calls LoadSnapshot. Errors: kNotFound "cannot open <path>",
// and those of LoadSnapshot with `field` set to the path.
Result<Snapshot> LoadSnapshotFile(const std::string& path, const SnapshotLimits& limits = {});

}  // namespace memtune::snapshot
