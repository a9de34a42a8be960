// Reading the memory lines of Megatron, torchtitan and DeepSpeed logs.
#include "memtune/diagnose/log_lines.h"

#include "diagnose/text_scan.h"

namespace memtune::diagnose {
namespace {

// The four keys of a Megatron-style report line, each followed by a number in `unit_bytes`.
struct ReportKeys {
  const char* allocated;
  const char* max_allocated;
  const char* reserved;
  const char* max_reserved;
};

MemorySample ReportLine(std::string_view line, const ReportKeys& keys, std::int64_t unit_bytes) {
  MemorySample s;
  s.format = LogFormat::kMegatron;
  s.allocated_bytes = ScaleBytes(NumberAfter(line, keys.allocated), unit_bytes);
  s.max_allocated_bytes = ScaleBytes(NumberAfter(line, keys.max_allocated), unit_bytes);
  s.reserved_bytes = ScaleBytes(NumberAfter(line, keys.reserved), unit_bytes);
  s.max_reserved_bytes = ScaleBytes(NumberAfter(line, keys.max_reserved), unit_bytes);
  if (auto it = NumberAfter(line, "after ")) s.iteration = static_cast<std::int64_t>(*it);
  return s;
}

// Megatron-Bridge train_utils.py training_log(): "[Rank N] (after N iterations) memory (GB) |
// mem-allocated-gigabytes: A | ... | mem-reserved-gigabytes: C | mem-max-allocated-gigabytes:
// B | ... | mem-max-reserved-gigabytes: D | ..." in decimal GB (allocator stats / 1e9).
constexpr ReportKeys kBridgeKeys = {"mem-allocated-gigabytes:", "mem-max-allocated-gigabytes:",
                                    "mem-reserved-gigabytes:", "mem-max-reserved-gigabytes:"};
constexpr std::int64_t kDecimalGbBytes = 1000000000;

// Megatron-LM training.py report_memory(): "[Rank N] (after N iterations) memory (MB) |
// allocated: A | max allocated: B | reserved: C | max reserved: D" (MB = 2^20 bytes); older
// releases omit the rank; some forks print GB.
constexpr ReportKeys kMegatronKeys = {
    "| allocated:", "max allocated:", "| reserved:", "max reserved:"};

std::optional<MemorySample> MegatronLine(std::string_view line) {
  if (line.find(kBridgeKeys.allocated) != std::string_view::npos) {
    return ReportLine(line, kBridgeKeys, kDecimalGbBytes);
  }
  std::int64_t unit = 0;
  if (line.find("memory (MB)") != std::string_view::npos) unit = 1LL << 20;
  if (line.find("memory (GB)") != std::string_view::npos) unit = 1LL << 30;
  if (unit == 0 || line.find("allocated:") == std::string_view::npos) return std::nullopt;
  return ReportLine(line, kMegatronKeys, unit);
}

// torchtitan metrics.py: "step: 10  loss: ...  memory: 73.32GiB(92.70%)  tps: ...".
std::optional<MemorySample> TorchtitanLine(std::string_view line) {
  auto peak = SizeAfter(line, "memory: ");
  if (!peak || line.find("step:") == std::string_view::npos) return std::nullopt;
  MemorySample s;
  s.format = LogFormat::kTorchtitan;
  s.max_reserved_bytes = peak;
  const std::size_t at = line.find("memory: ");
  if (auto pct = NumberAfter(line.substr(at), "(")) s.capacity_percent = *pct;
  if (auto step = NumberAfter(line, "step:")) s.iteration = static_cast<std::int64_t>(*step);
  return s;
}

// DeepSpeed runtime/utils.py see_memory_usage(): "MA 1.2 GB  Max_MA 2.3 GB  CA 3.4 GB
// Max_CA 4 GB" (MA: allocated, CA: reserved, the allocator's old "cached" name).
std::optional<MemorySample> DeepSpeedLine(std::string_view line) {
  if (line.find("Max_MA") == std::string_view::npos) return std::nullopt;
  MemorySample s;
  s.format = LogFormat::kDeepSpeed;
  std::size_t ma = line.find("MA ");
  if (ma != std::string_view::npos && ma > 0 && line[ma - 1] == '_') ma = std::string_view::npos;
  if (ma != std::string_view::npos) s.allocated_bytes = SizeAfter(line.substr(ma), "MA ");
  s.max_allocated_bytes = SizeAfter(line, "Max_MA ");
  const std::size_t ca = line.find(" CA ");
  if (ca != std::string_view::npos) s.reserved_bytes = SizeAfter(line.substr(ca), "CA ");
  s.max_reserved_bytes = SizeAfter(line, "Max_CA ");
  return s;
}

// A user's own print: "Allocated: 36659.26 MB, Reserved: 37246.00 MB".
std::optional<MemorySample> PlainLine(std::string_view line) {
  const std::size_t a = FindNoCase(line, "allocated:");
  const std::size_t r = FindNoCase(line, "reserved:");
  if (a == std::string_view::npos || r == std::string_view::npos) return std::nullopt;
  MemorySample s;
  s.format = LogFormat::kPlain;
  s.allocated_bytes = SizeAfter(line.substr(a), ":");
  s.reserved_bytes = SizeAfter(line.substr(r), ":");
  if (!s.allocated_bytes || !s.reserved_bytes) return std::nullopt;
  return s;
}

std::optional<TheoreticalMemory> TheoreticalLine(std::string_view line) {
  if (line.find("Theoretical memory footprints") == std::string_view::npos) return std::nullopt;
  auto weights = ScaleBytes(NumberAfter(line, "weight and optimizer="), 1LL << 20);
  if (!weights) return std::nullopt;
  TheoreticalMemory t;
  t.weight_and_optimizer_bytes = *weights;
  t.activation_bytes = ScaleBytes(NumberAfter(line, "activation="), 1LL << 20);
  t.total_bytes = ScaleBytes(NumberAfter(line, "total="), 1LL << 20);
  return t;
}

// Megatron's argument dump: "  pipeline_model_parallel_size ................... 4".
std::optional<int> ArgumentValue(std::string_view line, std::string_view name) {
  const std::size_t pos = line.find(name);
  if (pos == std::string_view::npos) return std::nullopt;
  std::size_t p = pos + name.size();
  if (p >= line.size() || line[p] != ' ') return std::nullopt;
  while (p < line.size() && (line[p] == ' ' || line[p] == '.')) ++p;
  auto v = ScanNumber(line, p);
  if (!v || p != line.size() || *v < 1 || *v > 1e7) return std::nullopt;
  return static_cast<int>(*v);
}

void ReadLine(const Line& line, LogMemory& out) {
  const std::string_view l = line.text;
  std::optional<MemorySample> s = MegatronLine(l);
  if (!s) s = TorchtitanLine(l);
  if (!s) s = DeepSpeedLine(l);
  if (!s) s = PlainLine(l);
  if (s) {
    s->rank = RankOf(l).value_or(-1);
    s->line = line.number;
    s->line_text = Excerpt(l);
    out.samples.push_back(std::move(*s));
    return;
  }
  if (auto t = TheoreticalLine(l)) {
    t->line = line.number;
    t->line_text = Excerpt(l);
    out.theoretical = std::move(t);
    return;
  }
  if (auto pp = ArgumentValue(l, "pipeline_model_parallel_size")) out.pipeline_parallel_size = pp;
  if (auto ws = ArgumentValue(l, "world_size")) out.world_size = ws;
  // vLLM gpu_worker.py sleep(): "Sleep mode freed X GiB memory, Y GiB memory is still in use."
  if (auto held = SizeBefore(l, "memory is still in use")) {
    out.held_by_other_engine.push_back({*held, line.number, Excerpt(l)});
  }
}

}  // namespace

namespace {
constexpr model::EnumName<LogFormat> kFormatNames[] = {
    {"megatron", LogFormat::kMegatron},
    {"torchtitan", LogFormat::kTorchtitan},
    {"deepspeed", LogFormat::kDeepSpeed},
    {"plain", LogFormat::kPlain},
};
}  // namespace

std::span<const model::EnumName<LogFormat>> EnumNames(LogFormat) { return kFormatNames; }

const char* LogFormatName(LogFormat format) { return model::NameOf(format); }

std::int64_t MemorySample::peak_bytes() const {
  for (const auto* v :
       {&max_reserved_bytes, &reserved_bytes, &max_allocated_bytes, &allocated_bytes}) {
    if (*v) return **v;
  }
  return 0;
}

LogMemory ParseLogMemory(std::string_view text) {
  LogMemory out;
  for (const Line& line : SplitLines(text)) ReadLine(line, out);
  return out;
}

}  // namespace memtune::diagnose
