// Megatron-Core's DDP buffers and optimizer shards of one rank (sources in opt_layout.h).
#include "tensors/opt_layout.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <numeric>
#include <utility>

#include "memtune/model/parameters.h"
#include "tensors/model_state.h"

namespace memtune::tensors {
namespace {

using model::ParamTensor;
using model::TpSplit;

// The module a layer parameter belongs to, in TransformerLayer's registration order
// (transformer_layer.py: input_layernorm, self_attention, pre_mlp_layernorm, mlp; the
// Attention base class registers core_attention and linear_proj before SelfAttention's
// linear_qkv and q/k norms, and MLASelfAttention's projections).
int ModuleOrder(const char* name) {
  auto starts = [name](const char* prefix) {
    return std::strncmp(name, prefix, std::strlen(prefix)) == 0;
  };
  if (starts("input_layernorm")) return 0;
  if (starts("self_attention.core_attention")) return 1;
  if (starts("self_attention.linear_proj")) return 2;
  if (starts("self_attention.")) return 3;
  if (starts("pre_mlp_layernorm")) return 4;
  return 5;
}

// Collects one part's parameters on a rank, with each tensor's module rank for the
// registration order.
class LayoutSink final : public model::ParamTensorSink {
 public:
  LayoutSink(int tp, int ep, int etp, bool fp8) : tp_(tp), ep_(ep), etp_(etp), fp8_(fp8) {}
  void Add(const ParamTensor& t) override {
    if (t.is_buffer) return;  // registered buffers: no gradient, no optimizer state
    LayoutParam p;
    if (t.expert) {
      const std::int64_t local = std::max<std::int64_t>(1, t.count / std::max(1, ep_));
      p.copies = static_cast<std::int32_t>(local);
      p.elements = t.tp_split == TpSplit::kReplicated ? t.elements : t.elements / std::max(1, etp_);
    } else {
      p.copies = static_cast<std::int32_t>(std::max<std::int64_t>(1, t.count));
      p.elements = t.tp_split == TpSplit::kReplicated ? t.elements : t.elements / std::max(1, tp_);
    }
    p.expert = t.expert;
    p.fp8 = fp8_ && IsTeLinearWeight(t);
    // optimizer/__init__.py get_standard_config_overrides: no weight decay for "*.bias" and
    // 1-D parameters (norms, biases, softmax offsets).
    // (Tables and the shared-expert gate, [1, h], are 2-D though they have no in_features.)
    const bool two_d = t.in_features > 0 || std::strstr(t.name, "embeddings") != nullptr ||
                       std::strstr(t.name, "gate_weight") != nullptr;
    p.no_decay = t.is_bias || t.is_norm || !two_d;
    entries_.push_back({ModuleOrder(t.name), p});
  }
  std::vector<LayoutParam> Take() {
    std::stable_sort(entries_.begin(), entries_.end(),
                     [](const Entry& a, const Entry& b) { return a.order < b.order; });
    std::vector<LayoutParam> out;
    out.reserve(entries_.size());
    for (const Entry& e : entries_) out.push_back(e.param);
    return out;
  }

