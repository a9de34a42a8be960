// One pipeline rank's activations walked layer by layer (rank_walk.h WalkRankActivations).
#include "rank_walk.h"

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "tensors/layer_plan.h"
#include "tensors/layer_walk.h"
#include "tensors/moe_sizes.h"

namespace memtune::estimate::internal {
namespace {

using namespace ::memtune::tensors;  // NOLINT(google-build-using-namespace): the tensor model

// Live bytes relative to a pass's start, after each allocation and at its end.
class Recorder {
 public:
  using Handle = int;
  static constexpr Handle kNone = -1;
  Handle Alloc(std::int64_t bytes, const char*) {
    if (bytes == 0) return kNone;
    sizes_.push_back(bytes);
    live_ += bytes;
    if (recording_) highs_.push_back(live_ - start_);
    return static_cast<Handle>(sizes_.size()) - 1;
  }
  void Free(Handle h) {
    if (h == kNone) return;
    live_ -= std::exchange(sizes_[h], 0);
  }
  void Hold(int slot, Handle h) { slots_[slot] = h; }
  Handle Held(int slot) const { return slots_[slot]; }
  void Release(int slot) { Free(std::exchange(slots_[slot], kNone)); }
  void Recompute(bool) {}

  void Start() {
    recording_ = true;
    start_ = live_;
    highs_.clear();
  }
  std::int64_t net() const { return live_ - start_; }
  const std::vector<std::int64_t>& highs() const { return highs_; }

  Recorder() { slots_.fill(kNone); }

