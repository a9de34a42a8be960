#!/bin/bash
export PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True
torchrun pretrain_gpt.py --num-layers 2
