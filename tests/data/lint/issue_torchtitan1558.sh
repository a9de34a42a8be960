#!/bin/bash
# pytorch/torchtitan#1558 (2025-08-12): the user's PYTORCH_CUDA_ALLOC_CONF prefix, and the
# PYTORCH_ALLOC_CONF prefix run_train.sh adds since PR#1577: the same string in both.
export PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True"
PYTORCH_ALLOC_CONF="expandable_segments:True" torchrun --nproc_per_node=8 -m torchtitan.train \
  --job.config_file ./deepseek_v3_671b.toml --training.local_batch_size=1 \
  --parallelism.data_parallel_shard_degree=-1 --parallelism.tensor_parallel_degree=8
