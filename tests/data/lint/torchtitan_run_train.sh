#!/usr/bin/bash
# Facts of torchtitan's run_train.sh (pytorch/torchtitan b5bcd76, line 43): defaults for
# NGPU, LOG_RANK and the config file, and the allocator variable as a prefix of torchrun,
# under its new name only (PYTORCH_ALLOC_CONF, since PR#1577).
set -ex
NGPU=${NGPU:-"8"}
export LOG_RANK=${LOG_RANK:-0}
CONFIG_FILE=${CONFIG_FILE:-"./torchtitan/models/llama3/train_configs/debug_model.toml"}
TRAIN_FILE=${TRAIN_FILE:-"torchtitan.train"}
COMM_MODE=${COMM_MODE:-""}

PYTORCH_ALLOC_CONF="expandable_segments:True" \
torchrun --nproc_per_node=${NGPU} --rdzv_backend c10d --rdzv_endpoint="localhost:0" \
--local-ranks-filter ${LOG_RANK} --role rank --tee 3 \
-m ${TRAIN_FILE} --job.config_file ${CONFIG_FILE} "$@"
