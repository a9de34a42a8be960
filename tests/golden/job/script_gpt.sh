#!/bin/bash
# memtune test input: a small GPT run written in the shape of Megatron-LM's
# examples/gpt3 launch script (arrays, ${VAR:-default}, $((...)), export).

export CUDA_DEVICE_MAX_CONNECTIONS=1

GPUS_PER_NODE=${GPUS_PER_NODE:-8}
# Change for multinode config
MASTER_ADDR=${MASTER_ADDR:-localhost}
MASTER_PORT=6000
NUM_NODES=${NUM_NODES:-2}
NODE_RANK=0
WORLD_SIZE=$(($GPUS_PER_NODE*$NUM_NODES))

CHECKPOINT_PATH=${1:-/tmp/checkpoints/gpt}
TENSORBOARD_LOGS_PATH=${2:-/tmp/tensorboard}
DATA_PATH=${3:-/data/gpt_text_document}

HIDDEN=1024
HEADS=$((HIDDEN / 64))

DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NUM_NODES
    --master_addr $MASTER_ADDR
    --master_port $MASTER_PORT
)

GPT_MODEL_ARGS=(
    --num-layers 8
    --hidden-size $HIDDEN
    --num-attention-heads $HEADS
    --ffn-hidden-size $((4 * HIDDEN))
    --seq-length 2048
    --max-position-embeddings 2048
    --vocab-size 51200
)

TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size $(( WORLD_SIZE * 4 ))
    --train-iters 500000
    --weight-decay 0.1
    --clip-grad 1.0
    --bf16
    --lr 6.0e-5
)

MODEL_PARALLEL_ARGS=(
	--tensor-model-parallel-size 2
	--pipeline-model-parallel-size 2
)
MODEL_PARALLEL_ARGS+=(--sequence-parallel)

DATA_ARGS=(
    --data-path $DATA_PATH
    --split 949,50,1
)

EVAL_AND_LOGGING_ARGS=(
    --log-interval 100
    --save $CHECKPOINT_PATH
    --load $CHECKPOINT_PATH
    --tensorboard-dir "$TENSORBOARD_LOGS_PATH"
)

torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py \
    ${GPT_MODEL_ARGS[@]} \
    ${TRAINING_ARGS[@]} \
    ${MODEL_PARALLEL_ARGS[@]} \
    ${DATA_ARGS[@]} \
    ${EVAL_AND_LOGGING_ARGS[@]}
