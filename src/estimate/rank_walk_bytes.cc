// One pipeline rank's activations walked tensor by tensor (rank_walk.h WalkRankBytes): the
// reference walk, for layer sizes that are not whole bytes per expert row.
#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "rank_walk.h"
#include "tensors/layer_plan.h"
#include "tensors/layer_walk.h"
#include "tensors/moe_sizes.h"

namespace memtune::estimate::internal {
namespace {

using namespace ::memtune::tensors;  // NOLINT(google-build-using-namespace): the tensor model

// What a live tensor counts as: a saved-tensor slot (kAttnQkv for its q and k parts), or
// one of these.
enum Category : int {
  kCatEmbedding = kNumActTensors,
  kCatOutput,
  kCatLogits,
  kCatDeferred,
  kCatCarried,
  kCatTransient,
  kNumCategories
};

int SlotCategory(int slot) { return slot == kSlotQ || slot == kSlotK ? int{kAttnQkv} : slot; }

// Live bytes by category, their highest point, and (on the second pass) what was live then.
class ByteWalk {
 public:
  using Handle = int;
  static constexpr Handle kNone = -1;

  explicit ByteWalk(std::int64_t stop_at) : stop_at_(stop_at) {}

  Handle Alloc(std::int64_t bytes, const char*) {
    if (bytes == 0) return kNone;
    TakePendingSnapshot();
    Handle h;
    if (!free_.empty()) {
      h = free_.back();
      free_.pop_back();
    } else {
      h = static_cast<Handle>(size_.size());
      size_.push_back(0);
      cat_.push_back(kCatTransient);
    }
    size_[h] = bytes;
    cat_[h] = kCatTransient;
    live_cat_[kCatTransient] += bytes;
    live_ += bytes;
    if (live_ > peak_) {
      peak_ = live_;
      peak_event_ = events_;
    }
    pending_ = events_ == stop_at_;  // (taken before the next change: its category is set)
    ++events_;
    return h;
  }
  void Free(Handle h) {
    if (h == kNone) return;
    TakePendingSnapshot();
    live_ -= size_[h];
    live_cat_[cat_[h]] -= size_[h];
    free_.push_back(h);
  }
  void Count(Handle h, int category) {
    if (h == kNone) return;
    live_cat_[cat_[h]] -= size_[h];
    cat_[h] = static_cast<std::int8_t>(category);
    live_cat_[category] += size_[h];
  }
  void AddInFlight(int delta) { in_flight_ += delta; }

  std::int64_t peak() const { return peak_; }
  std::int64_t peak_event() const { return peak_event_; }
  const ActivationPeak& snapshot() {
    TakePendingSnapshot();
    return snap_;
  }

 private:
  void TakePendingSnapshot() {
    if (!pending_) return;
    pending_ = false;
    Snapshot();
  }
  void Snapshot() {
    snap_.bytes = live_;
    for (int t = 0; t < kNumActTensors; ++t) snap_.held[t] = live_cat_[t];
    snap_.embedding = live_cat_[kCatEmbedding];
    snap_.output = live_cat_[kCatOutput];
    snap_.logits = live_cat_[kCatLogits];
    snap_.deferred = live_cat_[kCatDeferred];
    snap_.carried = live_cat_[kCatCarried];
    snap_.transient = live_cat_[kCatTransient];
    snap_.in_flight = in_flight_;
  }

