// The NCCL settings of a job: memtune.versions.nccl and the NCCL_* entries of memtune.env,
// with NCCL's defaults for that version (NVIDIA/nccl src/init.cc, src/misc/cudawrap.cc,
// src/include/device.h; docs/non-pytorch.md section 2).
#include <charconv>
#include <string_view>

#include "memtune/core/units.h"
#include "memtune/nonpytorch/non_pytorch.h"
#include "nonpytorch/internal.h"

namespace memtune::nonpytorch {
namespace {

// "2.27.7" or "2.27" -> 22707 / 22700.
Result<int> ParseVersion(std::string_view text, const std::string& field) {
  int parts[3] = {0, 0, 0};
  int n = 0;
  const char* p = text.data();
  const char* end = text.data() + text.size();
  while (p < end && n < 3) {
    auto [next, ec] = std::from_chars(p, end, parts[n]);
    if (ec != std::errc() || parts[n] < 0 || parts[n] > 99) break;
    ++n;
    p = next;
    if (p == end) break;
    if (*p != '.') {
      n = 0;
      break;
    }
    ++p;
  }
  if (n < 2 || p != end || parts[0] != 2) {
    return InvalidConfig(field, field + " = '" + std::string(text) +
                                    "' is not an NCCL version; write MAJOR.MINOR[.PATCH], "
                                    "e.g. 2.27.7 (NCCL 2.x)");
  }
  return parts[0] * 10000 + parts[1] * 100 + parts[2];
}

const std::string* Env(const model::Job& job, const char* name) {
  const auto it = job.memtune.env.find(name);
  return it == job.memtune.env.end() ? nullptr : &it->second;
}

// An integer env entry NCCL reads with ncclGetEnv + strtoll (a byte count or a count).
Result<std::int64_t> EnvInt(const std::string& text, const char* name, std::int64_t lo,
                            std::int64_t hi) {
  std::int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || p != end || v < lo || v > hi) {
    return InvalidConfig(std::string("memtune.env.") + name,
                         std::string("memtune.env.") + name + " = '" + text +
                             "' must be an integer from " + std::to_string(lo) + " to " +
                             std::to_string(hi));
  }
  return v;
}

}  // namespace

Result<NcclSettings> ReadNcclSettings(const model::Job& job) {
  NcclSettings s;
  if (!job.memtune.versions.nccl.empty()) {
    MEMTUNE_TRY(s.version, ParseVersion(job.memtune.versions.nccl, "memtune.versions.nccl"));
  }
  // cuMem is on by default from 2.19 (driver >= 12.0); lazy connection from 2.22.
  s.cumem = s.version >= 21900;
  s.runtime_connect = s.version >= 22200;
  s.nvls = s.version >= 21700;  // NVLink SHARP support arrived in 2.17
  struct IntEnv {
    const char* name;
    std::int64_t* target;
    std::int64_t lo, hi;
  };
  std::int64_t cumem = -2, runtime = s.runtime_connect ? 1 : 0, nvls = 2;
  std::int64_t min_ch = 0, max_ch = 0;
  const IntEnv ints[] = {
      {"NCCL_CUMEM_ENABLE", &cumem, -2, 1},
      {"NCCL_RUNTIME_CONNECT", &runtime, 0, 1},
      {"NCCL_NVLS_ENABLE", &nvls, 0, 2},
      {"NCCL_BUFFSIZE", &s.buffsize_bytes, 1, kGiB},
      {"NCCL_LL_BUFFSIZE", &s.ll_buffsize_bytes, 1, kGiB},
      {"NCCL_LL128_BUFFSIZE", &s.ll128_buffsize_bytes, 1, kGiB},
      {"NCCL_P2P_NET_CHUNKSIZE", &s.p2p_net_chunksize_bytes, 1, kGiB},
      {"NCCL_P2P_NVL_CHUNKSIZE", &s.p2p_nvl_chunksize_bytes, 1, kGiB},
      {"NCCL_MIN_NCHANNELS", &min_ch, 1, kMaxChannels},
      {"NCCL_MAX_NCHANNELS", &max_ch, 1, kMaxChannels},
  };
  for (const IntEnv& e : ints) {
    if (const std::string* text = Env(job, e.name)) {
      MEMTUNE_TRY(*e.target, EnvInt(*text, e.name, e.lo, e.hi));
    }
  }
  if (cumem >= 0) s.cumem = cumem == 1;
  // runtimeConn = cuMemSupport && NCCL_RUNTIME_CONNECT (src/init.cc); absent before 2.22.
  s.runtime_connect = s.cumem && runtime == 1 && s.version >= 22200;
  s.nvls = s.nvls && nvls != 0;
  s.min_channels = static_cast<int>(min_ch);
  s.max_channels = static_cast<int>(max_ch);
  return s;
}

}  // namespace memtune::nonpytorch