 private:
  std::vector<std::int64_t> sizes_;
  std::array<Handle, kLayerSlots> slots_;
  std::vector<std::int64_t> highs_;
  std::int64_t live_ = 0, start_ = 0;
  bool recording_ = false;
};

// The passes of a layer kind at `lo` and at `hi` sizes, `rows` apart: false when the two do
// not line up into whole bytes per row.
bool Fit(const std::vector<std::int64_t>& lo, const std::vector<std::int64_t>& hi,
         std::int64_t lo_net, std::int64_t hi_net, std::int64_t rows, std::int64_t min_x,
         PassLines& out) {
  if (lo.size() != hi.size()) return false;
  auto line = [&](std::int64_t a, std::int64_t b_rows, Line& l) {
    if (rows == 0) {
      l = {a, 0};
      return b_rows == 0;
    }
    if (b_rows % rows != 0) return false;
    l = {a, b_rows / rows};
    return true;
  };
  if (!line(lo_net, hi_net - lo_net, out.net)) return false;
  std::vector<Line> all(lo.size());
  for (std::size_t i = 0; i < lo.size(); ++i) {
    if (!line(lo[i], hi[i] - lo[i], all[i])) return false;
  }
  // Line j covers line i over x >= min_x when it is no lower at min_x and no shallower.
  out.highs.clear();
  for (std::size_t i = 0; i < all.size(); ++i) {
    bool covered = false;
    for (std::size_t j = 0; j < all.size() && !covered; ++j) {
      if (j == i) continue;
      const bool ge = all[j].b >= all[i].b && all[j].At(min_x) >= all[i].At(min_x);
      const bool same = all[j].b == all[i].b && all[j].a == all[i].a;
      covered = ge && (!same || j < i);
    }
    if (!covered) out.highs.push_back(all[i]);
  }
  return true;
}

struct Recorded {
  std::vector<std::int64_t> fwd_highs, bwd_highs;
  std::int64_t fwd_net = 0, bwd_net = 0;
};

Recorded Record(const LayerSizes& z, const LayerShape& s) {
  Recorded out;
  Recorder r;
  const int input = r.Alloc(s.local_hidden, "act.ln1_input");
  r.Start();
  const int output = LayerForward(z, s, LayerKeep::kAll, input, r);
  out.fwd_highs = r.highs();
  out.fwd_net = r.net();
  r.Free(output);  // (the next layer's input)
  const int grad = r.Alloc(s.local_hidden, "bwd.grad_out");
  r.Start();
  LayerBackward(z, s, grad, r);
  out.bwd_highs = r.highs();
  out.bwd_net = r.net();
  return out;
}

// Both passes of a kind; `moe` null for a dense kind (no rows).
bool MakeKindLines(const LayerSizes& base, const MoeLayerSizes* moe, const LayerShape& s,
                   KindLines& out) {
  const Recorded lo = Record(base, s);
  if (moe == nullptr) {
    return Fit(lo.fwd_highs, lo.fwd_highs, lo.fwd_net, lo.fwd_net, 0, 0, out.forward) &&
           Fit(lo.bwd_highs, lo.bwd_highs, lo.bwd_net, lo.bwd_net, 0, 0, out.backward);
  }
  const std::int64_t rows = moe->balanced_rows;
  const Recorded hi = Record(moe->At(2 * rows), s);
  return Fit(lo.fwd_highs, hi.fwd_highs, lo.fwd_net, hi.fwd_net, rows, -rows, out.forward) &&
         Fit(lo.bwd_highs, hi.bwd_highs, lo.bwd_net, hi.bwd_net, rows, -rows, out.backward);
}

OutputLines MakeOutputLines(const JobFacts& f) {
  OutputLines out;
  for (int defer = 0; defer < 2; ++defer) {
    Recorder r;
    const int x = r.Alloc(f.local_hidden_per_mb, "act.final_norm_input");
    r.Start();
    const auto held = OutputForward(f, x, r);
    out.fwd_net = r.net();
    out.fwd_high = 0;
    for (std::int64_t h : r.highs()) out.fwd_high = std::max(out.fwd_high, h);
    r.Start();
    int deferred = Recorder::kNone;
    OutputBackward(f, held, defer == 1, deferred, r);
    out.bwd_net[defer] = r.net();
    for (std::int64_t h : r.highs()) out.bwd_high[defer] = std::max(out.bwd_high[defer], h);
  }
  return out;
}

// Where the highest point was: the schedule step, and within it the layer pass (its index
// in the chunk) or kOutputPass / kEdge (the pass's own allocations before or after its
// layers).
constexpr int kOutputPass = -2, kEdge = -1;
struct Position {
  std::size_t step = 0;
  int layer = kEdge;
};

class LayerWalk {
 public:
  LayerWalk(const model::Job& job, const JobFacts& f, const LayerPasses& passes,
            std::span<const ModelChunk> stage, int pp_rank)
      : job_(job), f_(f), p_(passes), stage_(stage) {
    for (const ModelChunk& chunk : stage) {
      plans_.push_back(PlanChunkLayers(job.model, f.params.moe_pattern, chunk));
    }
    schedule_ = PipelineSchedule(job.model.pipeline_model_parallel_size, pp_rank,
                                 static_cast<int>(stage.size()), f.num_microbatches, f.group_size,
                                 job.model.overlap_moe_expert_parallel_comm);
    // Each MoE layer's extra rows in each micro-batch, drawn once: [chunk][layer][mb].
    for (std::size_t c = 0; c < plans_.size(); ++c) {
      extra_.emplace_back();
      for (const LayerPlan& lp : plans_[c]) {
        std::vector<std::int64_t>& x = extra_.back().emplace_back();
        if (lp.kind_moe == 0) continue;
        const std::int64_t rows = p_.moe_sizes[lp.kind_fp8].balanced_rows;
        x.resize(static_cast<std::size_t>(f.num_microbatches));
        for (std::int64_t mb = 0; mb < f.num_microbatches; ++mb) {
          x[mb] = ExpertRows(f.moe_load, rows, lp.layer, mb) - rows;
        }
      }
    }
  }

