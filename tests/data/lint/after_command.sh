#!/bin/bash
# The allocator variable is exported after the training command: torchrun never sees it.
GPUS_PER_NODE=8
torchrun --nproc_per_node $GPUS_PER_NODE pretrain_gpt.py \
  --num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 \
  --max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 8 --bf16 \
  --vocab-size 32000
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
