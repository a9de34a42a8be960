// Reading a snapshot file in the commands that take one: --max-snapshot-size and the load.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "memtune/snapshot/snapshot.h"

namespace memtune::cli {

// Adds `--max-snapshot-size SIZE` (the largest decompressed snapshot accepted) into `text`.
void AddSnapshotSizeOption(CLI::App& app, std::string& text);

// LoadSnapshotFile(path) under the limit `max_size` ("" = the default of SnapshotLimits).
// Errors: kInvalidInput for a bad size (field --max-snapshot-size), then LoadSnapshotFile's.
Result<snapshot::Snapshot> LoadSnapshotArg(const std::string& path, const std::string& max_size);

}  // namespace memtune::cli