 private:
  struct Entry {
    int order;
    LayoutParam param;
  };
  int tp_, ep_, etp_;
  bool fp8_;
  std::vector<Entry> entries_;
};

std::int64_t RoundUp(std::int64_t value, std::int64_t divisor) {
  return (value + divisor - 1) / divisor * divisor;
}

// One parameter's place in a buffer.
struct Placed {
  std::int64_t start = 0, end = 0;  // elements in the buffer
  int bucket = 0;
  bool no_decay = false;
};

// A chunk's parameters of one buffer, laid out (reverse registration order).
struct BufferLayout {
  int chunk = 0;
  bool expert = false, fp8 = false;
  std::vector<Placed> params;                                  // param_map order
  std::vector<std::pair<std::int64_t, std::int64_t>> buckets;  // [start, end), padded
};

// The chunk's parts in registration order (named_parameters: embedding, layers, final norm,
// MTP blocks, output layer): f(list, sum, times) per part, `times` alike layers at once when
// every layer of the model is alike (no experts, no bf16 layers), else 1.
template <typename F>
void ForEachPart(const LayoutLists& lists, const std::vector<bool>& moe_pattern,
                 const model::ModelConfig& m, const estimate::ModelChunk& chunk, int pp_size,
                 F&& f) {
  auto layer = [&](int index) {
    const bool moe = index < static_cast<int>(moe_pattern.size()) && moe_pattern[index];
    const int fp8 = IsBf16Layer(m, index) ? 0 : 1;
    f(lists.layer[moe][fp8], lists.layer_sum[moe][fp8], 1);
  };
  if (chunk.has_embedding) f(lists.embedding, lists.embedding_sum, 1);
  if (moe_pattern.empty() && !m.first_last_layers_bf16) {
    if (chunk.num_layers > 0) f(lists.layer[0][1], lists.layer_sum[0][1], chunk.num_layers);
  } else {
    for (int i = 0; i < chunk.num_layers; ++i) layer(chunk.first_layer + i);
  }
  if (chunk.has_output) f(lists.final_norm, lists.final_norm_sum, 1);
  for (int i = 0; i < chunk.num_mtp_layers; ++i) {
    f(lists.mtp_extra, lists.mtp_extra_sum, 1);
    layer(static_cast<int>(m.num_layers) + i);
  }
  if (chunk.has_output) {
    f(lists.output, lists.output_sum, 1);
    if (m.share_embeddings_and_output_weights && pp_size > 1)
      f(lists.tied_output, lists.tied_output_sum, 1);
  }
}

int KeyOf(const LayoutParam& p) { return (p.expert ? 2 : 0) + (p.fp8 ? 1 : 0); }

// One chunk laid out as _compute_per_buffer_param_layout does: parameters in reverse
// registration order, every buffer (KeyOf) with its own cursor and open bucket;
// `place(key, start, end, param)` per tensor, `close(key, bucket_start, bucket_end)` per
// bucket. Returns each buffer's padded size (0: the chunk has no such tensor).
struct Cursor {
  std::int64_t start = 0, bucket_start = 0, end = 0;
  bool open = false, used = false;
};
template <typename Place, typename Close>
std::array<Cursor, 4> WalkChunk(const LayoutLists& lists, const std::vector<bool>& moe_pattern,
                                const model::ModelConfig& m, const estimate::ModelChunk& chunk,
                                bool dist_opt, std::int64_t bucket_size,
                                const std::int64_t divisor[4], Place&& place, Close&& close) {
  std::array<Cursor, 4> cur{};
  auto shut = [&](int key, std::int64_t param_end) {
    Cursor& k = cur[static_cast<std::size_t>(key)];
    const std::int64_t bucket_end = dist_opt ? RoundUp(param_end, divisor[key]) : param_end;
    close(key, k.bucket_start, bucket_end);
    k.bucket_start = bucket_end;
    k.open = false;
    return bucket_end;
  };
  // The parts in reverse (a chunk has a few more parts than layers).
  thread_local std::vector<std::pair<const std::vector<LayoutParam>*, int>> parts;
  parts.clear();
  ForEachPart(lists, moe_pattern, m, chunk, m.pipeline_model_parallel_size,
              [](const std::vector<LayoutParam>& list, const LayoutLists::Sum&, int times) {
                parts.emplace_back(&list, times);
              });
  for (auto part = parts.rbegin(); part != parts.rend(); ++part) {
    for (int t = 0; t < part->second; ++t) {
      for (auto it = part->first->rbegin(); it != part->first->rend(); ++it) {
        const LayoutParam& p = *it;
        const int key = KeyOf(p);
        Cursor& k = cur[static_cast<std::size_t>(key)];
        k.used = true;
        for (std::int32_t copy = 0; copy < p.copies; ++copy) {
          if (dist_opt) k.start = RoundUp(k.start, 64);
          if (dist_opt && p.shared_embedding && k.open) k.start = shut(key, k.start);
          k.end = k.start + p.elements;
          place(key, k.start, k.end, p);
          k.open = true;
          if ((bucket_size > 0 && k.end - k.bucket_start >= bucket_size) ||
              (dist_opt && p.shared_embedding)) {
            k.start = shut(key, k.end);
          } else {
            k.start = k.end;
          }
        }
      }
    }
  }
  for (int key = 0; key < 4; ++key) {
    if (cur[static_cast<std::size_t>(key)].open) shut(key, cur[static_cast<std::size_t>(key)].end);
  }
  return cur;  // bucket_start: the buffer's padded size
}

// What LayoutRank needs of the job, once.
struct LayoutRules {
  bool dist_opt = false;
  std::int64_t dp[4] = {1, 1, 1, 1};       // DP size per buffer kind (dense / expert)
  std::int64_t divisor[4] = {1, 1, 1, 1};  // bucket-end padding: lcm(DP, 128)
  std::int64_t bucket_size = 0;            // 0: one bucket (bucket_size None)
  std::int64_t ChunkBucketSize(const model::Job& job, std::size_t chunk, int pp_rank) const {
    const bool one =
        chunk > 0 || pp_rank > 0 || job.optimizer.overlap_param_gather_with_optimizer_step;
    return one ? 0 : bucket_size;
  }
};

// The sums alone (the estimator's hot path): a one-bucket chunk of gapless tensors from the
// lists' sums, any other chunk walked keeping only each open bucket's tensors.
void LayoutSums(const model::Job& job, const LayoutLists& lists,
                const std::vector<bool>& moe_pattern, std::span<const estimate::ModelChunk> chunks,
                int pp_rank, const LayoutRules& r, OptLayout& out) {
  const auto& m = job.model;
  thread_local std::vector<std::pair<std::int64_t, std::int64_t>> bucket[4];
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    const std::int64_t size = r.ChunkBucketSize(job, c, pp_rank);
    if (!r.dist_opt || size == 0) {  // whole parameters, or one gapless bucket per buffer
      LayoutLists::Sum t;
      ForEachPart(lists, moe_pattern, m, chunks[c], m.pipeline_model_parallel_size,
                  [&t](const std::vector<LayoutParam>&, const LayoutLists::Sum& s, int times) {
                    for (int key = 0; key < 4; ++key) {
                      t.elements[key] += s.elements[key] * times;
                      t.used[key] = t.used[key] || s.used[key];
                    }
                    t.plain = t.plain && s.plain;
                  });
      if (!r.dist_opt || t.plain) {
        for (int key = 0; key < 4; ++key) {
          if (!t.used[key]) continue;
          const std::int64_t total = t.elements[key];
          std::int64_t numel = total, share = total;
          if (r.dist_opt) {  // padded to lcm(DP, 128); rank 0 owns the first 1/DP
            numel = RoundUp(total, r.divisor[key]);
            share = std::min(total, numel / r.dp[key]);
          }
          out.buffer_elements[key / 2][key % 2] += numel;
          out.shard_elements[key / 2][key % 2] += share;
        }
        continue;
      }
    }
    for (auto& b : bucket) b.clear();
    const auto cur = WalkChunk(
        lists, moe_pattern, m, chunks[c], r.dist_opt, size, r.divisor,
        [&](int key, std::int64_t start, std::int64_t end, const LayoutParam&) {
          bucket[key].emplace_back(start, end);
        },
        [&](int key, std::int64_t bs, std::int64_t be) {
          const std::int64_t own_end = bs + (be - bs) / r.dp[key];
          for (const auto& [ps, pe] : bucket[key]) {
            if (ps < own_end) out.shard_elements[key / 2][key % 2] += std::min(pe, own_end) - ps;
          }
          bucket[key].clear();
        });
    for (int key = 0; key < 4; ++key) {
      out.buffer_elements[key / 2][key % 2] += cur[static_cast<std::size_t>(key)].bucket_start;
    }
  }
}

}  // namespace

