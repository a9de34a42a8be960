// nvidia-smi output: the default table and `--query-gpu=...,memory.used,memory.total
// --format=csv`: memory per GPU and the processes on each.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memtune::diagnose {

struct SmiGpu {
  int index = 0;
  std::int64_t used_bytes = 0;
  std::int64_t total_bytes = 0;
  int line = 0;
  std::string line_text;
};

struct SmiProcess {
  int gpu = 0;
  std::int64_t pid = 0;
  std::int64_t bytes = 0;
  int line = 0;
  std::string line_text;
};

struct SmiReport {
  std::vector<SmiGpu> gpus;  // in the order printed
  std::vector<SmiProcess> processes;
};

// The GPUs and processes of nvidia-smi output in `text`; nullopt when it has none (a table
// row "| 1234MiB / 81559MiB |" or a CSV with memory.used and memory.total columns).
std::optional<SmiReport> ParseNvidiaSmi(std::string_view text);

}  // namespace memtune::diagnose
