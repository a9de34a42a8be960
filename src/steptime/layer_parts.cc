// LayerModules: every module of a transformer layer, timed from its tensors' shapes.
#include "steptime/layer_parts.h"

#include <algorithm>
#include <string>

#include "memtune/model/parameters.h"

namespace memtune::steptime {
namespace {

constexpr double kActBytes = 2;  // BF16 activations and gradients

bool Fp8(GemmDtype dtype) { return dtype == GemmDtype::kFp8 || dtype == GemmDtype::kFp4; }
double InBytes(GemmDtype dtype) { return Fp8(dtype) ? 1 : kActBytes; }

// Bytes a low-precision cast moves per element: read BF16, write FP8; current scaling
// (tensorwise / blockwise / MX) first reads the tensor once more for its amax.
double CastBytes(const model::Job& job) {
  const bool delayed = job.model.fp8_recipe == model::Fp8Recipe::kDelayed;
  return kActBytes + 1 + (delayed ? 0 : kActBytes);
}

struct Linear {
  std::string_view name;
  double in = 0, out = 0;  // unsharded
  model::TpSplit split = model::TpSplit::kReplicated;
  bool expert = false;
};

std::vector<Linear> LinearsOf(const model::ModelConfig& m, bool moe_layer) {
  std::vector<Linear> out;
  for (const model::ParamTensor& t : model::TransformerLayerParameters(m, moe_layer)) {
    if (t.in_features == 0 || t.is_bias) continue;
    out.push_back({t.name, static_cast<double>(t.in_features),
                   static_cast<double>(t.elements / t.in_features), t.tp_split, t.expert});
  }
  return out;
}

bool Has(std::string_view name, std::string_view part) {
  return name.find(part) != std::string_view::npos;
}

// Per-rank GEMM shape (n, k) of a linear: column splits the output, row the input.
void RankShape(const Linear& l, int tp, double& n, double& k) {
  n = l.out;
  k = l.in;
  if (l.split == model::TpSplit::kColumn) n /= tp;
  if (l.split == model::TpSplit::kRow) k /= tp;
}

// Host dispatches of one linear's forward: the module call, its GEMM (one per userbuffers
// chunk), the low-precision scaling kernels.
double LinearHostOps(const LayerContext& ctx, GemmDtype dtype) {
  double ops = 3;
  if (Fp8(dtype)) ops += 2;
  if (ctx.tp_overlap) ops += ctx.tp;
  return ops;
}

// One block of linears with TP communication around it (attention, dense MLP, shared
// experts): the first linear reads the gathered input, the last one's output is reduced.
struct BlockGemms {
  PassTime forward, backward;
};

BlockGemms TimeBlock(const LayerContext& ctx, const std::vector<Linear>& linears, double rows,
                     GemmDtype dtype, int tp, bool tp_comm) {
  BlockGemms b;
  const bool frozen = ctx.frozen;
  // GEMMs of the first and last linear as the TE userbuffers overlap runs them: ring
  // exchange in tp chunks (no SMs taken), "pipeline" in 4 chunks on the SMs the comm
  // kernels leave, "bulk" whole on those SMs.
  const Hardware margin = ctx.hw.WithoutSms(kUbCommSms);
  double first_fwd = 0, first_dgrad = 0, first_wgrad = 0, last_fwd = 0, last_dgrad = 0;
  double first_ring = 0, first_dgrad_bulk = 0, first_wgrad_bulk = 0, last_pipeline = 0,
         last_dgrad_ring = 0;
  for (std::size_t i = 0; i < linears.size(); ++i) {
    double n = 0, k = 0;
    RankShape(linears[i], tp, n, k);
    const double fwd = GemmSeconds(rows, n, k, dtype, ctx.hw);
    const double dgrad = GemmSeconds(rows, k, n, dtype, ctx.hw);
    const double wgrad = frozen ? 0 : GemmSeconds(n, k, rows, dtype, ctx.hw);
    b.forward.gemm += fwd;
    b.backward.gemm += dgrad + wgrad;
    b.forward.host += LinearHostOps(ctx, dtype) * kHostOpSeconds;
    b.backward.host += 2 * LinearHostOps(ctx, dtype) * kHostOpSeconds;
    if (Fp8(dtype)) {
      // The input cast (row-parallel inputs; norms fuse theirs) and the gradient cast.
      const double in_elems = rows * k;
      const double grad_elems = rows * n;
      if (linears[i].split == model::TpSplit::kRow) {
        b.forward.elementwise += MemorySeconds(in_elems * CastBytes(*ctx.job), ctx.hw);
      }
      b.backward.elementwise += MemorySeconds(grad_elems * CastBytes(*ctx.job), ctx.hw);
    }
    if (ctx.job->peft && !linears[i].expert) {
      // LoRA A [k -> r] and B [r -> n]: two small GEMMs forward, four backward.
      const double r = static_cast<double>(ctx.job->peft->dim);
      const double a = GemmSeconds(rows, r, k, GemmDtype::kBf16, ctx.hw);
      const double bb = GemmSeconds(rows, n, r, GemmDtype::kBf16, ctx.hw);
      b.forward.gemm += a + bb;
      b.backward.gemm += 2 * (a + bb);
      b.forward.host += 4 * kHostOpSeconds;
      b.backward.host += 8 * kHostOpSeconds;
    }
    if (i == 0) {
      first_fwd = fwd;
      first_dgrad = dgrad;
      first_wgrad = wgrad;
      first_ring = tp * GemmSeconds(rows / tp, n, k, dtype, ctx.hw);
      first_dgrad_bulk = GemmSeconds(rows, k, n, dtype, margin);
      first_wgrad_bulk = frozen ? 0 : GemmSeconds(n, k, rows, dtype, margin);
    }
    if (i + 1 == linears.size()) {
      last_fwd = fwd;
      last_dgrad = dgrad;
      last_pipeline =
          kUbPipelineSplits * GemmSeconds(rows / kUbPipelineSplits, n, k, dtype, margin);
      last_dgrad_ring = tp * GemmSeconds(rows / tp, k, n, dtype, ctx.hw);
    }
  }
  if (!tp_comm || tp <= 1 || linears.empty()) return b;
  const double h = static_cast<double>(ctx.job->model.hidden_size);
  const double in_bytes = rows * h * InBytes(dtype);
  const double out_bytes = rows * h * kActBytes;
  const Link link = ctx.tp_link;
  if (!ctx.sp) {  // all-reduce of the output forward and of the input gradient backward
    b.forward.comm_exposed += CollectiveSeconds(Collective::kAllReduce, out_bytes, tp, link);
    b.backward.comm_exposed += CollectiveSeconds(Collective::kAllReduce, out_bytes, tp, link);
    return b;
  }
  const double ag_in = CollectiveSeconds(Collective::kAllGather, in_bytes, tp, link);
  const double rs_out = CollectiveSeconds(Collective::kReduceScatter, out_bytes, tp, link);
  const double ag_grad = CollectiveSeconds(Collective::kAllGather, out_bytes, tp, link);
  const double rs_dgrad =
      CollectiveSeconds(Collective::kReduceScatter, rows * h * kActBytes, tp, link);
  const double ag_again = ctx.frozen ? 0 : ag_in;  // TE re-gathers the input for the wgrad
  // Bridge's LoRA input re-gather (peft.sequence_parallel_input_regather): the adapter keeps
  // its sequence-parallel input shard and all-gathers it again (BF16) in the backward for
  // its weight gradient, outside TE's overlap.
  const model::PeftConfig* peft = ctx.job->peft ? &*ctx.job->peft : nullptr;
  if (peft && peft->sequence_parallel_input_regather) {
    const bool targeted =
        std::any_of(peft->target_modules.begin(), peft->target_modules.end(),
                    [&](const std::string& t) { return Has(linears.front().name, t); });
    if (targeted) {
      b.backward.comm_exposed +=
          CollectiveSeconds(Collective::kAllGather, rows * h * kActBytes, tp, link);
    }
  }
  if (!ctx.tp_overlap) {
    b.forward.comm_exposed += ag_in + rs_out;
    b.backward.comm_exposed += ag_grad + rs_dgrad + ag_again;
    return b;
  }
  // TE userbuffers (transformer_engine/pytorch/module/base.py, CommOverlap*): the AG/RS of
  // the forward is pipelined with the GEMM split into tp chunks (ring exchange); in the
  // backward the gradient AG is pipelined with the last linear's dgrad, and the input's RS
  // and re-gather run in bulk under the first linear's wgrad and dgrad.
  auto pipelined = [](double gemm, double comm, double chunks) {
    return std::max(gemm, comm) + std::min(gemm, comm) / chunks;
  };
  b.forward.gemm += (first_ring - first_fwd) + (last_pipeline - last_fwd);
  b.forward.comm_exposed += pipelined(first_ring, ag_in, tp) - first_ring;
  b.forward.comm_exposed += pipelined(last_pipeline, rs_out, kUbPipelineSplits) - last_pipeline;
  b.backward.gemm += (last_dgrad_ring - last_dgrad) + (first_dgrad_bulk - first_dgrad) +
                     (first_wgrad_bulk - first_wgrad);
  b.backward.comm_exposed += pipelined(last_dgrad_ring, ag_grad, tp) - last_dgrad_ring;
  b.backward.comm_exposed += std::max(0.0, rs_dgrad - first_wgrad_bulk);
  b.backward.comm_exposed += std::max(0.0, ag_again - first_dgrad_bulk);
  return b;
}

ModuleTime Module(std::string_view recompute, std::string_view parent, std::string_view scope) {
  ModuleTime m;
  m.recompute_name = recompute;
  m.recompute_parent = parent;
  m.graph_scope = scope;
  return m;
}

// A norm over `elements`: TE's fused kernel reads and writes once (plus the low-precision
// output of LayerNormLinear); eager PyTorch RMSNorm runs about five kernels.
ModuleTime NormModule(const LayerContext& ctx, double elements, std::string_view scope,
                      std::string_view parent) {
  ModuleTime m = Module("layernorm", parent, scope);
  const bool eager = ctx.fsdp2 && !ctx.job->memtune.fsdp2.compile;
  const double passes = eager ? 5 : 2;
  m.forward.elementwise = MemorySeconds(elements * kActBytes * passes, ctx.hw);
  m.backward.elementwise = MemorySeconds(elements * kActBytes * (passes + 1), ctx.hw);
  m.forward.host = (eager ? 5 : 1) * kHostOpSeconds;
  m.backward.host = 2 * m.forward.host;
  return m;
}

ModuleTime ResidualModule(const LayerContext& ctx, std::string_view scope,
                          std::string_view parent) {
  ModuleTime m = Module("", parent, scope);
  const double h = static_cast<double>(ctx.job->model.hidden_size);
  const double dropout = ctx.job->model.hidden_dropout > 0 ? 1 : 0;  // the mask
  m.forward.elementwise = MemorySeconds(ctx.tokens_sp * h * (3 * kActBytes + dropout), ctx.hw);
  m.backward.elementwise = MemorySeconds(ctx.tokens_sp * h * (2 * kActBytes + dropout), ctx.hw);
  m.forward.host = kHostOpSeconds;
  m.backward.host = kHostOpSeconds;
  return m;
}

// The element-wise passes TE's ring attention adds to the attention kernels of one rank
// (AttnFuncWithCPAndKVP2P, transformer_engine/pytorch/attention/dot_product_attention/
// context_parallel.py; the same structure since TE 1.3's attention.py). Each rank holds two
// halves of the sequence and meets the cp KV blocks in cp steps: the diagonal (causal, whole
// tiles), the "lower-triangle" steps (all queries, the first half of the KV block) and the
// "upper-triangle" steps (the second half of the queries, the whole KV block); rank r has r
// of the first and cp - 1 - r of the second, (cp - 1) / 2 each on average.
//   forward: K and V packed into one send buffer (read + write); every lower step copies the
//   KV halves it reads, every upper step the query half, to contiguous tensors; the running
//   log-sum-exp merged per step (FP32, two reads and a write); after the ring, the output
//   initialised from the diagonal step (read + write) and every other step's partial output
//   merged into it (read the partial, read and write the output; half the rows for upper steps).
//   backward: K and V copied into the send buffer; lower steps copy the KV halves, upper
//   steps the query, output and output-gradient halves; dQ and dK/dV accumulated per step
//   (the first a copy, then read-add-write; dQ on half the rows for upper steps, dK/dV for
//   lower steps).
// Host: per extra step the forward launches the merge, the copy and a send/receive pair
// (lse and output merges as two kernels), the backward the copies, the dQ, dK and dV updates
// and the pair.
void AddRingMerge(double tokens, double heads, double groups, double qk_dim, double v_dim,
                  const LayerContext& ctx, ModuleTime& core) {
  const double steps_half = (ctx.cp - 1) / 2.0;  // lower-triangle = upper-triangle, average
  const double q = tokens * heads * qk_dim;
  const double o = tokens * heads * v_dim;
  const double kv = tokens * groups * (qk_dim + v_dim);
  // One copy (2 passes) plus read-add-write (3) per full step, 1.5 per half step.
  const double merge_passes = 2 + 3 * steps_half + 1.5 * steps_half;
  const double fwd_elements = 2 * kv + steps_half * (kv + q) + merge_passes * o;
  const double lse_bytes = (ctx.cp - 1) * tokens * heads * 4 * 3;
  const double bwd_elements =
      2 * kv + steps_half * (kv + q + 2 * o) + merge_passes * q + merge_passes * kv;
  core.forward.elementwise += MemorySeconds(fwd_elements * kActBytes + lse_bytes, ctx.hw);
  core.backward.elementwise += MemorySeconds(bwd_elements * kActBytes, ctx.hw);
  core.forward.host += (ctx.cp - 1) * 5 * kHostOpSeconds;
  core.backward.host += (ctx.cp - 1) * 6 * kHostOpSeconds;
}

void AddAttention(const LayerContext& ctx, const std::vector<Linear>& linears, GemmDtype dtype,
                  std::vector<ModuleTime>& out) {
  const model::ModelConfig& m = ctx.job->model;
  const double h = static_cast<double>(m.hidden_size);
  out.push_back(NormModule(ctx, ctx.tokens_sp * h, "attn", ""));
  std::vector<Linear> main, up;
  for (const Linear& l : linears) {
    if (!Has(l.name, "self_attention.")) continue;
    (Has(l.name, "_up_proj") ? up : main).push_back(l);
  }
  // The up projections sit between the down projections and linear_proj.
  std::vector<Linear> block = main;
  if (!up.empty()) block.insert(block.end() - 1, up.begin(), up.end());
  BlockGemms gemms = TimeBlock(ctx, block, ctx.tokens, dtype, ctx.tp, true);
  ModuleTime linear = Module("", "", "attn");
  linear.forward = gemms.forward;
  linear.backward = gemms.backward;
  if (!up.empty()) {  // the share MCore's mla_up_proj recompute re-runs
    BlockGemms up_only = TimeBlock(ctx, up, ctx.tokens, dtype, ctx.tp, false);
    ModuleTime up_module = Module("mla_up_proj", "", "attn");
    up_module.forward = up_only.forward;
    up_module.backward = up_only.backward;
    linear.forward.gemm -= up_only.forward.gemm;
    linear.forward.host -= up_only.forward.host;
    linear.forward.elementwise -= up_only.forward.elementwise;
    linear.backward.gemm -= up_only.backward.gemm;
    linear.backward.host -= up_only.backward.host;
    linear.backward.elementwise -= up_only.backward.elementwise;
    out.push_back(up_module);
  }
  out.push_back(linear);
  // Rotary embedding on q and k (read + write), then the attention kernel.
  const double heads = static_cast<double>(m.num_attention_heads) / ctx.tp;
  const double groups = std::max(1.0, static_cast<double>(m.num_query_groups) / ctx.tp);
  const double qk_dim = m.multi_latent_attention
                            ? static_cast<double>(m.qk_head_dim + m.qk_pos_emb_head_dim)
                            : static_cast<double>(m.kv_channels);
  const double v_dim = m.multi_latent_attention ? static_cast<double>(m.v_head_dim) : qk_dim;
  ModuleTime rope = Module("", "", "attn");
  const double rope_passes = ctx.fsdp2 && !ctx.job->memtune.fsdp2.compile ? 6 : 2;
  rope.forward.elementwise =
      MemorySeconds(ctx.tokens * (heads + groups) * qk_dim * kActBytes * rope_passes, ctx.hw);
  rope.backward = rope.forward;
  rope.forward.host = (rope_passes / 2) * kHostOpSeconds;
  rope.backward.host = rope.forward.host;
  out.push_back(rope);
  // Executed FLOPs of flash attention: QK^T and PV over the causal half (each CP rank holds
  // 1/cp of the queries against all keys); the backward runs five matmuls to the forward's
  // two (FlashAttention-2, Dao 2023, section 3.1).
  const double seq = static_cast<double>(m.seq_length);
  const double fwd_flops = 2 * ctx.tokens * seq * heads * (qk_dim + v_dim) * 0.5;
  ModuleTime core = Module("core_attn", "", "attn");
  const bool unfused = model::CoreAttentionOf(m) != model::CoreAttention::kFused && !ctx.fsdp2;
  core.forward.attention = AttentionSeconds(fwd_flops, false, ctx.hw);
  core.backward.attention = AttentionSeconds(2.5 * fwd_flops, true, ctx.hw);
  if (unfused) {  // the [b, heads, s, s] scores: softmax, dropout, their gradients
    const double scores = ctx.tokens * seq * heads;
    core.forward.elementwise = MemorySeconds(scores * kActBytes * 4, ctx.hw);
    core.backward.elementwise = MemorySeconds(scores * kActBytes * 6, ctx.hw);
  }
  core.forward.host = 2 * kHostOpSeconds;
  core.backward.host = 3 * kHostOpSeconds;
  if (ctx.cp > 1) {
    // Ring exchange of K and V (cp - 1 steps), overlapped step by step with the attention
    // of the chunk in hand (MCore / TE AttnFuncWithCPAndKVP2P); the backward also returns dKV.
    const double kv_bytes = ctx.tokens * groups * (qk_dim + v_dim) * kActBytes;
    const double step = CollectiveSeconds(Collective::kSendRecv, kv_bytes, 2, ctx.cp_link);
    const double fwd_comm = (ctx.cp - 1) * step;
    const double bwd_comm = 2 * fwd_comm;
    core.forward.comm_exposed = std::max(0.0, fwd_comm - core.forward.attention);
    core.backward.comm_exposed = std::max(0.0, bwd_comm - core.backward.attention);
    if (!ctx.fsdp2) AddRingMerge(ctx.tokens, heads, groups, qk_dim, v_dim, ctx, core);
  }
  out.push_back(core);
  out.push_back(ResidualModule(ctx, "attn", ""));
}

// A dense MLP (or the shared experts): fc1, the activation, fc2.
void AddMlp(const LayerContext& ctx, const std::vector<Linear>& linears, GemmDtype dtype,
            std::string_view recompute, std::string_view parent, std::string_view scope,
            std::vector<ModuleTime>& out) {
  if (linears.empty()) return;
  BlockGemms gemms = TimeBlock(ctx, linears, ctx.tokens, dtype, ctx.tp, true);
  ModuleTime mlp = Module(recompute, parent, scope);
  mlp.forward = gemms.forward;
  mlp.backward = gemms.backward;
  const double fc1_out = linears.front().out / ctx.tp;
  const double act_out = linears.back().in / ctx.tp;
  const bool eager = ctx.fsdp2 && !ctx.job->memtune.fsdp2.compile;
  const double passes = eager ? 1.5 : 1;  // eager SiLU * up: one more intermediate
  mlp.forward.elementwise +=
      MemorySeconds(ctx.tokens * (fc1_out + act_out) * kActBytes * passes, ctx.hw);
  mlp.backward.elementwise +=
      MemorySeconds(ctx.tokens * (2 * fc1_out + act_out) * kActBytes * passes, ctx.hw);
  mlp.forward.host += (eager ? 3 : 1) * kHostOpSeconds;
  mlp.backward.host += (eager ? 6 : 2) * kHostOpSeconds;
  out.push_back(mlp);
}

void AddMoe(const LayerContext& ctx, const std::vector<Linear>& linears, GemmDtype dtype,
            std::vector<ModuleTime>& out) {
  const model::ModelConfig& m = ctx.job->model;
  const double h = static_cast<double>(m.hidden_size);
  const double experts = static_cast<double>(m.num_moe_experts.value_or(1));
  const double topk = static_cast<double>(m.moe_router_topk);
  // Router: a [tokens, experts] GEMM, softmax / top-k and the aux-loss kernels.
  ModuleTime router = Module("", "moe", "moe_router");
  router.forward.gemm = GemmSeconds(ctx.tokens_sp, experts, h, GemmDtype::kBf16, ctx.hw);
  router.backward.gemm = 2 * router.forward.gemm;
  router.forward.elementwise = MemorySeconds(ctx.tokens_sp * experts * 4 * 4, ctx.hw);
  router.backward.elementwise = router.forward.elementwise;
  router.forward.host = 10 * kHostOpSeconds;
  router.backward.host = 10 * kHostOpSeconds;
  out.push_back(router);
  // Dispatch and combine: permute, all-to-all (or all-gather), unpermute.
  const double routed = ctx.tokens_sp * topk;
  ModuleTime dispatch = Module("", "moe", "moe_preprocess");
  dispatch.forward.elementwise = MemorySeconds(routed * h * kActBytes * 4, ctx.hw);
  dispatch.backward.elementwise = dispatch.forward.elementwise;
  double comm = 0;
  if (m.moe_token_dispatcher_type == model::MoeTokenDispatcher::kAllgather) {
    comm = CollectiveSeconds(Collective::kAllGather, ctx.tokens_sp * ctx.ep * h * kActBytes, ctx.ep,
                             ctx.ep_link) +
           CollectiveSeconds(Collective::kReduceScatter, ctx.tokens_sp * ctx.ep * h * kActBytes,
                             ctx.ep, ctx.ep_link);
  } else {
    comm =
        2 * CollectiveSeconds(Collective::kAllToAll, routed * h * kActBytes, ctx.ep, ctx.ep_link);
  }
  dispatch.forward.comm_exposed = comm;
  dispatch.backward.comm_exposed = comm;
  dispatch.forward.host = 14 * kHostOpSeconds;
  dispatch.backward.host = 14 * kHostOpSeconds;
  // Routed experts: rows per local expert under balanced routing (the benchmarks force it).
  std::vector<Linear> routed_linears, shared;
  for (const Linear& l : linears) {
    if (l.expert)
      routed_linears.push_back(l);
    else if (Has(l.name, "shared_experts"))
      shared.push_back(l);
  }
  const double local = std::max(1.0, experts / ctx.ep);
  const double rows = routed * ctx.etp / local;
  ModuleTime expert = Module("", "moe", "moe");
  ModuleTime act = Module("moe_act", "moe", "moe");
  for (const Linear& l : routed_linears) {
    double n = 0, k = 0;
    RankShape(l, ctx.etp, n, k);
    // Grouped GEMM: one kernel over all local experts' rows; without it, one per expert.
    const double per = GemmSeconds(rows, n, k, dtype, ctx.hw);
    const double grouped = GemmSeconds(rows * local, n, k, dtype, ctx.hw);
    const double fwd = m.moe_grouped_gemm ? grouped : per * local;
    expert.forward.gemm += fwd;
    expert.backward.gemm += (ctx.frozen ? 1 : 2) * fwd;
    const double launches = m.moe_grouped_gemm ? 1 : local;
    expert.forward.host += (launches + (Fp8(dtype) ? 2 : 0)) * kHostOpSeconds;
    expert.backward.host += 2 * (launches + (Fp8(dtype) ? 2 : 0)) * kHostOpSeconds;
    if (Fp8(dtype)) {
      expert.forward.elementwise += MemorySeconds(rows * local * k * CastBytes(*ctx.job), ctx.hw);
      expert.backward.elementwise += MemorySeconds(rows * local * n * CastBytes(*ctx.job), ctx.hw);
    }
  }
  if (!routed_linears.empty()) {
    const double fc1_out = routed_linears.front().out / ctx.etp;
    const double act_out = routed_linears.back().in / ctx.etp;
    act.forward.elementwise = MemorySeconds(rows * local * (fc1_out + act_out) * kActBytes, ctx.hw);
    act.backward.elementwise =
        MemorySeconds(rows * local * (2 * fc1_out + act_out) * kActBytes, ctx.hw);
    act.forward.host = (m.moe_grouped_gemm ? 1 : local) * kHostOpSeconds;
    act.backward.host = 2 * act.forward.host;
  }
  out.push_back(dispatch);
  out.push_back(expert);
  out.push_back(act);
  AddMlp(ctx, shared, dtype, "shared_experts", "moe", "moe_router", out);
}

bool Captured(const model::ModelConfig& m, std::string_view scope) {
  if (m.cuda_graph_impl == model::CudaGraphImpl::kNone) return false;
  if (m.cuda_graph_impl == model::CudaGraphImpl::kFullIteration) return true;
  if (m.cuda_graph_scope.empty()) return true;  // MCore: the whole layer
  for (const std::string& s : m.cuda_graph_scope) {
    if (s == scope || s == "full") return true;
    if (s == "moe" && (scope == "moe_router" || scope == "moe_preprocess")) return true;
  }
  return false;
}

// Captured modules replay from a graph: one launch per captured scope and pass.
void ApplyCudaGraphs(const model::ModelConfig& m, std::vector<ModuleTime>& modules) {
  std::vector<std::string_view> launched;
  for (ModuleTime& module : modules) {
    if (!Captured(m, module.graph_scope)) continue;
    const bool first =
        std::find(launched.begin(), launched.end(), module.graph_scope) == launched.end();
    if (first) launched.push_back(module.graph_scope);
    const double launch = first && m.cuda_graph_impl != model::CudaGraphImpl::kFullIteration
                              ? kGraphLaunchSeconds
                              : 0;
    module.forward.host = launch;
    module.backward.host = launch;
  }
}

// overlap_moe_expert_parallel_comm: the dispatch / combine of one micro-batch runs under
// the attention and expert compute of another (MCore combined 1F1B, a2a overlap).
void ApplyEpOverlap(const LayerContext& ctx, std::vector<ModuleTime>& modules) {
  if (!ctx.job->model.overlap_moe_expert_parallel_comm) return;
  double fwd_compute = 0, bwd_compute = 0;
  for (const ModuleTime& module : modules) {
    fwd_compute += module.forward.gemm + module.forward.attention;
    bwd_compute += module.backward.gemm + module.backward.attention;
  }
  for (ModuleTime& module : modules) {
    if (module.graph_scope != "moe_preprocess") continue;
    module.forward.comm_exposed = std::max(0.0, module.forward.comm_exposed - fwd_compute);
    module.backward.comm_exposed = std::max(0.0, module.backward.comm_exposed - bwd_compute);
  }
}

}  // namespace

std::vector<ModuleTime> LayerModules(const LayerContext& ctx, bool moe_layer, GemmDtype dtype) {
  const model::ModelConfig& m = ctx.job->model;
  const std::vector<Linear> linears = LinearsOf(m, moe_layer);
  std::vector<ModuleTime> out;
  AddAttention(ctx, linears, dtype, out);
  const double h = static_cast<double>(m.hidden_size);
  if (moe_layer) {
    out.push_back(NormModule(ctx, ctx.tokens_sp * h, "moe_router", "moe"));
    AddMoe(ctx, linears, dtype, out);
    out.push_back(ResidualModule(ctx, "moe", "moe"));
  } else {
    out.push_back(NormModule(ctx, ctx.tokens_sp * h, "mlp", ""));
    std::vector<Linear> mlp;
    for (const Linear& l : linears) {
      if (Has(l.name, "mlp.linear_fc")) mlp.push_back(l);
    }
    AddMlp(ctx, mlp, dtype, "mlp", "", "mlp", out);
    out.push_back(ResidualModule(ctx, "mlp", ""));
  }
  ApplyEpOverlap(ctx, out);
  ApplyCudaGraphs(m, out);
  return out;
}

double DispatchSyncStall(const model::Job& job, const std::vector<ModuleTime>& modules) {
  const model::ModelConfig& m = job.model;
  if (m.moe_token_dispatcher_type == model::MoeTokenDispatcher::kAllgather ||
      m.moe_expert_capacity_factor || m.cuda_graph_impl == model::CudaGraphImpl::kFullIteration) {
    return 0;
  }
  double gpu_before = 0, host_before = 0, gpu_after = 0, host_after = 0;
  bool after = false;
  for (const ModuleTime& module : modules) {
    if (module.graph_scope == "moe_preprocess") after = true;
    (after ? gpu_after : gpu_before) += module.forward.Gpu();
    (after ? host_after : host_before) += module.forward.host;
  }
  return std::max(gpu_before, host_before) + std::max(gpu_after, host_after) -
         std::max(gpu_before + gpu_after, host_before + host_after);
}

void ApplyFsdp2Checkpoint(const model::Fsdp2Config& fsdp2, const std::vector<ModuleTime>& modules,
                          LayerTime& layer) {
  PassTime forward;
  for (const ModuleTime& module : modules) forward += module.forward;
  switch (fsdp2.activation_checkpoint) {
    case model::Fsdp2Checkpoint::kNone:
      return;
    case model::Fsdp2Checkpoint::kFull:
      layer.recompute = forward;
      return;
    case model::Fsdp2Checkpoint::kSelectiveLayer:  // torchtitan's default: every 2nd layer
      layer.recompute.gemm = forward.gemm / 2;
      layer.recompute.attention = forward.attention / 2;
      layer.recompute.elementwise = forward.elementwise / 2;
      layer.recompute.host = forward.host / 2;
      return;
    case model::Fsdp2Checkpoint::kSelectiveOp:
      // torchtitan's op policy saves attention and every second matmul's output
      // (torchtitan/models/llama3/parallelize.py _apply_ac_to_transformer_block): the other
      // matmuls and every element-wise op re-run.
      layer.recompute.gemm = forward.gemm / 2;
      layer.recompute.elementwise = forward.elementwise;
      layer.recompute.host = forward.host;
      return;
  }
}

}  // namespace memtune::steptime