LayoutLists MakeLayoutLists(const model::Job& job) {
  const auto& m = job.model;
  const int tp = m.tensor_model_parallel_size, ep = m.expert_model_parallel_size;
  const int etp = model::ExpertTensorParallelSize(job);
  const bool fp8_params = m.fp8 != model::Fp8Format::kNone && (m.fp8_param || m.fp8_param_gather);
  const std::int64_t vocab = model::PaddedVocabSize(job);
  const bool tied_pp = m.share_embeddings_and_output_weights && m.pipeline_model_parallel_size > 1;
  LayoutLists lists;
  for (int moe = 0; moe < 2; ++moe) {
    if (moe && m.num_moe_experts.value_or(0) <= 0) break;
    for (int fp8 = 0; fp8 < 2; ++fp8) {
      LayoutSink sink(tp, ep, etp, fp8 == 1 && fp8_params);
      model::AddTransformerLayerParameters(m, moe == 1, sink);
      lists.layer[moe][fp8] = sink.Take();
    }
  }
  {
    LayoutSink sink(tp, ep, etp, false);
    model::AddEmbeddingParameters(m, vocab, sink);
    lists.embedding = sink.Take();
    // language_module.py setup_embeddings_and_output_layer: with tied embeddings and PP > 1
    // the first stage's word embedding and the last stage's copy are shared_embedding.
    if (tied_pp && !lists.embedding.empty()) {
      lists.embedding.front().shared_embedding = true;
      lists.tied_output.push_back(lists.embedding.front());
    }
  }
  {
    LayoutSink norm(tp, ep, etp, false), output(tp, ep, etp, false);
    struct Split final : model::ParamTensorSink {
      LayoutSink *norm, *output;
      void Add(const ParamTensor& t) override {
        (t.placement == model::ParamPlacement::kFinalNorm ? norm : output)->Add(t);
      }
    } split;
    split.norm = &norm;
    split.output = &output;
    model::AddOutputParameters(m, vocab, split);
    lists.final_norm = norm.Take();
    lists.output = output.Take();
  }
  if (m.mtp_num_layers.value_or(0) > 0) {
    LayoutSink sink(tp, ep, etp, fp8_params);
    model::AddMtpExtraParameters(m, sink);
    lists.mtp_extra = sink.Take();
  }
  auto sum = [](const std::vector<LayoutParam>& list) {
    LayoutLists::Sum out;
    for (const LayoutParam& p : list) {
      const int key = (p.expert ? 2 : 0) + (p.fp8 ? 1 : 0);
      out.elements[key] += p.elements * p.copies;
      out.used[key] = true;
      out.plain = out.plain && p.elements % 64 == 0 && !p.shared_embedding;
    }
    return out;
  };
  for (int moe = 0; moe < 2; ++moe) {
    for (int fp8 = 0; fp8 < 2; ++fp8) lists.layer_sum[moe][fp8] = sum(lists.layer[moe][fp8]);
  }
  lists.embedding_sum = sum(lists.embedding);
  lists.final_norm_sum = sum(lists.final_norm);
  lists.output_sum = sum(lists.output);
  lists.mtp_extra_sum = sum(lists.mtp_extra);
  lists.tied_output_sum = sum(lists.tied_output);
  return lists;
}

