// Walks a block's backward (fsdp2_backward.h) and forward (fsdp2_forward.h) op sequences in
// bytes for their peaks.
#include "tensors/fsdp2_backward.h"

#include <algorithm>
#include <string_view>
#include <vector>

#include "tensors/fsdp2_forward.h"

namespace memtune::tensors {
namespace {

class Walk {
 public:
  Walk(std::vector<Fsdp2Tensor> saved, std::int64_t incoming) : saved_(std::move(saved)) {
    for (const auto& t : saved_) saved_bytes_ += t.bytes;
    grad_out_ = Alloc(incoming, "grad_out");
  }
  int grad_out() const { return grad_out_; }

  int Alloc(std::int64_t bytes, const char*) {
    sizes_.push_back(bytes);
    temps_ += bytes;
    Note();
    return static_cast<int>(sizes_.size()) - 1;
  }
  void Free(int id) {
    if (id < 0) return;
    temps_ -= sizes_[id];
    sizes_[id] = 0;
  }
  void Take(const char* name) {
    for (auto& t : saved_) {
      if (t.bytes > 0 && std::string_view(t.name) == name) {
        saved_bytes_ -= t.bytes;
        t.bytes = 0;
        return;
      }
    }
  }
  void WeightGrad(std::int64_t bytes) {
    temps_ += bytes;
    weight_grads_.push_back(bytes);
    Note();
  }
  // The walk's result once the backward has run and its input gradient is `dx`.
  Fsdp2BackwardPeak Finish(int dx) {
    Fsdp2BackwardPeak result = peak_;
    result.weight_grad_bytes = weight_grads_;
    result.input_grad_bytes = dx >= 0 ? sizes_[dx] : 0;
    return result;
  }

 private:
  void Note() {
    if (saved_bytes_ + temps_ > peak_.Total()) peak_ = {saved_bytes_, temps_, {}, 0};
  }
  std::vector<Fsdp2Tensor> saved_;
  std::vector<std::int64_t> sizes_;
  std::int64_t saved_bytes_ = 0, temps_ = 0;
  int grad_out_ = -1;
  Fsdp2BackwardPeak peak_;
  std::vector<std::int64_t> weight_grads_;
};

}  // namespace

Fsdp2BackwardPeak WalkBlockBackward(const Fsdp2Facts& f, bool checkpointed) {
  std::vector<Fsdp2Tensor> saved = f.block_eager;
  if (checkpointed) saved.push_back({"act.block_input", f.block_input_bytes});
  Walk walk(std::move(saved), 2 * f.tokens / f.tp * f.hidden);
  const int dx = Fsdp2BlockBackward(f, walk.grad_out(), walk);
  return walk.Finish(dx);
}

}  // namespace memtune::tensors

namespace memtune::tensors {
namespace {

// Bytes of a block forward: everything it allocates counts until freed; kept tensors stay.
class ForwardWalk {
 public:
  int Alloc(std::int64_t bytes, const char*) {
    sizes_.push_back(bytes);
    live_ += bytes;
    peak_ = std::max(peak_, live_);
    return static_cast<int>(sizes_.size()) - 1;
  }
  void Free(int id) {
    if (id < 0) return;
    live_ -= sizes_[id];
    sizes_[id] = 0;
  }
  void Keep(const char*, int id) { kept_ += sizes_[id]; }
  Fsdp2ForwardPeak Finish(int out) const { return {peak_, kept_, out >= 0 ? sizes_[out] : 0}; }

 private:
  std::vector<std::int64_t> sizes_;
  std::int64_t live_ = 0, peak_ = 0, kept_ = 0;
};

}  // namespace

Fsdp2ForwardPeak WalkBlockForward(const Fsdp2Facts& f, bool checkpointed) {
  ForwardWalk walk;
  const int out = Fsdp2BlockForward(f, checkpointed, /*recompute=*/false, walk);
  return walk.Finish(out);
}

}  // namespace memtune::tensors
