// LoadSnapshotFile: reads a snapshot file into memory and parses it.
#include <fstream>

#include "memtune/core/file.h"
#include "memtune/snapshot/snapshot.h"

namespace memtune::snapshot {

Result<Snapshot> LoadSnapshotFile(const std::string& path, const SnapshotLimits& limits) {
  if (!CheckNotDirectory(path, path)) {
    return InvalidInput(path, "is a directory", "allowed: a snapshot file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(path, "cannot open the file");
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(0, std::ios::beg);
  if (size < 0) return InvalidInput(path, "cannot read the file");
  std::string bytes(static_cast<std::size_t>(size), '\0');
  if (!in.read(bytes.data(), size)) return InvalidInput(path, "cannot read the file");
  auto snapshot = LoadSnapshot(std::move(bytes), limits);
  if (!snapshot) {
    Error e = snapshot.error();
    e.field = e.field.empty() ? path : path + ": " + e.field;
    return e;
  }
  return snapshot;
}

}  // namespace memtune::snapshot
