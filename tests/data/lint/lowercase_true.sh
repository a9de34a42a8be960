#!/bin/bash
export CUDA_DEVICE_MAX_CONNECTIONS=1
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:true
torchrun --nproc_per_node 8 pretrain_gpt.py \
  --num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 \
  --max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 8 --bf16 \
  --vocab-size 32000
