"""Megatron's DDP gradient buffer and mixed-precision (distributed) optimizer for one rank.

- One contiguous `main_grad` buffer per model chunk (fp32, or bf16 without
  grad_reduce_in_fp32) laid out by layout.buffer_layout; each param's main_grad is a view.
  A hook on each param's grad accumulator adds param.grad into main_grad and drops
  param.grad (MCore DistributedDataParallel._make_backward_post_hook).
- With the distributed optimizer the bf16 params move into a contiguous param buffer too
  (_ParamAndGradBuffer.param_data), and the optimizer holds fp32 master copies of only this
  rank's shard (DistributedOptimizer: shard_model_param.clone().float()).
- Adam's exp_avg / exp_avg_sq appear lazily at the first step (torch.optim.Adam state).
- step(): main grads -> fp32 master grads (a view for fp32 buffers, a copy for bf16),
  Adam step, master -> bf16 params (MixedPrecisionOptimizer.step in MCore optimizer.py).
"""
import torch

import layout

_LR, _BETAS, _EPS = 1e-5, (0.9, 0.95), 1e-8


def _adam(params, device):
    """torch.optim.Adam: fused on CUDA (no temporaries, like TE/Apex FusedAdam), else the
    single-tensor path. Returns (optimizer, implementation name)."""
    if device.type == "cuda":
        try:
            return torch.optim.Adam(params, lr=_LR, betas=_BETAS, eps=_EPS, fused=True), "fused"
        except (TypeError, RuntimeError):
            pass
    try:
        return torch.optim.Adam(params, lr=_LR, betas=_BETAS, eps=_EPS, foreach=False), "single"
    except TypeError:
        return torch.optim.Adam(params, lr=_LR, betas=_BETAS, eps=_EPS), "default"


class ChunkBuffer:
    """The grad (and, with the distributed optimizer, param) buffer of one model chunk."""

    def __init__(self, module, wl, device):
        self.params = list(module.parameters())
        numels = [p.numel() for p in self.params]
        bucket = layout.default_bucket_size(wl.dp, wl.overlap_grad_reduce, wl.pp_rank)
        self.layout = layout.buffer_layout(numels, wl.dist_opt, wl.dp, bucket)
        grad_dtype = torch.float32 if wl.grad_fp32 else torch.bfloat16
        self.param_data = None
        if wl.dist_opt:
            self.param_data = torch.zeros(self.layout.numel, dtype=torch.bfloat16, device=device)
        self.grad_data = torch.zeros(self.layout.numel, dtype=grad_dtype, device=device)
        self._hooks = []
        for param, (start, end) in zip(self.params, self.layout.param_ranges):
            if self.param_data is not None:
                view = self.param_data[start:end].view(param.shape)
                view.copy_(param.data)
                param.data = view
            param.main_grad = self.grad_data[start:end].view(param.shape)
            self._register_hook(param)

    def _register_hook(self, param):
        def hook(*_):
            if param.grad is not None:
                param.main_grad.add_(param.grad.data)
            param.grad = None
        # The grad accumulator must stay referenced or its hook is lost.
        accumulator = param.expand_as(param).grad_fn.next_functions[0][0]
        accumulator.register_hook(hook)
        self._hooks.append(accumulator)

    def pieces(self, wl):
        """(param, flat start, flat end) this rank's optimizer owns, in buffer coordinates
        relative to the param's own start."""
        if not wl.dist_opt:
            return [(p, 0, p.numel()) for p in self.params]
        out = []
        for index, start, end in layout.shard_pieces(self.layout, wl.dp, 0):
            base = self.layout.param_ranges[index][0]
            out.append((self.params[index], start - base, end - base))
        return out


class MixedPrecisionOptimizer:
    """fp32 master params (+ Adam state) for this rank's params or shard."""

    def __init__(self, buffers, wl, device):
        self.buffers = buffers
        self.entries = []   # (bf16 param slice, fp32 master, main_grad slice)
        for buf in buffers:
            for param, lo, hi in buf.pieces(wl):
                model_slice = param.data.view(-1)[lo:hi]
                master = model_slice.detach().clone().float()
                self.entries.append((model_slice, master, param.main_grad.view(-1)[lo:hi]))
        self.adam, self.impl = _adam([m for _, m, _ in self.entries], device)

    def zero_grad(self):
        """Start of a step: zero the grad buffers, drop the master grads."""
        for buf in self.buffers:
            buf.grad_data.zero_()
        for _, master, _ in self.entries:
            master.grad = None

    def step(self):
        for _, master, grad in self.entries:
            master.grad = grad.float()
        norms = [torch.linalg.vector_norm(m.grad) for _, m, _ in self.entries]
        total_norm = torch.linalg.vector_norm(torch.stack(norms)).item()
        del norms
        self.adam.step()
        with torch.no_grad():
            for model_slice, master, _ in self.entries:
                model_slice.copy_(master)
        return total_norm
