// Text files compiled into the binary (catalogs, examples): see cmake/embed_files.cmake.
#pragma once

namespace memtune {

// One embedded file. Arrays of these end with {nullptr, nullptr}.
struct EmbeddedFile {
  const char* name;      // file name without directory, e.g. "llama3-70b.yaml"
  const char* contents;  // the file's bytes, NUL-terminated
};

}  // namespace memtune