  // The highest point of the activation bytes and where it was.
  std::int64_t Run() {
    const std::int64_t lh = f_.local_hidden_per_mb;
    const std::int64_t m = f_.num_microbatches;
    std::vector<char> carried(stage_.size(), 0);
    std::int64_t live = 0;
    for (std::size_t c = 0; c < stage_.size(); ++c) {  // the previous iteration's
      carried[c] = Carries(static_cast<int>(c));
      live += carried[c] ? 2 * lh : 0;
    }
    best_ = -1;
    for (std::size_t s = 0; s < schedule_.size(); ++s) {
      const PipelineStep& step = schedule_[s];
      const ModelChunk& chunk = stage_[step.chunk];
      const std::vector<LayerPlan>& layers = plans_[step.chunk];
      const int n = static_cast<int>(layers.size());
      if (step.forward) {
        if (chunk.has_embedding) {
          live += f_.embedding_per_mb;
          Top(live, s, kEdge);
        }
        live += lh;
        Top(live, s, kEdge);
        if (!chunk.has_embedding && carried[step.chunk]) {
          live -= 2 * lh;
          carried[step.chunk] = 0;
        }
        for (int i = 0; i < n; ++i) {
          const KindLines& k = Kind(layers[i]);
          const std::int64_t x = Extra(step.chunk, i, step.microbatch);
          Top(live + k.forward.High(x), s, i);
          live += k.forward.net.At(x);
        }
        if (chunk.has_output) {
          Top(live + p_.output.fwd_high, s, kOutputPass);
          live += p_.output.fwd_net;
        } else {
          live -= lh;
        }
      } else {
        if (chunk.has_output) {
          const int defer = step.microbatch < f_.deferred_microbatches ? 1 : 0;
          Top(live + p_.output.bwd_high[defer], s, kOutputPass);
          live += p_.output.bwd_net[defer];  // (a deferred part stays to the flush)
        } else {
          live += lh;
          Top(live, s, kEdge);
        }
        for (int i = n - 1; i >= 0; --i) {
          const KindLines& k = Kind(layers[i]);
          const std::int64_t x = Extra(step.chunk, i, step.microbatch);
          Top(live + k.backward.High(x), s, i);
          live += k.backward.net.At(x);
        }
        const bool carry = Carries(step.chunk) && step.microbatch == m - 1;
        if (carry) {
          live += lh;  // the first layer's input, kept with the gradient
          carried[step.chunk] = 1;
        } else {
          live -= lh;  // the gradient, sent on
        }
        if (chunk.has_embedding) live -= f_.embedding_per_mb;
      }
    }
    return best_;
  }

  // What was live at the highest point, by category.
  ActivationPeak Snapshot() const {
    ActivationPeak out;
    out.bytes = best_;
    const std::int64_t m = f_.num_microbatches;
    std::vector<char> in_flight(stage_.size() * static_cast<std::size_t>(m), 0);
    std::vector<char> carried(stage_.size(), 0);
    for (std::size_t c = 0; c < stage_.size(); ++c) carried[c] = Carries(static_cast<int>(c));
    std::int64_t deferred = 0;
    for (std::size_t s = 0; s < at_.step; ++s) {
      const PipelineStep& step = schedule_[s];
      in_flight[step.chunk * m + step.microbatch] = step.forward ? 1 : 0;
      if (step.forward) carried[step.chunk] = 0;
      if (!step.forward && stage_[step.chunk].has_output &&
          step.microbatch < f_.deferred_microbatches)
        deferred += f_.deferred_wgrad_per_mb;
      if (!step.forward && Carries(step.chunk) && step.microbatch == m - 1) carried[step.chunk] = 1;
    }
    // Held layers by kind: their count and summed extra rows (kept bytes are affine).
    std::int64_t count[2][2] = {}, rows[2][2] = {};
    auto add_layers = [&](int c, int mb, int from, int to) {  // layers [from, to)
      for (int i = from; i < to; ++i) {
        const LayerPlan& lp = plans_[c][i];
        ++count[lp.kind_moe][lp.kind_fp8];
        rows[lp.kind_moe][lp.kind_fp8] += Extra(c, i, mb);
      }
    };
    auto add_chunk = [&](int c) {  // a micro-batch in flight: its embedding, output parts
      const ModelChunk& chunk = stage_[c];
      if (chunk.has_embedding) out.embedding += f_.embedding_per_mb;
      if (chunk.has_output) {
        out.output += f_.output_hidden_per_mb;
        out.logits += f_.logits_per_mb;
      }
    };
    const PipelineStep& now = schedule_[at_.step];
    for (std::size_t c = 0; c < stage_.size(); ++c) {
      for (std::int64_t mb = 0; mb < m; ++mb) {
        if (!in_flight[c * m + mb]) continue;
        if (static_cast<int>(c) == now.chunk && mb == now.microbatch) continue;  // below
        add_layers(static_cast<int>(c), static_cast<int>(mb), 0,
                   static_cast<int>(plans_[c].size()));
        add_chunk(static_cast<int>(c));
      }
    }
    // The pass running at the peak: its finished layers are held; the layer (or output)
    // pass in progress counts as the transient.
    const PipelineStep& step = now;
    const int c = step.chunk, mb = step.microbatch, n = static_cast<int>(plans_[c].size());
    if (step.forward) {
      const int done = at_.layer == kOutputPass ? n : std::max(0, at_.layer);
      add_layers(c, mb, 0, done);
      if (stage_[c].has_embedding) out.embedding += f_.embedding_per_mb;
      if (carried[c] && !stage_[c].has_embedding && at_.layer != kEdge) carried[c] = 0;
    } else {
      const int kept = at_.layer == kOutputPass || at_.layer == kEdge ? n : at_.layer;
      add_layers(c, mb, 0, kept);
      // (An output pass in progress is freeing the output parts: the transient.)
      if (stage_[c].has_embedding) out.embedding += f_.embedding_per_mb;
    }
    for (int moe = 0; moe < 2; ++moe) {
      for (int fp8 = 0; fp8 < 2; ++fp8) {
        if (count[moe][fp8] == 0) continue;
        const ActBytes& base = moe ? p_.moe_sizes[fp8].base.kept : p_.dense_kept[fp8];
        for (int t = 0; t < kNumActTensors; ++t) {
          out.held[t] += count[moe][fp8] * base[t];
          if (moe) out.held[t] += p_.moe_per_row[fp8][t] * rows[moe][fp8];
        }
      }
    }
    for (std::size_t k = 0; k < stage_.size(); ++k) {
      out.carried += carried[k] ? 2 * f_.local_hidden_per_mb : 0;
    }
    out.deferred = deferred;
    std::int64_t counted = out.embedding + out.output + out.logits + out.deferred + out.carried;
    for (std::int64_t b : out.held) counted += b;
    out.transient = out.bytes - counted;
    out.in_flight = 0;
    for (char v : in_flight) out.in_flight += v;
    out.in_flight += step.forward ? 1 : 0;
    return out;
  }

