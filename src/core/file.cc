// Whole-file input reading with the directory and size checks (core/file.h).
#include "memtune/core/file.h"

#include <filesystem>
#include <fstream>
#include <system_error>

#include "memtune/core/units.h"

namespace memtune {

Status CheckNotDirectory(const std::string& path, const std::string& field) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return InvalidInput(field, "'" + path + "' is a directory", "allowed: a file");
  }
  return OkStatus();
}

Result<std::string> ReadInputStream(std::istream& in, const std::string& field,
                                    const std::string& name, std::int64_t max_bytes) {
  std::string text;
  char buffer[64 * 1024];
  while (in) {
    in.read(buffer, sizeof buffer);
    const std::streamsize got = in.gcount();
    if (got <= 0) break;
    if (static_cast<std::int64_t>(text.size()) + got > max_bytes) {
      return InvalidInput(field, "'" + name + "' is longer than " + FormatWithCommas(max_bytes) +
                                     " bytes",
                          "allowed: an input file up to " + FormatBytesBinary(max_bytes));
    }
    text.append(buffer, static_cast<std::size_t>(got));
  }
  return text;
}

Result<std::string> ReadInputFile(const std::string& path, const std::string& field,
                                  std::int64_t max_bytes) {
  MEMTUNE_RETURN_IF_ERROR(CheckNotDirectory(path, field));
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(field, "cannot read '" + path + "'");
  return ReadInputStream(in, field, path, max_bytes);
}

}  // namespace memtune
