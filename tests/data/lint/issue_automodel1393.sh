#!/bin/bash
# The fix suggested in NVIDIA-NeMo/Automodel#1393 (2026-02-26), as a command prefix.
PYTORCH_CUDA_ALLOC_CONF=expandable_segments=True torchrun --nproc_per_node 8 finetune.py --config llama.yaml
