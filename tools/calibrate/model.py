"""One Megatron rank's model chunks: embedding (first stage), GQA + SwiGLU transformer layers
at per-rank TP shapes, final norm + output layer + vocab-parallel loss (last stage), with
Megatron's selective and full recompute (torch.utils.checkpoint, reentrant, as MCore's
tensor_parallel.checkpoint). Sources: Megatron-LM @ d98e8a64 megatron/core/transformer/
{transformer_layer,transformer_block,attention}.py, models/common/embeddings/
language_model_embedding.py, tensor_parallel/layers.py (VocabParallelEmbedding).
"""
import torch
import torch.utils.checkpoint as torch_checkpoint

import ops
import workloads

_INIT_STD = 0.02


def checkpoint(fn, *args):
    """Reentrant activation checkpoint (keeps only the inputs), on every PyTorch version."""
    try:
        return torch_checkpoint.checkpoint(fn, *args, use_reentrant=True)
    except TypeError:   # PyTorch < 1.11 has no use_reentrant
        return torch_checkpoint.checkpoint(fn, *args)


def _param(shape, device, dtype, std=_INIT_STD):
    data = torch.empty(shape, device=device, dtype=dtype)
    if len(shape) == 1:
        data.fill_(1.0)
    else:
        data.normal_(0.0, std)
    return torch.nn.Parameter(data)


class TransformerLayer(torch.nn.Module):
    """Pre-norm GPT layer at per-rank shapes: RMSNorm, fused QKV (GQA), core attention,
    output projection, RMSNorm, SwiGLU MLP. No biases, dropout 0."""

    def __init__(self, wl, device, dtype):
        super().__init__()
        h, d, t = wl.hidden, wl.head_dim, wl.tp
        self.tp, self.sp, self.d = t, wl.sp, d
        self.heads, self.groups = wl.heads // t, wl.groups // t
        self.modules_ = set(wl.recompute_modules) if wl.recompute == "selective" else set()
        # Registration order = MCore's: input_layernorm, linear_qkv, linear_proj,
        # pre_mlp_layernorm, linear_fc1, linear_fc2.
        self.ln1 = _param([h], device, dtype)
        self.qkv = _param([(self.heads + 2 * self.groups) * d, h], device, dtype)
        self.proj = _param([h, self.heads * d], device, dtype)
        self.ln2 = _param([h], device, dtype)
        self.fc1 = _param([2 * wl.ffn // t, h], device, dtype)
        self.fc2 = _param([h, wl.ffn // t], device, dtype)

    def _qkv(self, x):
        mixed = ops.ColumnParallelLinear.apply(ops.RMSNorm.apply(x, self.ln1), self.qkv,
                                               self.tp, self.sp)
        s, b = mixed.shape[0], mixed.shape[1]
        q_width, kv_width = self.heads * self.d, self.groups * self.d
        q, k, v = torch.split(mixed, [q_width, kv_width, kv_width], dim=-1)
        return (q.reshape(s, b, self.heads, self.d).contiguous(),
                k.reshape(s, b, self.groups, self.d).contiguous(),
                v.reshape(s, b, self.groups, self.d).contiguous())

    def _mlp(self, normed):
        hidden = ops.SwiGLU.apply(ops.ColumnParallelLinear.apply(normed, self.fc1, self.tp,
                                                                 self.sp))
        return ops.RowParallelLinear.apply(hidden, self.fc2, self.tp, self.sp)

    def forward(self, x):
        q, k, v = self._qkv(x)
        if "core_attn" in self.modules_:
            out = checkpoint(ops.CoreAttention.apply, q, k, v)
        else:
            out = ops.CoreAttention.apply(q, k, v)
        del q, k, v
        s, b = out.shape[0], out.shape[1]
        x = x + ops.RowParallelLinear.apply(out.view(s, b, -1), self.proj, self.tp, self.sp)
        del out
        normed = ops.RMSNorm.apply(x, self.ln2)
        if "mlp" in self.modules_:
            return x + checkpoint(self._mlp, normed)
        return x + self._mlp(normed)


class Embedding(torch.nn.Module):
    """VocabParallelEmbedding of TP rank 0 (vocab rows [0, V/t)); with SP its output is
    transposed to [s, b, h] and reduce-scattered to [s/t, b, h]."""

    def __init__(self, wl, device, dtype):
        super().__init__()
        self.tp, self.sp = wl.tp, wl.sp
        self.weight = _param([wl.vocab // wl.tp, wl.hidden], device, dtype)

    def forward(self, tokens):
        rows = self.weight.shape[0]
        if self.tp > 1:
            mask = tokens >= rows
            masked = tokens.clone()
            masked[mask] = 0
            out = torch.nn.functional.embedding(masked, self.weight)
            out = out.masked_fill(mask.unsqueeze(-1), 0.0)
        else:
            out = torch.nn.functional.embedding(tokens, self.weight)
        out = out.transpose(0, 1).contiguous()
        return ops.sp_reduce_scatter(out, self.tp) if self.sp else out


class OutputHead(torch.nn.Module):
    """Final RMSNorm, column-parallel output layer and vocab-parallel cross-entropy."""

    def __init__(self, wl, device, dtype):
        super().__init__()
        self.tp, self.sp = wl.tp, wl.sp
        self.final_ln = _param([wl.hidden], device, dtype)
        self.weight = _param([wl.vocab // wl.tp, wl.hidden], device, dtype)

    def forward(self, x, labels, loss_mask):
        logits = ops.ColumnParallelLinear.apply(ops.RMSNorm.apply(x, self.final_ln),
                                                self.weight, self.tp, self.sp)
        losses = ops.VocabParallelCrossEntropy.apply(logits, labels.transpose(0, 1).contiguous())
        del logits
        mask = loss_mask.transpose(0, 1).reshape(-1).float()
        return (losses.view(-1) * mask).sum() / mask.sum()


class Chunk(torch.nn.Module):
    """One model chunk (virtual pipeline stage) of the rank."""

    def __init__(self, wl, index, device, dtype):
        super().__init__()
        self.embedding = Embedding(wl, device, dtype) if wl.has_embedding and index == 0 else None
        self.layers = torch.nn.ModuleList(
            TransformerLayer(wl, device, dtype) for _ in range(wl.layers_per_chunk))
        last = wl.has_output and index == wl.chunks - 1
        self.head = OutputHead(wl, device, dtype) if last else None
        self.groups = workloads.checkpointed_layers(wl)

    def _run(self, first, last):
        def run(x):
            for layer in self.layers[first:last]:
                x = layer(x)
            return x
        return run

    def forward(self, x, labels=None, loss_mask=None):
        if self.embedding is not None:
            x = self.embedding(x)
        done = 0
        for first, last in self.groups:
            x = checkpoint(self._run(first, last), x)
            done = last
        x = self._run(done, len(self.layers))(x)
        if self.head is not None:
            return self.head(x, labels, loss_mask)
        return x
