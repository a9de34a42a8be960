#!/bin/bash
# Sources env_only.sh (next to it): its exports reach the training command.
source env_only.sh
torchrun --nproc_per_node 8 pretrain_gpt.py \
  --num-layers 8 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 \
  --max-position-embeddings 2048 --micro-batch-size 1 --global-batch-size 8 --bf16 \
  --vocab-size 32000
