#!/bin/bash
# A Bridge run with an override YAML and a dotted override on the command line.
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
torchrun --nproc_per_node 8 scripts/training/run_recipe.py \
  --config-file bridge_override.yaml \
  model.tensor_model_parallel_size=2
