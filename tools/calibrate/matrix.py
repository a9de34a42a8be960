"""The calibration matrix. Widths follow Llama-3 8B (h 4096), a 5120-wide model, Llama-3 70B
(h 8192) and a 2048-wide model; every workload is one rank of the job its name describes.
The number of layers per model chunk is not listed: size_workload fits it to the GPU.
"""
from workloads import Workload

_H8K = dict(hidden=8192, ffn=28672, heads=64, groups=8)
_H5K = dict(hidden=5120, ffn=13824, heads=40, groups=8)
_H2K = dict(hidden=2048, ffn=8192, heads=16, groups=8)
_SEL = dict(recompute="selective", recompute_modules=("core_attn",))

WORKLOADS = (
    Workload("dense-h4k-s4k", "h4096 TP1 PP1, no recompute, fp32 grads, plain Adam state",
             snapshot=True),
    Workload("frag-varlen", "h4096 TP2 + SP, 6 micro-batches of varying length (1024..6144)",
             tp=2, sp=True, microbatches=6, seq=6144,
             seq_cycle=(4096, 1536, 6144, 2560, 1024, 3584, 5120), fill=0.55,
             snapshot=True, fragmenting=True, **_SEL,
             notes=("APPROX: sequence length varies per micro-batch (1024 to 6144 tokens, "
                    "cycling through 7 lengths); the job gives the longest, so its "
                    "activation prediction is an upper bound",)),
    Workload("frag-bigvocab-last", "PP2 last stage, vocab 256000, seq 8192, full recompute: "
             "GB-sized logits between small checkpoint inputs", tp=2, sp=True, pp=2,
             stage="last", microbatches=4, seq=8192, vocab=256000, recompute="full",
             recompute_method="uniform", recompute_num_layers=1, fill=0.55, snapshot=True,
             fragmenting=True),
    Workload("tp2-sp-s8k", "h4096 TP2 + SP, seq 8192", tp=2, sp=True, seq=8192),
    Workload("tp4-sp-h8k-sel", "h8192 TP4 + SP, selective core_attn recompute",
             tp=4, sp=True, **_H8K, **_SEL),
    Workload("tp4-sp-h8k-mlp", "h8192 TP4 + SP, selective mlp recompute", tp=4, sp=True,
             **_H8K, recompute="selective", recompute_modules=("mlp",)),
    Workload("tp8-sp-h8k-full", "h8192 TP8 + SP, seq 8192, full recompute (uniform, 1 layer)",
             tp=8, sp=True, seq=8192, **_H8K, recompute="full", recompute_method="uniform",
             recompute_num_layers=1),
    Workload("h5k-tp2-mb2", "h5120 TP2 + SP, micro-batch 2", tp=2, sp=True, mbs=2, **_H5K),
    Workload("tp4-sp-s16k-sel", "h4096 TP4 + SP, seq 16384, selective core_attn",
             tp=4, sp=True, seq=16384, **_SEL),
    Workload("h2k-mb8", "h2048 TP1, seq 2048, micro-batch 8", seq=2048, mbs=8, **_H2K),
    Workload("pp4-first-1f1b", "PP4 first stage, 1F1B with 8 micro-batches (4 in flight)",
             tp=2, sp=True, pp=4, stage="first", microbatches=8),
    Workload("pp4-last-1f1b", "PP4 last stage, 1F1B (1 in flight) plus output layer and loss",
             tp=2, sp=True, pp=4, stage="last", microbatches=8),
    Workload("pp4-vpp2-first", "PP4 VPP2 first stage, interleaved 1F1B (11 chunks in flight)",
             tp=2, sp=True, pp=4, vpp=2, stage="first", microbatches=8),
    Workload("distopt-dp8-h8k", "h8192 TP4 + SP, distributed optimizer over DP 8",
             tp=4, sp=True, dp=8, dist_opt=True, **_H8K, **_SEL),
    Workload("distopt-dp64-bf16grad", "h4096 TP1, distributed optimizer over DP 64, bf16 grads",
             dp=64, dist_opt=True, grad_fp32=False),
    Workload("pp8-vpp4-distopt-h8k",
             "h8192 TP8 + SP, PP8 VPP4 first stage (all 32 chunk passes in warm-up), "
             "distributed optimizer over DP 4", tp=8, sp=True, pp=8, vpp=4, stage="first",
             microbatches=8, dp=4, dist_opt=True, max_layers_per_chunk=12, **_H8K, **_SEL),
    Workload("pp2-full-block", "h4096 TP2 + SP, PP2 first stage, full recompute (block, 2 layers)",
             tp=2, sp=True, pp=2, stage="first", microbatches=4, recompute="full",
             recompute_method="block", recompute_num_layers=2),
)
