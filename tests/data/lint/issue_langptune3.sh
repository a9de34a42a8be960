#!/bin/bash
# The allocator strings of ZhaolinGao/LangPTune#3 (2024-12-08), written as a shell export
# (the issue sets them from Python): `=` instead of `:`.
export PYTORCH_CUDA_ALLOC_CONF="expandable_segments=True"
python train.py --per_device_train_batch_size 1
