// The non-PyTorch model's pieces: the communicators a rank runs collectives on, and what
// NCCL allocates for one of them (docs/non-pytorch.md sections 2-3).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "memtune/model/gpu_catalog.h"
#include "memtune/model/job.h"
#include "memtune/nonpytorch/non_pytorch.h"

namespace memtune::nonpytorch {

inline constexpr int kMaxChannels = 64;  // NCCL MAXCHANNELS (src/include/device.h)

// What a process group is used for, as NCCL sees it: which algorithms connect.
enum Use : unsigned {
  kSmallAllReduce = 1u << 0,     // scalars: barrier, loss, grad norm, found-inf, timers
  kBulkAllReduce = 1u << 1,      // gradient buckets, TP all-reduce without sequence parallelism
  kBulkGatherScatter = 1u << 2,  // reduce-scatter / all-gather of buckets or activations
  kSmallGather = 1u << 3,        // small all-gathers (TE userbuffers bootstrap)
  kPointToPoint = 1u << 4,       // send/recv to `peers` (pipeline, CP ring, EP all-to-all)
};

// One communicator of the rank: its members' placement and its use.
struct Comm {
  std::string name;     // "tp", "dp", "world", "pp_pair.next", ...
  std::string why;      // what runs on it, with the upstream source
  int ranks = 0;        // members
  int nodes = 0;        // distinct nodes among them
  int local_ranks = 0;  // members on this rank's node
  unsigned uses = 0;    // Use bits
  // Point-to-point peers this rank sends to / receives from (kPointToPoint): on this
  // node, and on other nodes.
  int p2p_peers_local = 0;
  int p2p_peers_remote = 0;
  Moment moment = Moment::kStartup;
};

// The communicators pipeline rank `pp_rank` creates and uses (groups of one rank and
// groups nothing runs on are left out). `gpus_per_node` places ranks on nodes.
std::vector<Comm> RankComms(const model::Job& job, int pp_rank, int gpus_per_node);

// The hardware facts NCCL's sizes depend on.
struct Fabric {
  bool nvlink = true;  // GPUs of a node talk over NVLink/NVSwitch (else PCIe)
  bool nvls = true;    // NVLink SHARP capable (NVSwitch, compute capability >= 9.0)
};
Fabric FabricOf(const model::GpuSpec* gpu);

// What NCCL allocates on this GPU for `comm`: central, low and high bytes and a one-line
// account of the terms.
struct CommBytes {
  std::int64_t central = 0, low = 0, high = 0;
  std::string detail;
};
CommBytes NcclCommBytes(const Comm& comm, const NcclSettings& settings, const Fabric& fabric);

}  // namespace memtune::nonpytorch
