// Trends in memory lines: growth across iterations (leak) and spread across ranks (imbalance).
#include <algorithm>
#include <map>

#include "memtune/diagnose/log_lines.h"

namespace memtune::diagnose {
namespace {

// What a leak grows: allocated memory after each iteration (live tensors), else the peak.
std::int64_t SteadyBytes(const MemorySample& s) {
  return s.allocated_bytes ? *s.allocated_bytes : s.peak_bytes();
}

std::optional<Growth> RankGrowth(const std::vector<MemorySample>& samples,
                                 const std::vector<std::size_t>& rank_samples) {
  // Skip the warm-up report; the rest must be iterations in order with memory never falling.
  if (rank_samples.size() < static_cast<std::size_t>(kLeakMinReports) + 1) return std::nullopt;
  for (std::size_t k = 2; k < rank_samples.size(); ++k) {
    const MemorySample& prev = samples[rank_samples[k - 1]];
    const MemorySample& cur = samples[rank_samples[k]];
    if (cur.iteration <= prev.iteration || SteadyBytes(cur) < SteadyBytes(prev)) {
      return std::nullopt;
    }
  }
  const std::size_t first = rank_samples[1];
  const std::size_t last = rank_samples.back();
  const std::int64_t start = SteadyBytes(samples[first]);
  const std::int64_t growth = SteadyBytes(samples[last]) - start;
  const auto min_growth = std::max<std::int64_t>(
      kLeakMinBytes, static_cast<std::int64_t>(kLeakMinFraction * static_cast<double>(start)));
  if (growth < min_growth) return std::nullopt;
  return Growth{samples[first].rank, first, last, growth};
}

}  // namespace

std::optional<Growth> FindLeak(const std::vector<MemorySample>& samples) {
  std::map<int, std::vector<std::size_t>> by_rank;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    if (samples[i].iteration >= 0) by_rank[samples[i].rank].push_back(i);
  }
  std::optional<Growth> best;
  for (const auto& [rank, indexes] : by_rank) {
    auto g = RankGrowth(samples, indexes);
    if (g && (!best || g->growth_bytes > best->growth_bytes)) best = g;
  }
  return best;
}

std::optional<Imbalance> FindImbalance(const std::vector<MemorySample>& samples) {
  std::map<int, std::size_t> last_by_rank;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    if (samples[i].rank >= 0 && samples[i].peak_bytes() > 0) last_by_rank[samples[i].rank] = i;
  }
  if (last_by_rank.size() < 2) return std::nullopt;
  std::vector<std::int64_t> peaks;
  std::size_t top = last_by_rank.begin()->second;
  for (const auto& [rank, index] : last_by_rank) {
    peaks.push_back(samples[index].peak_bytes());
    if (samples[index].peak_bytes() > samples[top].peak_bytes()) top = index;
  }
  std::sort(peaks.begin(), peaks.end());
  const std::size_t n = peaks.size();
  // Halfway without the sum: each reading may be near INT64_MAX (ScaleBytes' bound).
  const std::int64_t median =
      n % 2 == 1 ? peaks[n / 2] : peaks[n / 2 - 1] + (peaks[n / 2] - peaks[n / 2 - 1]) / 2;
  const std::int64_t peak = samples[top].peak_bytes();
  const double excess = static_cast<double>(peak - median);
  if (peak - median < kImbalanceMinBytes ||
      excess < kImbalanceMinFraction * static_cast<double>(median)) {
    return std::nullopt;
  }
  return Imbalance{samples[top].rank, top, peak, median, static_cast<int>(n)};
}

std::optional<int> PipelineStage(int rank, int world_size, int pipeline_parallel_size) {
  if (rank < 0 || world_size <= 0 || pipeline_parallel_size <= 0 ||
      world_size % pipeline_parallel_size != 0 || rank >= world_size) {
    return std::nullopt;
  }
  return rank / (world_size / pipeline_parallel_size);
}

}  // namespace memtune::diagnose