std::int64_t LayoutTensorCount(const model::Job& job, const LayoutLists& lists) {
  auto count = [](const std::vector<LayoutParam>& list) {
    std::int64_t n = 0;
    for (const LayoutParam& p : list) n += p.copies;
    return n;
  };
  std::int64_t per_layer = 0;
  for (const auto& kind : lists.layer) {
    for (const auto& list : kind) per_layer = std::max(per_layer, count(list));
  }
  const auto& m = job.model;
  const std::int64_t layers = m.num_layers + m.mtp_num_layers.value_or(0);
  return per_layer * layers + count(lists.embedding) + count(lists.final_norm) +
         count(lists.output) + count(lists.tied_output) +
         count(lists.mtp_extra) * m.mtp_num_layers.value_or(0);
}

bool UsesParamLayout(const model::Job& job) {
  return job.memtune.framework == model::Framework::kMegatron && !job.ddp.use_megatron_fsdp &&
         !job.optimizer.use_precision_aware_optimizer && !job.optimizer.optimizer_cpu_offload &&
         !job.peft.has_value();
}

OptLayout LayoutRank(const model::Job& job, const LayoutLists& lists,
                     const std::vector<bool>& moe_pattern,
                     std::span<const estimate::ModelChunk> chunks, int pp_rank, bool with_shards) {
  const auto& m = job.model;
  const auto& ddp = job.ddp;
  LayoutRules r;
  r.dist_opt = job.optimizer.use_distributed_optimizer;
  const int cp = std::max(1, m.context_parallel_size);
  const int instances = std::max(1, ddp.num_distributed_optimizer_instances);
  const std::int64_t dp_cp = std::int64_t{model::DataParallelSize(job)} * cp;
  // optimizer/__init__.py: dense state over the intra-instance DP x CP group, expert state
  // over the intra-instance expert-DP group.
  for (int key = 0; key < 4; ++key) {
    const std::int64_t group = key >= 2 ? model::ExpertDataParallelSize(job) : dp_cp;
    r.dp[key] = r.dist_opt ? std::max<std::int64_t>(1, group / instances) : 1;
    r.divisor[key] = std::lcm(r.dp[key], std::int64_t{128});
  }
  if (ddp.overlap_grad_reduce) {
    r.bucket_size = ddp.bucket_size.value_or(std::max<std::int64_t>(40000000, 1000000 * dp_cp));
  }
  OptLayout out;
  if (!with_shards) {
    LayoutSums(job, lists, moe_pattern, chunks, pp_rank, r, out);
    return out;
  }
  out.chunks.resize(chunks.size());
  out.params.resize(chunks.size());
  std::vector<BufferLayout> buffers;  // every chunk's, chunk-major, first-seen key order
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    // Buffer keys in first-seen order (param_and_grad_buffer.py group_params_for_buffers),
    // and the chunk's tensors as the model builds them.
    int keys[4], num_keys = 0;
    ForEachPart(lists, moe_pattern, m, chunks[c], m.pipeline_model_parallel_size,
                [&](const std::vector<LayoutParam>& list, const LayoutLists::Sum&, int times) {
                  for (int t = 0; t < times; ++t) {
                    for (const LayoutParam& p : list) {
                      out.params[c].insert(out.params[c].end(), static_cast<std::size_t>(p.copies),
                                           OptLayout::Param{p.elements, p.fp8});
                      const int key = KeyOf(p);
                      if (std::find(keys, keys + num_keys, key) == keys + num_keys)
                        keys[num_keys++] = key;
                    }
                  }
                });
    BufferLayout by_key[4];
    const auto cur = WalkChunk(
        lists, moe_pattern, m, chunks[c], r.dist_opt, r.ChunkBucketSize(job, c, pp_rank), r.divisor,
        [&](int key, std::int64_t start, std::int64_t end, const LayoutParam& p) {
          BufferLayout& b = by_key[key];
          b.params.push_back({start, end, static_cast<int>(b.buckets.size()), p.no_decay});
        },
        [&](int key, std::int64_t bs, std::int64_t be) {
          by_key[key].buckets.emplace_back(bs, be);
        });
    for (int k = 0; k < num_keys; ++k) {
      BufferLayout& b = by_key[keys[k]];
      b.chunk = static_cast<int>(c);
      b.expert = keys[k] >= 2;
      b.fp8 = keys[k] % 2 == 1;
      const std::int64_t numel = cur[static_cast<std::size_t>(keys[k])].bucket_start;
      out.chunks[c].push_back({b.expert, b.fp8, numel});
      out.buffer_elements[b.expert][b.fp8] += numel;
      buffers.push_back(std::move(b));
    }
  }
  // DP rank 0's shards: optimizer (dense, expert), group (decay, no decay), chunk, buffer,
  // bucket, parameter.
  for (int expert = 0; expert < 2; ++expert) {
    const std::int64_t dp = r.dp[expert * 2];
    for (int no_decay = 0; no_decay < 2; ++no_decay) {
      for (const BufferLayout& b : buffers) {
        if (b.expert != (expert == 1)) continue;
        // Without the distributed optimizer the groups list parameters in registration
        // order (optimizer/__init__.py _get_param_groups), the reverse of the buffer's.
        for (std::size_t i = 0; i < b.params.size(); ++i) {
          const Placed& p = b.params[r.dist_opt ? i : b.params.size() - 1 - i];
          if (p.no_decay != (no_decay == 1)) continue;
          const auto& [bs, be] = b.buckets[static_cast<std::size_t>(p.bucket)];
          const std::int64_t own_end = bs + (be - bs) / dp;
          const std::int64_t n = std::min(p.end, own_end) - std::max(p.start, bs);
          if (n <= 0) continue;
          out.shard_elements[expert][b.fp8] += n;
          out.shards.push_back({n, b.chunk, expert == 1, b.fp8});
        }
      }
    }
  }
  return out;
}

}  // namespace memtune::tensors
