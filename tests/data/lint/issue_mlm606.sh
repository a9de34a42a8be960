#!/bin/bash
# The launch environment and shapes posted in NVIDIA/Megatron-LM#606 (2023-11-26):
# LLaMA-2-7B (hidden 4096, ffn 11008, 32 layers, 32 heads), TP 1, PP 1, 8 GPUs, seq 64,
# MBS 1, GBS 8, on A100 40 GB; no distributed optimizer.
export PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:32
export CUDA_DEVICE_MAX_CONNECTIONS=1
export CUDA_LAUNCH_BLOCKING=1
export NCCL_ASYNC_ERROR_HANDLING=1
export OMP_NUM_THREADS=20
torchrun --nproc_per_node 8 pretrain_gpt.py \
    --tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 \
    --num-layers 32 --hidden-size 4096 --ffn-hidden-size 11008 --num-attention-heads 32 \
    --seq-length 64 --max-position-embeddings 4096 --micro-batch-size 1 \
    --global-batch-size 8 --bf16 --swiglu --vocab-size 32000
