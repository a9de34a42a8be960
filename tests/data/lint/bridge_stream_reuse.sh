#!/bin/bash
# The allocator string of 60 Megatron-Bridge perf configs (llama/gb300, llama/b200,
# qwen/gb200, deepseek/gb300 at 067f987): the second key needs PyTorch 2.8 or later.
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,graph_capture_record_stream_reuse:True
export TORCH_NCCL_AVOID_RECORD_STREAMS=0
export NCCL_GRAPH_REGISTER=0
export CUDA_DEVICE_MAX_CONNECTIONS=32
torchrun --nproc_per_node 4 pretrain_gpt.py \
  --num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 \
  --max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 8 --bf16 \
  --vocab-size 32000
