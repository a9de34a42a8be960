#!/bin/bash
# The environment of Megatron-Bridge's perf recipe perf_recipes/llama/h100/llama3.py:55-66
# (NVIDIA-NeMo/Megatron-Bridge 067f987), as exports, and a run with Bridge dotted overrides.
export CUDA_DEVICE_MAX_CONNECTIONS=1
export NCCL_GRAPH_REGISTER=0
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
export TORCH_NCCL_AVOID_RECORD_STREAMS=1
export NCCL_NVLS_ENABLE=0
export NVTE_FWD_LAYERNORM_SM_MARGIN=20
export NVTE_BWD_LAYERNORM_SM_MARGIN=20
export TORCH_NCCL_HIGH_PRIORITY=1
torchrun --nproc_per_node 8 scripts/training/run_recipe.py --recipe llama3_8b_pretrain_8gpu_h100_bf16_config \
  model.tensor_model_parallel_size=4 model.pipeline_model_parallel_size=1 \
  ddp.nccl_ub=true
