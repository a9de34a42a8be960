#!/bin/bash
# memtune test input: a launch script that needs values from its caller: $NUM_LAYERS
# from the environment, the data path as its first argument, and a $(...) substitution.

GPUS_PER_NODE=8
DATA_PATH=$1
STAMP=$(date +%s)

MODEL_ARGS=(
    --num-layers $NUM_LAYERS
    --hidden-size 2048
    --num-attention-heads 16
    --seq-length ${SEQ_LENGTH:-4096}
    --max-position-embeddings 4096
    --vocab-size 32000
)

torchrun --nproc_per_node $GPUS_PER_NODE pretrain_gpt.py \
    "${MODEL_ARGS[@]}" \
    --micro-batch-size 1 --global-batch-size 64 --bf16 \
    --data-path "$DATA_PATH" \
    --tensorboard-dir "runs/$STAMP"
