// What NCCL allocates on one GPU for one communicator (NVIDIA/nccl v2.27.7 593de54e:
// src/init.cc, src/channel.cc, src/transport/{p2p,net,nvls,generic}.cc, src/graph/paths.cc,
// src/include/{comm,device,alloc}.h; channel counts from NCCL's own logs on H100 systems).
// docs/non-pytorch.md section 3 derives each term.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "memtune/core/units.h"
#include "nonpytorch/internal.h"

namespace memtune::nonpytorch {
namespace {

constexpr std::int64_t kGranule = 2 * kMiB;  // cuMem granularity; CUDA_IPC_MIN (comm.h)
constexpr std::int64_t kConnMem = 4 * kKiB;  // ncclSendMem / ncclRecvMem headers
constexpr int kNvlsChannels = 16;            // NVLS_NCHANNELS_SM90 (transport/nvls.cc)
constexpr int kSharedSteps = 16;             // NCCL_SHARED_STEPS (net shared buffers)
constexpr int kMaxP2pPerNvlPeer = 32;        // 2 x 18 NVLinks, capped (graph/paths.cc)
constexpr int kNetPeerChannels = 2;          // NCCL_NCHANNELS_PER_NET_PEER default

std::int64_t Align(std::int64_t bytes) { return (bytes + kGranule - 1) / kGranule * kGranule; }

int Pow2Up(int v) {
  int p = 1;
  while (p < v) p <<= 1;
  return p;
}

struct Term {
  const char* what;
  std::int64_t bytes;
  enum Kind { kCertain, kLikely, kPossible } kind;
};

}  // namespace

Fabric FabricOf(const model::GpuSpec* gpu) {
  Fabric f;
  if (gpu == nullptr) return f;  // assume an NVSwitch node of Hopper GPUs
  f.nvlink = gpu->interconnect_bandwidth_gbps > 0;
  const int major = std::atoi(gpu->compute_capability.c_str());
  // NVLink SHARP needs NVSwitch (8-GPU NVLink nodes) and compute capability 9.0 or later.
  f.nvls = f.nvlink && gpu->gpus_per_node >= 8 && major >= 9 &&
           gpu->compute_capability.rfind("gfx", 0) != 0;
  return f;
}

CommBytes NcclCommBytes(const Comm& comm, const NcclSettings& s, const Fabric& fabric) {
  // Channels: 24 collective channels in an NVSwitch node, 16 across nodes of several GPUs,
  // 2 with one GPU per node or over PCIe (NCCL INIT logs); p2p channels round up to a
  // power of two (ncclTopoComputeP2pChannels).
  int coll = comm.nodes == 1 ? (fabric.nvlink ? 24 : 2) : (comm.local_ranks == 1 ? 2 : 16);
  if (s.max_channels > 0) coll = std::min(coll, s.max_channels);
  if (s.min_channels > 0) coll = std::max(coll, s.min_channels);
  coll = std::clamp(coll, 1, kMaxChannels);
  const int p2p = std::min(Pow2Up(coll), kMaxChannels);
  const int local = std::max(1, comm.local_ranks);
  const bool multi_node = comm.nodes > 1;

  // Protocol buffers per connector (computeBuffSizes; p2p.cc and net.cc setup): on Hopper
  // the receiver holds LL + LL128 + Simple, rounded up to 2 MiB; a NET sender holds LL128 +
  // Simple on the GPU, a NET receiver all three.
  const std::int64_t protocols = s.ll_buffsize_bytes + s.ll128_buffsize_bytes + s.buffsize_bytes;
  const std::int64_t recv_intra = Align(kConnMem + protocols);
  const std::int64_t send_intra = Align(kConnMem);
  const std::int64_t send_net = Align(s.ll128_buffsize_bytes + s.buffsize_bytes);
  const std::int64_t recv_net = Align(protocols);
  const std::int64_t intra_pair = recv_intra + send_intra;
  // Per ring channel: one send and one receive connector; with several nodes 1/local of the
  // channels cross the node boundary at this GPU.
  const std::int64_t ring_channel =
      intra_pair + (multi_node ? (send_net + recv_net - intra_pair) / local : 0);
  const std::int64_t ring = coll * ring_channel;
  const std::int64_t tree =
      comm.ranks > 2 ? coll * intra_pair + (multi_node ? coll * (send_net + recv_net) / local : 0)
                     : 0;
  const bool nvls = s.nvls && s.cumem && fabric.nvls && local > 2;
  // NVLS buffer per rank (transport/nvls.cc): 2 x 16 channels x chunk per head (heads =
  // local ranks); the chunk is 1 MiB from 2.22, 3 MiB in 2.21, BUFFSIZE + 2 MiB before.
  const std::int64_t nvls_chunk = s.version >= 22200   ? kMiB
                                  : s.version >= 22100 ? 3 * kMiB
                                                       : s.buffsize_bytes + 2 * kMiB;
  const std::int64_t nvls_buffer = nvls ? 2LL * kNvlsChannels * nvls_chunk * local : 0;

  std::vector<Term> terms;
  // ncclCommInitRank: 3 granule-sized structures per channel (channel.cc initChannel) and
  // two for the device communicator (init.cc devCommSetup); NVLS setup adds 16 + 1.
  terms.push_back(
      {"init", s.cumem ? kGranule * (2 + 3LL * std::max(coll, p2p)) : kGranule, Term::kCertain});
  if (nvls) terms.push_back({"nvls setup", kGranule * (kNvlsChannels + 1), Term::kCertain});

  const bool eager = !s.runtime_connect;
  if (eager) {
    // Without runtime connection, init connects ring, tree and NVLS on every channel and
    // creates the shared p2p send pool (P x 16 x chunk).
    terms.push_back({"ring", ring, Term::kCertain});
    if (tree > 0) terms.push_back({"tree", tree, Term::kCertain});
    if (nvls) terms.push_back({"nvls", nvls_buffer, Term::kCertain});
    const std::int64_t chunk = std::min(
        multi_node ? s.p2p_net_chunksize_bytes : s.p2p_nvl_chunksize_bytes, s.buffsize_bytes / 8);
    terms.push_back({"p2p pool", std::int64_t{p2p} * kSharedSteps * chunk, Term::kCertain});
  } else {
    // Lazy connection: each algorithm connects all channels at its first collective.
    bool ring_used = false, tree_used = false, nvls_used = false;
    Term::Kind ring_kind = Term::kPossible, tree_kind = Term::kPossible,
               nvls_kind = Term::kPossible;
    auto use = [](bool& used, Term::Kind& kind, Term::Kind k) {
      used = true;
      kind = std::min(kind, k);
    };
    if (comm.uses & kSmallAllReduce) {
      // Small all-reduces take tree (LL) across nodes, ring inside one.
      if (multi_node && tree > 0) {
        use(tree_used, tree_kind, Term::kLikely);
        use(ring_used, ring_kind, Term::kPossible);
      } else {
        use(ring_used, ring_kind, Term::kCertain);
      }
    }
    if (comm.uses & (kBulkAllReduce | kBulkGatherScatter | kSmallGather)) {
      use(ring_used, ring_kind, Term::kCertain);
    }
    if ((comm.uses & kBulkAllReduce) && multi_node && tree > 0) {
      use(tree_used, tree_kind, Term::kPossible);
    }
    if ((comm.uses & (kBulkAllReduce | kBulkGatherScatter)) && nvls) {
      use(nvls_used, nvls_kind, Term::kLikely);
    }
    if (ring_used) terms.push_back({"ring", ring, ring_kind});
    if (tree_used) terms.push_back({"tree", tree, tree_kind});
    if (nvls_used) terms.push_back({"nvls", nvls_buffer, nvls_kind});
  }
  if (comm.uses & kPointToPoint) {
    // Send and receive with each peer: NVLink peers get p2p connectors on up to 32
    // channels; NET peers share one pool per direction of P x 16 x min(chunk, BUFFSIZE/8).
    const int per_peer =
        fabric.nvlink ? std::min(p2p, kMaxP2pPerNvlPeer) : std::min(p2p, kNetPeerChannels);
    if (comm.p2p_peers_local > 0) {
      terms.push_back({"p2p local peers",
                       std::int64_t{comm.p2p_peers_local} * per_peer * intra_pair, Term::kCertain});
    }
    if (comm.p2p_peers_remote > 0 && !eager) {
      const std::int64_t chunk = std::min(s.p2p_net_chunksize_bytes, s.buffsize_bytes / 8);
      terms.push_back({"p2p net pool", 2LL * p2p * kSharedSteps * chunk, Term::kCertain});
    }
  }

  CommBytes out;
  out.detail = std::to_string(comm.ranks) + " ranks on " + std::to_string(comm.nodes) +
               (comm.nodes == 1 ? " node" : " nodes") + ", " + std::to_string(coll) + " channels:";
  bool first = true;
  for (const Term& t : terms) {
    if (t.kind != Term::kPossible) out.central += t.bytes;
    if (t.kind == Term::kCertain) out.low += t.bytes;
    out.high += t.bytes;
    out.detail += std::string(first ? " " : " + ") + t.what + " " + std::to_string(t.bytes / kMiB) +
                  " MiB" + (t.kind == Term::kPossible ? " (if used)" : "");
    first = false;
  }
  return out;
}

}  // namespace memtune::nonpytorch
