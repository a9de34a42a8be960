// memtune.versions behaviour switches (docs/versions.md).
#include "memtune/model/versions.h"

#include <charconv>

namespace memtune::model {

bool VersionBefore(const std::string& version, int major, int minor) {
  if (version.empty()) return false;
  int parts[2] = {0, 0};
  const char* p = version.data();
  const char* end = p + version.size();
  for (int& part : parts) {
    p = std::from_chars(p, end, part).ptr;
    if (p < end && *p == '.') ++p;
  }
  return parts[0] < major || (parts[0] == major && parts[1] < minor);
}

bool McoreProbsInExperts(const Job& job) {
  return !VersionBefore(job.memtune.versions.megatron_core, 0, 13);
}

bool TeCachesDummyWgrad(const Job& job) {
  return !VersionBefore(job.memtune.versions.transformer_engine, 2, 3);
}

bool McoreCachesOutputWgrad(const Job& job) {
  return TeCachesDummyWgrad(job) && !VersionBefore(job.memtune.versions.megatron_core, 0, 14);
}

}  // namespace memtune::model