  std::vector<std::int64_t> size_;
  std::vector<std::int8_t> cat_;
  std::vector<Handle> free_;
  std::array<std::int64_t, kNumCategories> live_cat_{};
  std::int64_t live_ = 0, peak_ = 0, peak_event_ = -1, events_ = 0, stop_at_ = -1;
  int in_flight_ = 0;
  bool pending_ = false;
  ActivationPeak snap_;
};

using Slots = std::array<ByteWalk::Handle, kLayerSlots>;

// The layer walk's executor: one layer's saved slots.
struct LayerExec {
  using Handle = ByteWalk::Handle;
  static constexpr Handle kNone = ByteWalk::kNone;
  ByteWalk& walk;
  Slots& saved;
  const Handle* retained;  // the input kept past the backward (pipeline carry), or kNone
  Handle Alloc(std::int64_t bytes, const char* name) { return walk.Alloc(bytes, name); }
  void Free(Handle h) { walk.Free(h); }
  void Hold(int slot, Handle h) {
    saved[slot] = h;
    walk.Count(h, SlotCategory(slot));
  }
  Handle Held(int slot) const { return saved[slot]; }
  void Release(int slot) {
    const Handle h = std::exchange(saved[slot], kNone);
    if (h != kNone && h == *retained) return;  // carried past the backward
    walk.Free(h);
  }
  void Recompute(bool) {}
};

struct OutputExec {
  using Handle = ByteWalk::Handle;
  static constexpr Handle kNone = ByteWalk::kNone;
  ByteWalk& walk;
  Handle Alloc(std::int64_t bytes, const char* name) { return walk.Alloc(bytes, name); }
  void Free(Handle h) { walk.Free(h); }
};

// The generator's ForwardChunk / BackwardChunk for one rank, in bytes.
class RankWalk {
 public:
  RankWalk(const model::Job& job, const JobFacts& f, std::span<const ModelChunk> stage, int pp_rank)
      : job_(job), f_(f), stage_(stage) {
    const bool has_moe = job.model.num_moe_experts.value_or(0) > 0;
    for (int moe = 0; moe < (has_moe ? 2 : 1); ++moe) {
      for (int fp8 = 0; fp8 < 2; ++fp8)
        sizes_[moe][fp8] = MakeLayerSizes(f.act, moe == 1, fp8 == 1);
    }
    if (has_moe) {
      for (int fp8 = 0; fp8 < 2; ++fp8) moe_sizes_[fp8] = MakeMoeLayerSizes(f.act, fp8 == 1);
    }
    for (const ModelChunk& chunk : stage) {
      plans_.push_back(PlanChunkLayers(job.model, f.params.moe_pattern, chunk));
    }
    shape_ = LayerShape{f.act.hid_div > 1, f.local_hidden_per_mb};
    const int p = job.model.pipeline_model_parallel_size;
    schedule_ = PipelineSchedule(p, pp_rank, static_cast<int>(stage.size()), f.num_microbatches,
                                 f.group_size, job.model.overlap_moe_expert_parallel_comm);
  }

  void Run(ByteWalk& walk) {
    const std::size_t chunks = stage_.size();
    recs_.assign(chunks * static_cast<std::size_t>(f_.num_microbatches), ChunkRec{});
    carried_.assign(chunks, {ByteWalk::kNone, ByteWalk::kNone});
    for (int it = 0; it < 2; ++it) {
      for (const PipelineStep& s : schedule_) {
        if (s.forward) {
          Forward(walk, s.chunk, s.microbatch);
        } else {
          Backward(walk, s.chunk, s.microbatch);
        }
      }
      for (ByteWalk::Handle h : deferred_) walk.Free(h);  // finish_embedding_wgrad_compute
      deferred_.clear();
    }
  }

 private:
  struct ChunkRec {
    std::vector<Slots> layers;
    ByteWalk::Handle tokens = ByteWalk::kNone;
    OutputHeld<ByteWalk::Handle> output{ByteWalk::kNone, ByteWalk::kNone, ByteWalk::kNone};
  };

  const LayerSizes& Sizes(const LayerPlan& lp, std::int64_t mb) {
    if (lp.kind_moe == 0 || !f_.moe_load.active()) return sizes_[lp.kind_moe][lp.kind_fp8];
    const MoeLayerSizes& moe = moe_sizes_[lp.kind_fp8];
    scratch_ = moe.At(ExpertRows(f_.moe_load, moe.balanced_rows, lp.layer, mb));
    return scratch_;
  }

  ChunkRec& Rec(int c, int mb) {
    return recs_[static_cast<std::size_t>(c) * f_.num_microbatches + mb];
  }

