#!/bin/bash
# The launch line of tatsu-lab/stanford_alpaca#223 (2023-04-17): Hugging Face Trainer flags,
# not Megatron's, so lint cannot build a job from them.
torchrun --nproc_per_node=5 --master_port=29500 train.py --fp16 True \
  --per_device_train_batch_size 1 --gradient_accumulation_steps 8 \
  --fsdp "full_shard auto_wrap"
