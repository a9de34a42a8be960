// Memory lines of training logs: Megatron-LM / Bridge "memory (MB)" reports, their
// "Theoretical memory footprints" line, torchtitan's "memory: 12.34GiB(15.6%)", DeepSpeed's
// see_memory_usage "MA ... Max_MA ... CA ... Max_CA ...", plain "Allocated: ... Reserved: ..."
// prints, and the parallel sizes of Megatron's argument dump; then the trends across
// iterations (a leak) and across ranks (an imbalance).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "memtune/model/job.h"

namespace memtune::diagnose {

enum class LogFormat { kMegatron, kTorchtitan, kDeepSpeed, kPlain };
// "megatron", "torchtitan", "deepspeed", "plain".
std::span<const model::EnumName<LogFormat>> EnumNames(LogFormat);
const char* LogFormatName(LogFormat format);

// One memory report line. Sizes in bytes as printed; absent fields are nullopt.
struct MemorySample {
  LogFormat format = LogFormat::kMegatron;
  int rank = -1;                // "[Rank 3]" / "[rank3]:"; -1 when the line names none
  std::int64_t iteration = -1;  // "(after 10 iterations)" / "step: 10"; -1 when absent
  std::optional<std::int64_t> allocated_bytes;
  std::optional<std::int64_t> max_allocated_bytes;
  std::optional<std::int64_t> reserved_bytes;
  std::optional<std::int64_t> max_reserved_bytes;  // torchtitan's "memory:" is this
  std::optional<double> capacity_percent;          // torchtitan: max reserved / capacity x 100
  int line = 0;
  std::string line_text;

  // The peak this line shows: max reserved, else reserved, else max allocated, else allocated
  // (0 when none).
  std::int64_t peak_bytes() const;
};

// Megatron's "Theoretical memory footprints: weight and optimizer=X MB, activation=Y MB,
// total=Z MB" (megatron/training/theoretical_memory_usage.py).
struct TheoreticalMemory {
  std::int64_t weight_and_optimizer_bytes = 0;
  std::optional<std::int64_t> activation_bytes;
  std::optional<std::int64_t> total_bytes;
  int line = 0;
  std::string line_text;
};

// Memory another engine keeps while training runs next to it (vLLM's sleep mode: "... GiB
// memory is still in use").
struct HeldMemory {
  std::int64_t bytes = 0;
  int line = 0;
  std::string line_text;
};

struct LogMemory {
  std::vector<MemorySample> samples;  // in line order
  std::optional<TheoreticalMemory> theoretical;
  std::optional<int> pipeline_parallel_size;  // Megatron argument dump
  std::optional<int> world_size;
  std::vector<HeldMemory> held_by_other_engine;
};

// Reads every memory line of `text`. Never fails; text without any gives empty lists.
LogMemory ParseLogMemory(std::string_view text);

// Growth across iterations on one rank (a leak).
struct Growth {
  int rank = -1;
  std::size_t first_sample = 0;  // index into the samples
  std::size_t last_sample = 0;
  std::int64_t growth_bytes = 0;
};

// A leak: on one rank, after the first report (the warm-up iteration creates optimizer state
// and fills the cache), at least kLeakMinReports reports at increasing iterations whose
// allocated memory (or the peak when no allocated is printed) never falls and ends at least
// max(kLeakMinBytes, kLeakMinFraction of the start) higher. nullopt otherwise.
inline constexpr int kLeakMinReports = 3;
inline constexpr std::int64_t kLeakMinBytes = 256LL << 20;  // bytes
inline constexpr double kLeakMinFraction = 0.05;
std::optional<Growth> FindLeak(const std::vector<MemorySample>& samples);

// One rank far above the others.
struct Imbalance {
  int rank = -1;
  std::size_t sample = 0;         // the rank's last report (index into the samples)
  std::int64_t peak_bytes = 0;    // its peak
  std::int64_t median_bytes = 0;  // the median of the ranks' peaks
  int ranks = 0;                  // ranks compared
};

// An imbalance: with at least two ranks reporting, the highest last-report peak exceeds the
// median of all ranks by more than kImbalanceMinFraction and kImbalanceMinBytes. nullopt
// otherwise.
inline constexpr double kImbalanceMinFraction = 0.25;
inline constexpr std::int64_t kImbalanceMinBytes = 1LL << 30;  // bytes
std::optional<Imbalance> FindImbalance(const std::vector<MemorySample>& samples);

// The pipeline stage of global `rank` under Megatron's default rank order (tp-cp-ep-dp-pp:
// the pipeline dimension is outermost), or nullopt when the sizes do not divide.
std::optional<int> PipelineStage(int rank, int world_size, int pipeline_parallel_size);

}  // namespace memtune::diagnose
