#include "snapshot_input.h"

#include "memtune/core/units.h"

namespace memtune::cli {

void AddSnapshotSizeOption(CLI::App& app, std::string& text) {
  app.add_option("--max-snapshot-size", text,
                 "largest decompressed snapshot accepted, e.g. 8GiB (default: " +
                     FormatBytesBinary(snapshot::SnapshotLimits{}.max_decompressed_bytes) + ")");
}

Result<snapshot::Snapshot> LoadSnapshotArg(const std::string& path, const std::string& max_size) {
  snapshot::SnapshotLimits limits;
  if (!max_size.empty()) {
    MEMTUNE_TRY(limits.max_decompressed_bytes, ParseBytes(max_size, "--max-snapshot-size"));
    if (limits.max_decompressed_bytes < 1) {
      return InvalidInput("--max-snapshot-size", "'" + max_size + "' must be positive");
    }
  }
  return snapshot::LoadSnapshotFile(path, limits);
}

}  // namespace memtune::cli
