// The time of one transformer layer (and of the embedding / output layer) for one
// micro-batch on one rank: forward, backward and what recompute adds to the backward, split
// into GPU work and CPU dispatch (docs/step-time.md, "One layer").
#pragma once

#include <string_view>
#include <vector>

#include "memtune/model/job.h"
#include "steptime/hardware.h"
#include "steptime/kernels.h"

namespace memtune::steptime {

// GPU seconds of one pass by kind of work, and the CPU seconds that dispatch it.
struct PassTime {
  double gemm = 0;
  double attention = 0;
  double elementwise = 0;
  double comm_exposed = 0;  // TP / CP / EP communication not hidden behind compute
  double host = 0;          // CPU dispatch time (eager ops, graph launches)
  // Time the GPU idles after a host synchronisation (the CPU can no longer run ahead).
  double stall = 0;

  double Gpu() const { return gemm + attention + elementwise + comm_exposed; }
  // Wall time: the GPU waits for the CPU when dispatch is slower (launch-bound).
  double Wall() const { return (Gpu() > host ? Gpu() : host) + stall; }
  PassTime& operator+=(const PassTime& other);
};

struct LayerTime {
  PassTime forward;
  PassTime backward;   // without recompute
  PassTime recompute;  // forward work re-run in the backward
};

// What every layer of a job shares: the layout, the token counts and the links.
struct LayerContext {
  const model::Job* job = nullptr;
  Hardware hw;
  int tp = 1, cp = 1, ep = 1, etp = 1;
  bool sp = false;          // sequence parallel (TP > 1)
  bool tp_overlap = false;  // TE userbuffers overlap of TP collectives with GEMMs
  double tokens = 0;        // rows of the GEMMs: micro_batch_size x seq / cp
  double tokens_sp = 0;     // per rank outside the TP region: tokens / tp with SP
  Link tp_link;
  Link cp_link;
  Link ep_link;
  bool frozen = false;  // PEFT: base weights get no weight gradient
  bool fsdp2 = false;   // torchtitan FSDP2 (eager PyTorch modules, torch.compile)
};

LayerContext MakeLayerContext(const model::Job& job, const Hardware& hw);

// One transformer layer of the given kind, in `dtype` (FP8 / FP4 layers, or BF16 where the
// job keeps first/last layers in BF16). `recompute_full` re-runs the whole forward;
// otherwise the job's selective recompute_modules decide.
LayerTime TransformerLayerTime(const LayerContext& ctx, bool moe_layer, GemmDtype dtype,
                               bool recompute_full);

// The word embedding (first stage) and the final norm + output layer + loss (last stage).
LayerTime EmbeddingTime(const LayerContext& ctx);
LayerTime OutputLayerTime(const LayerContext& ctx);

}  // namespace memtune::steptime
