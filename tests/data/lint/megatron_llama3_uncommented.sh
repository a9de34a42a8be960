#!/bin/bash
# Facts of Megatron-LM's examples/llama/train_llama3_8b_h100_fp8.sh (NVIDIA/Megatron-LM
# d98e8a6): the CUDA_DEVICE_MAX_CONNECTIONS default, the NCCL and Transformer Engine
# variables with the unprefixed NCCL_AVOID_RECORD_STREAMS uncommented, as a user would, and the FP8 /
# distributed-optimizer flags. Model sizes and TP 2 are this test's choice.
export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-1}
# export NCCL_IB_TIMEOUT=19
# export NVTE_FWD_LAYERNORM_SM_MARGIN=16
# export NVTE_BWD_LAYERNORM_SM_MARGIN=16
# export NCCL_P2P_NET_CHUNKSIZE=2097152
export NCCL_AVOID_RECORD_STREAMS=1

TP_SIZE=2
MODEL_ARGS=(
    --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32
    --group-query-attention --num-query-groups 8 --seq-length 8192
    --max-position-embeddings 8192 --swiglu --vocab-size 128256
)
TRAINING_ARGS=(
    --micro-batch-size 1 --global-batch-size 128 --bf16
    --fp8-format hybrid --fp8-amax-history-len 1024 --fp8-param-gather
)
PARALLEL_ARGS=(
    --tensor-model-parallel-size $TP_SIZE --sequence-parallel
    --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather
)
torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py \
    ${MODEL_ARGS[@]} ${TRAINING_ARGS[@]} ${PARALLEL_ARGS[@]}