  void Forward(ByteWalk& walk, int c, int mb) {
    const ModelChunk& chunk = stage_[c];
    const std::vector<LayerPlan>& layers = plans_[c];
    ChunkRec& rec = Rec(c, mb);
    if (!pool_.empty()) {
      rec.layers = std::move(pool_.back());
      pool_.pop_back();
    }
    rec.layers.resize(layers.size());
    walk.AddInFlight(1);
    ByteWalk::Handle x;
    if (chunk.has_embedding) {
      rec.tokens = walk.Alloc(f_.embedding_per_mb, "act.embedding");
      walk.Count(rec.tokens, kCatEmbedding);
      x = walk.Alloc(f_.local_hidden_per_mb, "embedding.output");
    } else {
      x = walk.Alloc(f_.local_hidden_per_mb, "p2p.recv_activation");
      for (ByteWalk::Handle& h : carried_[c]) walk.Free(std::exchange(h, ByteWalk::kNone));
    }
    for (std::size_t i = 0; i < layers.size(); ++i) {
      Slots& saved = rec.layers[i];
      saved.fill(ByteWalk::kNone);
      LayerExec e{walk, saved, &retain_};
      x = LayerForward(Sizes(layers[i], mb), shape_, layers[i].keep, x, e);
    }
    if (!chunk.has_output) {
      walk.Free(x);
      return;
    }
    OutputExec e{walk};
    rec.output = OutputForward(f_, x, e);
    walk.Count(rec.output.final_in, kCatOutput);
    walk.Count(rec.output.final_out, kCatOutput);
    walk.Count(rec.output.logits, kCatLogits);
  }

  void Backward(ByteWalk& walk, int c, int mb) {
    const ModelChunk& chunk = stage_[c];
    const std::vector<LayerPlan>& layers = plans_[c];
    ChunkRec& rec = Rec(c, mb);
    const bool carry = job_.model.pipeline_model_parallel_size > 1 && !chunk.has_embedding &&
                       !layers.empty() && mb == f_.num_microbatches - 1;
    if (carry) retain_ = rec.layers[0][kLn1Input];
    ByteWalk::Handle grad;
    if (chunk.has_output) {
      OutputExec e{walk};
      ByteWalk::Handle deferred = ByteWalk::kNone;
      grad = OutputBackward(f_, rec.output, mb < f_.deferred_microbatches, deferred, e);
      if (deferred != ByteWalk::kNone) {
        walk.Count(deferred, kCatDeferred);
        deferred_.push_back(deferred);
      }
    } else {
      grad = walk.Alloc(f_.local_hidden_per_mb, "p2p.recv_grad");
    }
    for (int i = static_cast<int>(layers.size()) - 1; i >= 0; --i) {
      LayerExec e{walk, rec.layers[i], &retain_};
      grad = LayerBackward(Sizes(layers[i], mb), shape_, grad, e);
    }
    if (carry) {
      const ByteWalk::Handle input =
          retain_ != ByteWalk::kNone ? retain_
                                     : walk.Alloc(f_.local_hidden_per_mb, "p2p.recv_activation");
      carried_[c] = {input, std::exchange(grad, ByteWalk::kNone)};
      walk.Count(carried_[c][0], kCatCarried);
      walk.Count(carried_[c][1], kCatCarried);
      retain_ = ByteWalk::kNone;
    }
    walk.Free(grad);
    walk.Free(std::exchange(rec.tokens, ByteWalk::kNone));
    rec.output = {ByteWalk::kNone, ByteWalk::kNone, ByteWalk::kNone};
    pool_.push_back(std::move(rec.layers));
    rec.layers.clear();
    walk.AddInFlight(-1);
  }

  const model::Job& job_;
  const JobFacts& f_;
  std::span<const ModelChunk> stage_;
  LayerSizes sizes_[2][2];
  MoeLayerSizes moe_sizes_[2];
  LayerSizes scratch_;
  LayerShape shape_;
  std::vector<std::vector<LayerPlan>> plans_;
  std::vector<PipelineStep> schedule_;
  std::vector<ChunkRec> recs_;
  std::vector<std::vector<Slots>> pool_;
  std::vector<std::array<ByteWalk::Handle, 2>> carried_;
  std::vector<ByteWalk::Handle> deferred_;
  ByteWalk::Handle retain_ = ByteWalk::kNone;
};

}  // namespace

ActivationPeak WalkRankBytes(const model::Job& job, const JobFacts& facts,
                             std::span<const ModelChunk> stage, int pp_rank) {
  RankWalk rank(job, facts, stage, pp_rank);
  ByteWalk find(-1);
  rank.Run(find);
  ByteWalk again(find.peak_event());  // the same walk, stopped at the highest point
  rank.Run(again);
  return again.snapshot();
}

}  // namespace memtune::estimate::internal
