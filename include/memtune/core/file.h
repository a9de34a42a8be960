// Reading whole input files (job documents, Hugging Face configs, Megatron launch commands,
// validation cases) with the checks every reader needs: a directory is not a file, and a
// file without end (/dev/zero, a runaway pipe) must not exhaust memory.
#pragma once

#include <cstdint>
#include <istream>
#include <string>

#include "memtune/core/result.h"

namespace memtune {

// bytes (256 MiB): the largest input ReadInputFile takes by default; far above any job
// document, config or validation file.
inline constexpr std::int64_t kMaxInputFileBytes = std::int64_t{256} << 20;

// Reads the file at `path` whole (pipes and devices too, up to `max_bytes`).
// Errors, each naming `field`: kNotFound "cannot read '<path>'" when it cannot be opened;
// kInvalidInput "'<path>' is a directory; allowed: a file"; kInvalidInput
// "'<path>' is longer than <max_bytes> bytes" when it holds more.
// Example: ReadInputFile("job.yaml", "JOB")->size().
Result<std::string> ReadInputFile(const std::string& path, const std::string& field,
                                  std::int64_t max_bytes = kMaxInputFileBytes);

// Reads `in` to its end; kInvalidInput naming `field` when it holds more than `max_bytes`
// (`name` is what the message calls the input, e.g. "<stdin>").
Result<std::string> ReadInputStream(std::istream& in, const std::string& field,
                                    const std::string& name,
                                    std::int64_t max_bytes = kMaxInputFileBytes);

// kInvalidInput naming `field` when `path` is a directory (an ifstream opens one and then
// reads nothing, which would pass for an empty file); OK otherwise, missing files included.
Status CheckNotDirectory(const std::string& path, const std::string& field);

}  // namespace memtune
