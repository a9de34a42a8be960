#!/bin/bash
# The misspelled key llm-foundry shipped before mosaicml/llm-foundry#1088 (2024-04-04).
export PYTORCH_CUDA_ALLOC_CONF=expandeable_segments:True
composer train/train.py train/yamls/pretrain/mpt-125m.yaml
