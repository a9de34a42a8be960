#!/bin/bash
# The allocator string a maintainer suggested in meta-pytorch/torchtune#1185 (2024-07-16,
# the excerpt is truncated after these keys), as a shell export: spaces after the commas and
# roundup_bypass_threshold_mb, which only PyTorch 1.13-2.0 knew.
export PYTORCH_CUDA_ALLOC_CONF="backend:native, max_split_size_mb:1024, roundup_power2_divisions:8, roundup_bypass_threshold_mb:256"
tune run full_finetune_single_device --config llama3/8B_full_single_device
