"""Runs one workload in this process: builds the rank (model chunks, DDP buffers,
optimizer), runs training steps in Megatron's pipeline order and measures memory.

Pipeline behaviour reproduced (Megatron-LM @ d98e8a64 megatron/core/pipeline_parallel/
schedules.py): each stage output is pseudo-freed after its forward
(deallocate_output_tensor, Bridge's default deallocate_pipeline_outputs=True) and its
backward goes straight to the C++ engine (custom_backward); inputs received from the
previous stage are fresh tensors with requires_grad; the loss is divided by the number of
micro-batches. get_batch gives tokens and position ids to the first stage, labels and the
loss mask to the last.
"""
import time

import torch

import buffers
import memory
import model
import schedule
import workloads


def _run_backward(output, grad):
    """MCore custom_backward: the C++ engine, which does not check grad's shape."""
    torch.autograd.Variable._execution_engine.run_backward(
        tensors=(output,), grad_tensors=(grad,), keep_graph=False, create_graph=False,
        inputs=tuple(), allow_unreachable=True, accumulate_grad=True)


class Rank:
    """The model chunks, buffers and optimizer of one rank."""

    def __init__(self, wl, device):
        self.wl, self.device = wl, device
        self.chunks = [model.Chunk(wl, i, device, torch.bfloat16) for i in range(wl.chunks)]
        self.buffers = [buffers.ChunkBuffer(c, wl, device) for c in self.chunks]
        self.optimizer = buffers.MixedPrecisionOptimizer(self.buffers, wl, device)

    def _local_shape(self, seq):
        s_local = seq // self.wl.tp if self.wl.sp else seq
        return (s_local, self.wl.mbs, self.wl.hidden)

    def _forward(self, chunk, seq):
        wl, dev = self.wl, self.device
        position_ids = labels = loss_mask = None
        if chunk.embedding is not None:
            inputs = torch.randint(0, wl.vocab, (wl.mbs, seq), device=dev)
            position_ids = torch.arange(seq, device=dev).unsqueeze(0).repeat(wl.mbs, 1)
        else:
            inputs = torch.empty(self._local_shape(seq), dtype=torch.bfloat16, device=dev)
            inputs.normal_().requires_grad_()
        if chunk.head is not None:
            labels = torch.randint(0, wl.vocab, (wl.mbs, seq), device=dev)
            loss_mask = torch.ones(wl.mbs, seq, dtype=torch.float32, device=dev)
        output = chunk(inputs, labels, loss_mask)
        del position_ids, labels, loss_mask
        if chunk.head is not None:
            return inputs, output / wl.microbatches
        output.data = torch.empty((1,), device=dev, dtype=output.dtype)
        return inputs, output

    def _backward(self, chunk, output, seq):
        if chunk.head is not None:
            _run_backward(output, torch.ones_like(output))
            return
        grad = torch.empty(self._local_shape(seq), dtype=torch.bfloat16, device=self.device)
        _run_backward(output, grad.normal_(0.0, 1e-3))

    def train_step(self, iteration):
        """One optimizer step over all micro-batches; returns the loss-free grad norm."""
        wl = self.wl
        self.optimizer.zero_grad()
        live = {}
        for step in schedule.rank_steps(wl.pp, wl.pp_rank, wl.microbatches, wl.chunks):
            key = (step.microbatch, step.chunk)
            seq = wl.seq_of(iteration, step.microbatch)
            if step.kind == "F":
                live[key] = self._forward(self.chunks[step.chunk], seq)
            else:
                _, output = live.pop(key)
                self._backward(self.chunks[step.chunk], output, seq)
                del output
        assert not live, f"schedule left {len(live)} forwards without backward"
        return self.optimizer.step()


def run_workload(wl: workloads.Workload, device: torch.device, iterations: int,
                 deadline: float):
    """Builds and steps the rank; returns (Rank, per-iteration records, status)."""
    rank = Rank(wl, device)
    records, status = [], "ok"
    for iteration in range(iterations):
        start = time.time()
        grad_norm = rank.train_step(iteration)
        records.append(memory.iteration_record(device, time.time() - start, grad_norm))
        if time.time() > deadline and iteration + 1 < iterations:
            status = "partial"
            break
    return rank, records, status
