// MEMTUNE_CHECK: invariant checks for programmer errors. User input never reaches it;
// user errors are Error values (core/result.h).
#pragma once

namespace memtune::internal {
// Prints "memtune: internal error at FILE:LINE: WHY (CONDITION)" to stderr and aborts.
[[noreturn]] void CheckFailed(const char* file, int line, const char* condition, const char* why);
}  // namespace memtune::internal

#define MEMTUNE_CHECK(cond, why) \
  ((cond) ? (void)0 : ::memtune::internal::CheckFailed(__FILE__, __LINE__, #cond, why))