 private:
  bool Carries(int c) const {
    return job_.model.pipeline_model_parallel_size > 1 && !stage_[c].has_embedding &&
           !plans_[c].empty();
  }
  const KindLines& Kind(const LayerPlan& lp) const { return p_.lines[lp.kind_moe][lp.kind_fp8]; }
  std::int64_t Extra(int c, int i, std::int64_t mb) const {
    const std::vector<std::int64_t>& x = extra_[c][i];
    return x.empty() ? 0 : x[mb];
  }
  void Top(std::int64_t live, std::size_t step, int layer) {
    if (live <= best_) return;
    best_ = live;
    at_ = {step, layer};
  }

  const model::Job& job_;
  const JobFacts& f_;
  const LayerPasses& p_;
  std::span<const ModelChunk> stage_;
  std::vector<std::vector<LayerPlan>> plans_;
  std::vector<PipelineStep> schedule_;
  std::vector<std::vector<std::vector<std::int64_t>>> extra_;
  std::int64_t best_ = -1;
  Position at_;
};

}  // namespace

LayerPasses MakeLayerPasses(const model::Job& job, const JobFacts& f) {
  LayerPasses p;
  const bool has_moe = job.model.num_moe_experts.value_or(0) > 0;
  const LayerShape shape{f.act.hid_div > 1, f.local_hidden_per_mb};
  for (int fp8 = 0; fp8 < 2; ++fp8) {
    p.ok = p.ok &&
           MakeKindLines(MakeLayerSizes(f.act, false, fp8 == 1), nullptr, shape, p.lines[0][fp8]);
    p.dense_kept[fp8] = LayerActivations(f.act, false, fp8 == 1);
    if (!has_moe) continue;
    MoeLayerSizes& z = p.moe_sizes[fp8];
    z = MakeMoeLayerSizes(f.act, fp8 == 1);
    p.ok = p.ok && z.whole_rows && MakeKindLines(z.base, &z, shape, p.lines[1][fp8]);
    for (int t = 0; t < kNumActTensors; ++t) {
      p.moe_per_row[fp8][t] = z.balanced_rows > 0 ? z.per_rows.kept[t] / z.balanced_rows : 0;
    }
  }
  p.output = MakeOutputLines(f);
  return p;
}

ActivationPeak WalkRankActivations(const model::Job& job, const JobFacts& facts,
                                   const LayerPasses& passes, std::span<const ModelChunk> stage,
                                   int pp_rank) {
  if (!passes.ok) return WalkRankBytes(job, facts, stage, pp_rank);
  LayerWalk walk(job, facts, passes, stage, pp_rank);
  walk.Run();
  return walk.Snapshot();
}

}  // namespace memtune::estimate::internal
