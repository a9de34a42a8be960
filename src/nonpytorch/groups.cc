// The NCCL communicators one rank creates and uses. PyTorch creates a process group's NCCL
// communicator at its first collective when init_process_group gets no device_id, as
// Megatron-LM and Bridge call it (Bridge training/initialize.py), so a group nothing runs
// on costs no device memory. Ranks are numbered in Megatron-Core's default order
// tp-cp-ep-dp-pp (parallel_state.RankGenerator), experts tp-ep-dp-pp, torchtitan's mesh
// [pp, dp_replicate, dp_shard, cp, tp]; rank r sits on node r / gpus_per_node.
#include <algorithm>
#include <cstdint>

#include "nonpytorch/internal.h"

namespace memtune::nonpytorch {
namespace {

struct Placement {
  int world = 1;
  int gpus_per_node = 8;
  int self = 0;  // this rank's global rank
  int Node(int rank) const { return rank / gpus_per_node; }
};

// A group's members in increasing order: `blocks` runs of `count` ranks base + b *
// block_stride + stride * i (a plain strided group has one block).
struct Members {
  std::int64_t base = 0, stride = 1, count = 1;
  std::int64_t blocks = 1, block_stride = 0;
};

// The ranks base + stride * i, i < size.
Members Strided(std::int64_t base, std::int64_t stride, std::int64_t size) {
  return {base, stride, size, 1, 0};
}

// A group of `members` (including the placement's self). Ranks come in increasing order,
// so their nodes do too: distinct nodes are counted as changes, and a contiguous run in
// O(1), so a million-rank world costs nothing.
Comm MakeComm(const Placement& at, const Members& m, std::string name, std::string why,
              unsigned uses, Moment moment) {
  Comm c;
  c.name = std::move(name);
  c.why = std::move(why);
  c.ranks = static_cast<int>(m.count * m.blocks);
  const std::int64_t g = at.gpus_per_node;
  const std::int64_t self_node = at.self / g;
  std::int64_t nodes = 0, local = 0, last_node = -1;
  for (std::int64_t b = 0; b < m.blocks; ++b) {
    const std::int64_t start = m.base + b * m.block_stride;
    if (m.stride == 1) {
      const std::int64_t first = start / g, last = (start + m.count - 1) / g;
      nodes += last - first + 1 - (first == last_node ? 1 : 0);
      last_node = last;
      if (self_node >= first && self_node <= last) {
        local += std::min(start + m.count, (self_node + 1) * g) - std::max(start, self_node * g);
      }
      continue;
    }
    for (std::int64_t i = 0; i < m.count; ++i) {
      const std::int64_t node = (start + m.stride * i) / g;
      if (node != last_node) ++nodes;
      last_node = node;
      if (node == self_node) ++local;
    }
  }
  c.nodes = static_cast<int>(nodes);
  c.local_ranks = static_cast<int>(local);
  c.uses = uses;
  c.moment = moment;
  return c;
}

// A point-to-point pair communicator with `peer`.
Comm PairComm(const Placement& at, int peer, std::string name, std::string why, Moment moment) {
  const int low = std::min(at.self, peer), high = std::max(at.self, peer);
  Comm c = MakeComm(at, Strided(low, high - low, 2), std::move(name), std::move(why), kPointToPoint,
                    moment);
  (at.Node(peer) == at.Node(at.self) ? c.p2p_peers_local : c.p2p_peers_remote) = 1;
  return c;
}

// Counts the distinct peers other than self, on this node and on others.
void AddPeers(const Placement& at, std::vector<int> peers, Comm& c) {
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  for (int p : peers) {
    if (p == at.self) continue;
    (at.Node(p) == at.Node(at.self) ? c.p2p_peers_local : c.p2p_peers_remote) += 1;
  }
}

// Every member of a strided group but self, as peers (the MoE all-to-all).
void AddGroupPeers(const Placement& at, const Members& m, Comm& c) {
  for (std::int64_t i = 0; i < m.count; ++i) {
    const std::int64_t r = m.base + m.stride * i;
    if (r == at.self) continue;
    (r / at.gpus_per_node == at.self / at.gpus_per_node ? c.p2p_peers_local : c.p2p_peers_remote) +=
        1;
  }
}

std::vector<Comm> MegatronComms(const model::Job& job, int pp_rank, Placement at) {
  const auto& m = job.model;
  const int tp = std::max(1, m.tensor_model_parallel_size);
  const int pp = std::max(1, m.pipeline_model_parallel_size);
  const int cp = std::max(1, m.context_parallel_size);
  const int dp = std::max(1, model::DataParallelSize(job));
  const int ep = std::max(1, m.expert_model_parallel_size);
  const int etp = std::max(1, model::ExpertTensorParallelSize(job));
  const int stage = tp * cp * dp;  // ranks per pipeline stage
  at.self = pp_rank * stage;
  const bool dist_opt = job.optimizer.use_distributed_optimizer || job.ddp.use_megatron_fsdp;
  const bool vpp = m.virtual_pipeline_model_parallel_size.value_or(1) > 1;
  const bool batched_p2p = m.batch_p2p_comm.value_or(!vpp);
  std::vector<Comm> comms;
  auto add = [&](Comm c) {
    if (c.ranks > 1) comms.push_back(std::move(c));
  };
  const Members all = Strided(0, 1, at.world);
  add(MakeComm(at, all, "world",
               "the init barrier and the per-iteration all_reduce of the exit flag and timers "
               "(Bridge training/train.py)",
               kSmallAllReduce, Moment::kStartup));
  if (m.tp_comm_overlap && tp > 1) {
    // TE module/base.py initialize_ub: new_group(backend="nccl") over the world and over
    // each TP domain for the userbuffers bootstrap (all-gather + barrier).
    add(MakeComm(at, all, "te_ub_world",
                 "Transformer Engine initialize_ub bootstrap group (all-gather, barrier)",
                 kSmallGather | kSmallAllReduce, Moment::kStartup));
    add(MakeComm(at, Strided(at.self, 1, tp), "te_ub_tp",
                 "Transformer Engine initialize_ub TP-domain bootstrap group", kSmallGather,
                 Moment::kStartup));
  }
  add(MakeComm(
      at, Strided(at.self, 1, tp), "tp",
      m.sequence_parallel ? "sequence-parallel all-gather / reduce-scatter of activations, the "
                            "vocab-parallel cross-entropy all-reduce (MCore tensor_parallel)"
                          : "tensor-parallel all-reduce of activations (MCore tensor_parallel)",
      (m.sequence_parallel ? kBulkGatherScatter : 0u) | kBulkAllReduce, Moment::kFirstForward));
  add(MakeComm(at, Strided(at.self, tp, cp), "cp",
               "context-parallel ring attention send/recv (TE attention, cp_comm_type p2p)",
               kPointToPoint, Moment::kFirstForward));
  if (!comms.empty() && comms.back().name == "cp") {
    AddPeers(at, {at.self + tp * (1 % cp), at.self + tp * ((cp - 1) % cp)}, comms.back());
  }
  // Data parallel with CP (MCore's gradient group): the distributed optimizer's
  // reduce-scatter / all-gather, or DDP's all-reduce; the loss average is a small one.
  add(MakeComm(at, Strided(at.self, tp, cp * dp), "dp",
               dist_opt ? "gradient reduce-scatter and parameter all-gather of the distributed "
                          "optimizer, the loss average (MCore distributed/param_and_grad_buffer)"
                        : "gradient all-reduce of DDP, the loss average",
               (dist_opt ? kBulkGatherScatter : kBulkAllReduce) | kSmallAllReduce,
               job.ddp.overlap_grad_reduce ? Moment::kFirstGradSync : Moment::kFirstOptimizerStep));
  if (dist_opt) {
    const int instances = std::max(1, job.ddp.num_distributed_optimizer_instances);
    const int span = std::max(1, at.world / instances);
    const Members instance = Strided(at.self / span * span, 1, span);
    add(MakeComm(at, instance, "dist_opt_instance",
                 "grad-norm and zero-count all-reduce of the distributed optimizer "
                 "(MCore optimizer, intra distributed-optimizer instance group)",
                 kSmallAllReduce, Moment::kFirstOptimizerStep));
  }
  if (tp * pp > 1 && pp > 1) {
    const Members mp{0, 1, tp, pp, stage};  // TP ranks 0..tp-1 of every stage
    add(MakeComm(at, mp, "model_parallel",
                 "per-iteration logical_and / max reductions on the model-parallel group "
                 "(Bridge training/train.py)",
                 kSmallAllReduce, Moment::kFirstOptimizerStep));
  }
  if (pp > 1) {
    const Members pp_group = Strided(at.self % stage, stage, pp);
    const int next = ((pp_rank + 1) % pp) * stage + at.self % stage;
    const int prev = ((pp_rank + pp - 1) % pp) * stage + at.self % stage;
    // With interleaving the last stage feeds the first stage's next chunk: both wrap.
    const bool has_next = vpp || pp_rank + 1 < pp;
    const bool has_prev = vpp || pp_rank > 0;
    if (!batched_p2p) {
      // Unbatched send/recv (model.batch_p2p_comm; by default with interleaving, where
      // Bridge comm_overlap.py and Megatron-LM arguments.py turn overlap_p2p_comm on): MCore
      // p2p_communication issues single isend/irecv, and ProcessGroupNCCL creates a 2-rank
      // communicator per peer.
      if (has_next) {
        add(PairComm(at, next, "pp_pair.next",
                     "single isend/irecv to the next stage (a 2-rank communicator)",
                     Moment::kFirstForward));
      }
      if (has_prev && (prev != next || !has_next)) {
        add(PairComm(at, prev, "pp_pair.prev",
                     "single isend/irecv to the previous stage (a 2-rank communicator)",
                     Moment::kFirstForward));
      }
      add(MakeComm(at, pp_group, "pp", "memory-report max over the pipeline group", kSmallAllReduce,
                   Moment::kFirstOptimizerStep));
    } else {
      Comm c = MakeComm(at, pp_group, "pp",
                        "batched pipeline send/recv (batch_isend_irecv on the pipeline group)",
                        kPointToPoint | kSmallAllReduce, Moment::kFirstForward);
      std::vector<int> peers;
      if (has_next) peers.push_back(next);
      if (has_prev) peers.push_back(prev);
      AddPeers(at, peers, c);
      add(std::move(c));
    }
    const bool first = pp_rank == 0, last = pp_rank == pp - 1;
    if (m.share_embeddings_and_output_weights && (first || last)) {
      add(MakeComm(at, Strided(at.self % stage, (pp - 1) * stage, 2), "embedding",
                   "tied-embedding gradient all-reduce between the first and last stage",
                   kBulkAllReduce, Moment::kFirstOptimizerStep));
    }
  }
  if (m.num_moe_experts.value_or(0) > 0 && ep > 1) {
    const Members ep_group = Strided(at.self, etp, ep);
    Comm c = MakeComm(at, ep_group, "ep", "MoE token dispatch / combine all-to-all", kPointToPoint,
                      Moment::kFirstForward);
    AddGroupPeers(at, ep_group, c);
    add(std::move(c));
    const int edp = std::max(1, stage / (etp * ep));
    add(MakeComm(
        at, Strided(at.self, etp * ep, edp), "expert_dp",
        "expert gradient reduce-scatter / all-reduce over the expert data-parallel "
        "group",
        dist_opt ? kBulkGatherScatter : kBulkAllReduce,
        job.ddp.overlap_grad_reduce ? Moment::kFirstGradSync : Moment::kFirstOptimizerStep));
  }
  return comms;
}

// torchtitan: the mesh [pp, dp_replicate, dp_shard, cp, tp]; FSDP2 all-gathers parameters
// and reduce-scatters gradients over dp_shard x cp, all-reduces them over dp_replicate.
std::vector<Comm> Fsdp2Comms(const model::Job& job, int pp_rank, Placement at) {
  const auto& m = job.model;
  const int tp = std::max(1, m.tensor_model_parallel_size);
  const int cp = std::max(1, m.context_parallel_size);
  const int pp = std::max(1, m.pipeline_model_parallel_size);
  const int per_stage = std::max(1, at.world / pp);
  int shard = job.memtune.fsdp2.shard_degree;
  if (shard <= 0) shard = std::max(1, per_stage / (tp * cp));
  const int replicate = std::max(1, per_stage / (shard * tp * cp));
  at.self = std::clamp(pp_rank, 0, pp - 1) * per_stage;  // the stage's first rank
  std::vector<Comm> comms;
  auto add = [&](Comm c) {
    if (c.ranks > 1) comms.push_back(std::move(c));
  };
  const Members all = Strided(0, 1, at.world);
  add(MakeComm(at, all, "world", "the init barrier and the loss / grad-norm all-reduce",
               kSmallAllReduce, Moment::kStartup));
  add(MakeComm(at, Strided(at.self, 1, tp), "tp", "tensor-parallel all-gather / reduce-scatter",
               kBulkGatherScatter | kBulkAllReduce, Moment::kFirstForward));
  add(MakeComm(at, Strided(at.self, tp, shard * cp), "dp_shard_cp",
               "FSDP2 parameter all-gather and gradient reduce-scatter", kBulkGatherScatter,
               Moment::kFirstForward));
  add(MakeComm(at, Strided(at.self, tp * cp * shard, replicate), "dp_replicate",
               "HSDP gradient all-reduce over the replicas", kBulkAllReduce,
               Moment::kFirstGradSync));
  if (pp > 1) {
    // torch.distributed.pipelining stage.py: activations and gradients go through
    // batch_isend_irecv on the pipeline group (the mesh's outermost dimension); with
    // several stages per rank (loop placement) the last rank feeds the first.
    Comm c = MakeComm(at, Strided(0, per_stage, pp), "pp",
                      "pipeline send/recv (batch_isend_irecv on the pp mesh dimension)",
                      kPointToPoint, Moment::kFirstForward);
    const bool wraps = m.virtual_pipeline_model_parallel_size.value_or(1) > 1;
    std::vector<int> peers;
    if (pp_rank + 1 < pp || wraps) peers.push_back(((pp_rank + 1) % pp) * per_stage);
    if (pp_rank > 0 || wraps) peers.push_back(((pp_rank + pp - 1) % pp) * per_stage);
    AddPeers(at, peers, c);
    add(std::move(c));
  }
  return comms;
}

}  // namespace

std::vector<Comm> RankComms(const model::Job& job, int pp_rank, int gpus_per_node) {
  Placement at;
  at.world = std::max(1, job.memtune.world_size);
  at.gpus_per_node = std::clamp(gpus_per_node, 1, at.world);
  if (at.world <= 1) return {};
  if (job.memtune.framework == model::Framework::kFsdp2) return Fsdp2Comms(job, pp_rank, at);
  return MegatronComms(job, pp_rank, at);
}

}  // namespace memtune::nonpytorch
