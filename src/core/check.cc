// Failure path of MEMTUNE_CHECK.
#include "memtune/core/check.h"

#include <cstdio>
#include <cstdlib>

namespace memtune::internal {

void CheckFailed(const char* file, int line, const char* condition, const char* why) {
  std::fprintf(stderr, "memtune: internal error at %s:%d: %s (%s)\n", file, line, why, condition);
  std::abort();
}

}  // namespace memtune::internal
