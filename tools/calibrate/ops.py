"""Autograd functions that keep for backward what Megatron's GPT layers keep.

Each autograd Function saves exactly what Megatron-Core's (Transformer Engine's) layer
saves for backward, at the per-rank shapes a tensor-parallel degree gives, so the bytes
held between forward and backward match a Megatron rank. Collectives are emulated on one
device by ops that allocate the same outputs (a gather is a repeat, a reduce-scatter a
sum over the TP copies). Sources (facts, not code): Megatron-LM @ d98e8a64
megatron/core/tensor_parallel/{layers,cross_entropy}.py, transformer/transformer_layer.py,
fusions/fused_bias_swiglu.py; docs/megatron.md sections 8.2 and 10.
"""
import math

import torch
import torch.nn.functional as F

_HAS_SDPA = hasattr(F, "scaled_dot_product_attention")
_RMS_EPS = 1e-5


def sp_gather(x_local, tp):
    """Sequence-parallel all-gather along dim 0: [s/t, ...] -> [s, ...] (a new tensor)."""
    return x_local.repeat(tp, *([1] * (x_local.dim() - 1))) if tp > 1 else x_local


def sp_reduce_scatter(x_full, tp):
    """Sequence-parallel reduce-scatter along dim 0: [s, ...] -> [s/t, ...] (a new tensor)."""
    if tp == 1:
        return x_full
    return x_full.view(tp, x_full.shape[0] // tp, *x_full.shape[1:]).sum(0)


def _wgrad(grad_out, total_in):
    """Weight gradient [out, in] of y = x W^T (Megatron: grad_output.t().matmul(total_input))."""
    return grad_out.reshape(-1, grad_out.shape[-1]).t().matmul(
        total_in.reshape(-1, total_in.shape[-1]))


class ColumnParallelLinear(torch.autograd.Function):
    """ColumnParallelLinear with sequence parallelism: saves the *local* input shard and
    re-gathers it in backward (MCore LinearWithGradAccumulationAndAsyncCommunication)."""

    @staticmethod
    def forward(ctx, x, weight, tp, sp):
        ctx.tp, ctx.sp = tp, sp
        ctx.save_for_backward(x, weight)
        total = sp_gather(x, tp) if sp else x
        return total.matmul(weight.t())

    @staticmethod
    def backward(ctx, grad_out):
        x, weight = ctx.saved_tensors
        total = sp_gather(x, ctx.tp) if ctx.sp else x
        grad_in = grad_out.matmul(weight)
        if ctx.sp:
            grad_in = sp_reduce_scatter(grad_in, ctx.tp)
        return grad_in, _wgrad(grad_out, total), None, None


class RowParallelLinear(torch.autograd.Function):
    """RowParallelLinear: output partial sums reduce-scattered over the sequence (SP) or
    all-reduced in place (no SP); saves its input."""

    @staticmethod
    def forward(ctx, x, weight, tp, sp):
        ctx.tp, ctx.sp = tp, sp
        ctx.save_for_backward(x, weight)
        out = x.matmul(weight.t())
        return sp_reduce_scatter(out, tp) if sp else out

    @staticmethod
    def backward(ctx, grad_out):
        x, weight = ctx.saved_tensors
        full = sp_gather(grad_out, ctx.tp) if ctx.sp else grad_out
        return full.matmul(weight), _wgrad(full, x), None, None


class RMSNorm(torch.autograd.Function):
    """RMSNorm (TE): saves the input, the weight and an fp32 rstd per token."""

    @staticmethod
    def forward(ctx, x, weight):
        rstd = torch.rsqrt(x.float().pow_(2).mean(-1, keepdim=True).add_(_RMS_EPS))
        ctx.save_for_backward(x, weight, rstd)
        return x * rstd.to(x.dtype) * weight

    @staticmethod
    def backward(ctx, grad_out):
        x, weight, rstd = ctx.saved_tensors
        xf, gf = x.float(), grad_out.float()
        normed = xf * rstd
        grad_w = (gf * normed).sum(dim=tuple(range(x.dim() - 1))).to(weight.dtype)
        gw = gf * weight.float()
        dot = (gw * normed).mean(-1, keepdim=True)
        grad_x = (gw - normed * dot) * rstd
        return grad_x.to(x.dtype), grad_w


class SwiGLU(torch.autograd.Function):
    """silu(x1) * x2 over the two halves of fc1's output; saves only that output
    (MCore fused_bias_swiglu SwiGLUFunction)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        x1, x2 = torch.chunk(x, 2, -1)
        return F.silu(x1) * x2

    @staticmethod
    def backward(ctx, grad_out):
        (x,) = ctx.saved_tensors
        x1, x2 = torch.chunk(x, 2, -1)
        sig = torch.sigmoid(x1)
        grad1 = grad_out * x2 * sig * (1 + x1 * (1 - sig))
        grad2 = grad_out * x1 * sig
        return torch.cat((grad1, grad2), -1)


def _attend(q, k, v):
    """Causal attention over [s, b, heads, d] tensors; returns [s, b, heads_q, d] contiguous."""
    qh, kh, vh = (t.permute(1, 2, 0, 3) for t in (q, k, v))
    rep = qh.shape[1] // kh.shape[1]
    if rep > 1:
        kh, vh = kh.repeat_interleave(rep, dim=1), vh.repeat_interleave(rep, dim=1)
    if _HAS_SDPA:
        out = F.scaled_dot_product_attention(qh, kh, vh, is_causal=True)
    else:  # PyTorch 1.13 (CPU dry run): plain math attention
        seq = qh.shape[2]
        scores = qh.matmul(kh.transpose(-1, -2)) / math.sqrt(qh.shape[-1])
        mask = torch.ones(seq, seq, dtype=torch.bool, device=q.device).triu_(1)
        out = torch.softmax(scores.masked_fill_(mask, float("-inf")), -1).matmul(vh)
    return out.permute(2, 0, 1, 3).contiguous()


class CoreAttention(torch.autograd.Function):
    """Flash-attention-like core attention: keeps q, k, v, the output and an fp32
    log-sum-exp [b, heads, s] for backward, and no score matrix. Backward recomputes the
    attention inside (transient memory only)."""

    @staticmethod
    def forward(ctx, q, k, v):
        with torch.no_grad():
            out = _attend(q, k, v)
        s, b, heads = q.shape[0], q.shape[1], q.shape[2]
        lse = torch.empty(b, heads, s, dtype=torch.float32, device=q.device)
        ctx.save_for_backward(q, k, v, out, lse)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, _, _ = ctx.saved_tensors
        with torch.enable_grad():
            leaves = [t.detach().requires_grad_() for t in (q, k, v)]
            out = _attend(*leaves)
            return torch.autograd.grad(out, leaves, grad_out)


class VocabParallelCrossEntropy(torch.autograd.Function):
    """MCore vocab_parallel_cross_entropy for TP rank 0 (vocab range [0, V/t)): an fp32
    copy of the logits becomes the softmax in place and is saved for backward."""

    @staticmethod
    def forward(ctx, logits, target):
        x = logits.float()
        x -= x.max(dim=-1)[0].unsqueeze(-1)
        vocab = x.shape[-1]
        target_mask = target >= vocab
        masked_target = target.clone()
        masked_target[target_mask] = 0
        masked_1d = masked_target.view(-1)
        arange = torch.arange(masked_1d.numel(), device=x.device)
        predicted = x.view(-1, vocab)[arange, masked_1d].clone().view_as(target)
        predicted[target_mask] = 0.0
        torch.exp(x, out=x)
        sum_exp = x.sum(dim=-1)
        loss = torch.log(sum_exp) - predicted
        x.div_(sum_exp.unsqueeze(-1))
        ctx.save_for_backward(x, target_mask, masked_1d)
        return loss

    @staticmethod
    def backward(ctx, grad_out):
        softmax, target_mask, masked_1d = ctx.saved_tensors
        grad_2d = softmax.view(-1, softmax.shape[-1])
        arange = torch.arange(grad_2d.shape[0], device=softmax.device)
        grad_2d[arange, masked_1d] -= 1.0 - target_mask.view(-1).float()
        softmax.mul_(grad_out.unsqueeze(-1))
        return softmax, None
