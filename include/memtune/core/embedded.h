// Text files compiled into the binary (catalogs, examples): see cmake/embed_files.cmake.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace memtune {

// One embedded file. Arrays of these end with {nullptr, nullptr}.
struct EmbeddedFile {
  const char* name;      // file name without directory, e.g. "llama3-70b.yaml"
  const char* contents;  // the file's bytes, NUL-terminated
};

// The names of `files` without their ".yaml" suffix, sorted ("llama3-70b", ...).
std::vector<std::string> EmbeddedStems(const EmbeddedFile* files);

// The contents of the file whose name without ".yaml" is `stem`, or nullptr.
const char* FindEmbeddedStem(const EmbeddedFile* files, std::string_view stem);

}  // namespace memtune
