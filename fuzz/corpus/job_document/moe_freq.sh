torchrun pretrain_gpt.py --num-layers 8 --hidden-size 64 --num-attention-heads 4 --moe-layer-freq "([1]*3+[0])*2" --num-experts 4
