#!/bin/bash
# memtune test input: a Llama-3-style run submitted through an sbatch heredoc, in the
# shape of Megatron-LM's examples/llama scripts (memtune never runs any of it).
set -euo pipefail

SEQ_LENGTH=${SEQ_LENGTH:-4096}
DTYPE=${DTYPE:-"bf16"}

sbatch <<EOF
#!/bin/bash
#SBATCH --job-name=llama3-small
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --time=01:00:00

export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
export NCCL_NVLS_ENABLE=0

MODEL_ARGS=(
    --use-mcore-models
    --num-layers 4
    --hidden-size 1024
    --ffn-hidden-size 3584
    --num-attention-heads 16
    --group-query-attention
    --num-query-groups 4
    --kv-channels 64
    --seq-length ${SEQ_LENGTH}
    --max-position-embeddings ${SEQ_LENGTH}
    --position-embedding-type rope
    --normalization RMSNorm
    --swiglu
    --untie-embeddings-and-output-weights
    --disable-bias-linear
    --vocab-size 128256
)

TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size 32
    --lr 1.0e-4
    --train-iters 100
)
if [[ "${DTYPE}" == "fp8" ]]; then
    DTYPE_ARGS=(--fp8-format hybrid --fp8-amax-history-len 1024)
else
    DTYPE_ARGS=(--bf16)
fi

PARALLEL_ARGS=(
    --tensor-model-parallel-size 2
    --context-parallel-size 1
    --sequence-parallel
    --use-distributed-optimizer
)

srun torchrun \
    --nproc_per_node \$SLURM_GPUS_PER_NODE \
    --nnodes \$SLURM_NNODES \
    --rdzv_backend c10d \
    --rdzv_endpoint \$(hostname):29500 \
    pretrain_gpt.py \
    "\${MODEL_ARGS[@]}" \
    "\${TRAINING_ARGS[@]}" \
    "\${DTYPE_ARGS[@]}" \
    "\${PARALLEL_ARGS[@]}" \
    --mock-data 2>&1 | tee train.log

EOF
