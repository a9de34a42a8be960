#!/bin/bash
# memtune test input: a Llama-3-8B-style fp8 run in the shape of Megatron-LM's
# examples/llama script, with the model's arguments in a sourced sibling file.
set -euo pipefail

export CUDA_DEVICE_MAX_CONNECTIONS=1
export NVTE_FWD_LAYERNORM_SM_MARGIN=16

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" &> /dev/null && pwd)"
source "${SCRIPT_DIR}/script_source_model.sh"

CHECKPOINT_PATH=${1:-"checkpoints/llama3_8b_fp8"}
TENSORBOARD_LOGS_PATH=${2:-"tensorboard_logs/llama3_8b_fp8"}
TOKENIZER_ARG=${3:-"MOCK"}
DATA_ARG=${4:-"MOCK"}

GPUS_PER_NODE=8
NUM_NODES=1
DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NUM_NODES
    --master_addr localhost
    --master_port 6000
)

TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size 128
    --train-samples 1953125000
    --lr 0.00015
    --lr-decay-style cosine
    --bf16
    --use-distributed-optimizer
    --overlap-grad-reduce
    --overlap-param-gather
)

DTYPE="fp8"
if [[ "$DTYPE" == "fp8" ]]; then
    DTYPE_ARGS=(--fp8-format hybrid --fp8-amax-history-len 1024 --fp8-amax-compute-algo max)
fi

DATA_ARGS_LIST=()
if [[ "$TOKENIZER_ARG" == "MOCK" ]] || [[ "$DATA_ARG" == "MOCK" ]]; then
    DATA_ARGS_LIST+=(
        --mock-data
        --tokenizer-type NullTokenizer
    )
fi

MODEL_PARALLEL_ARGS=(
    --tensor-model-parallel-size 1
    --context-parallel-size 2
    --sequence-parallel
)

EVAL_AND_LOGGING_ARGS=(
    --log-interval 1
    --save "$CHECKPOINT_PATH"
    --load "$CHECKPOINT_PATH"
    --tensorboard-dir "$TENSORBOARD_LOGS_PATH"
)

PRETRAIN_SCRIPT_PATH="pretrain_gpt.py"

torchrun ${DISTRIBUTED_ARGS[@]} \
    "$PRETRAIN_SCRIPT_PATH" \
    ${MODEL_ARGS[@]} \
    ${TRAINING_ARGS[@]} \
    ${DTYPE_ARGS[@]} \
    ${DATA_ARGS_LIST[@]} \
    ${MODEL_PARALLEL_ARGS[@]} \
    ${EVAL_AND_LOGGING_ARGS[@]} \
    "$@"
