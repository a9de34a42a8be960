# An environment file a launch script sources: no training command of its own.
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,max_split_size_mb:256
export NCCL_AVOID_RECORD_STREAMS=1
