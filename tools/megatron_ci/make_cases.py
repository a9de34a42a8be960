#!/usr/bin/env python3
"""Turn Megatron-LM's functional-test golden values into memtune validation cases.

Megatron-LM's CI trains small and mid-size models on DGX-A100, DGX-H100 and GB200 nodes and
records, per step, `mem-max-allocated-bytes` (torch.cuda.max_memory_allocated) in
golden_values_<environment>_<platform>.json next to the exact launch arguments
(model_config.yaml); the recipes (tests/test_utils/recipes/) give each run's nodes and GPUs. The values come from the TensorBoard writer,
which exists only on the last global rank (megatron/training/global_vars.py), so each case is
`rank: last`. The counter is never reset, so the largest value over the logged steps is the
run's peak.

Usage:
  tools/megatron_ci/make_cases.py MEGATRON_GIT_DIR MEMTUNE_BINARY [PLATFORM] > cases.jsonl

PLATFORM is dgx_h100 (default), dgx_a100 or dgx_gb200 (the dev environment's goldens).

MEGATRON_GIT_DIR is a git directory of NVIDIA/Megatron-LM (bare is fine); the files are read at
its HEAD. Cases are written for the training tests of the `gpt`, `moe` and `mixtral` families whose golden
file for the platform has memory values; inference, RL and non-GPT tests are left out and
counted on stderr. The job of each case is what `memtune job --megatron-args` makes of the
arguments (the recipe's world size, the platform's GPU, and the ENV_VARS that change memory);
the arguments themselves are kept in `assumptions`.
"""
import json
import shlex
import subprocess
import sys

import yaml

FAMILIES = ("gpt", "moe", "mixtral")
# CI platform -> (memtune catalog GPU, recipe folder). dgx_a100 runs come from the h100
# recipes, whose products list both platforms.
PLATFORMS = {"dgx_h100": ("h100-sxm-80gb", "h100"), "dgx_a100": ("a100-80gb", "h100"),
             "dgx_gb200": ("gb200", "gb200")}
# A golden file whose test no recipe lists any more (it ran before the recipe changed): every
# training recipe for h100/a100 is one 8-GPU node; gb200 recipes use 4 or 8, so no fallback.
FALLBACK_WORLD = {"h100": 8}
# The launch environment that changes memory (allocator config, cuBLAS workspace size).
MEMORY_ENV = ("PYTORCH_CUDA_ALLOC_CONF", "CUBLAS_WORKSPACE_CONFIG")
NOT_TRAINING = ("--inference-", "--perform-rl-step", "--grpo-", "--rl-", "--langrl-")


def git(gitdir, *args):
    return subprocess.run(["git", "--git-dir", gitdir, *args], check=True,
                          capture_output=True, text=True).stdout


def flags_of(model_args):
    out = []
    for key, value in model_args.items():
        if value is True:
            out.append(key)
        elif value is False or value is None:
            continue
        elif isinstance(value, str) and value.startswith("[") and value.endswith("]"):
            out += [key, *value[1:-1].split()]  # "[a b]": the launcher passes a list flag's words
        else:
            out += [key, str(value)]
    return out


def world_sizes(gitdir, folder, platform):
    """(test_case) -> nodes x gpus, from the recipes that run it on `platform`."""
    out = {}
    files = git(gitdir, "ls-tree", "--name-only", "HEAD",
                f"tests/test_utils/recipes/{folder}/").split()
    for path in files:
        recipe = yaml.safe_load(git(gitdir, "show", f"HEAD:{path}"))
        spec = recipe.get("spec") or {}
        world = int(spec.get("nodes", 1)) * int(spec.get("gpus", 8))
        default_platforms = spec.get("platforms")
        for product in recipe.get("products") or []:
            platforms = set()
            for variant in product.get("products") or [{}]:
                p = variant.get("platforms", default_platforms)
                platforms |= set(p if isinstance(p, list) else [p])
            if platform in platforms:
                for case in product.get("test_case") or []:
                    out[case] = world
    return out


def peak_of(golden):
    series = golden.get("mem-max-allocated-bytes")
    series = series.get("values", {}) if isinstance(series, dict) else {}
    values = [float(v) for v in series.values() if isinstance(v, (int, float)) or
              (isinstance(v, str) and v.replace(".", "", 1).isdigit())]
    return (max(values), series) if values else (None, series)


def main():
    gitdir, memtune = sys.argv[1], sys.argv[2]
    platform = sys.argv[3] if len(sys.argv) > 3 else "dgx_h100"
    gpu, folder = PLATFORMS[platform]
    platform_file = f"golden_values_dev_{platform}.json"
    worlds = world_sizes(gitdir, folder, platform)
    head = git(gitdir, "rev-parse", "HEAD").strip()
    files = git(gitdir, "ls-tree", "-r", "--name-only", "HEAD",
                "tests/functional_tests/test_cases").split("\n")
    skipped = {}
    for path in sorted(f for f in files if f.endswith("/" + platform_file)):
        parts = path.split("/")
        family, test = parts[3], parts[4]
        case_dir = "/".join(parts[:-1])
        def skip(why):
            skipped[why] = skipped.get(why, 0) + 1
        if family not in FAMILIES:
            skip("family " + family)
            continue
        golden = json.loads(git(gitdir, "show", f"HEAD:{path}"))
        peak, series = peak_of(golden)
        if peak is None:
            skip("no memory values")
            continue
        config_text = git(gitdir, "show", f"HEAD:{case_dir}/model_config.yaml")
        if config_text.count("--tensor-model-parallel-size:") > 1:
            skip("several runs in one test")  # e.g. gpt3_mcore_reruns_resume_check_grads
            continue
        config = yaml.safe_load(config_text)
        if config.get("TEST_TYPE") == "release":
            skip("release test: its node count is not in the recipes")
            continue
        model_args = config.get("MODEL_ARGS") or {}
        if any(k.startswith(NOT_TRAINING) for k in model_args):
            skip("not a training run")
            continue
        world = worlds.get(test, FALLBACK_WORLD.get(folder))
        if world is None:
            skip(f"no {folder} recipe runs it on {platform}")
            continue
        flags = flags_of(model_args)
        command = "pretrain_gpt.py " + " ".join(shlex.quote(f) for f in flags)
        env = {k: str(v) for k, v in (config.get("ENV_VARS") or {}).items() if k in MEMORY_ENV}
        sets = []
        for key, value in sorted(env.items()):
            sets += ["--set", f"memtune.env.{key}={json.dumps(value)}"]
        made = subprocess.run([memtune, "job", "--megatron-args", command, "--world-size",
                               str(world), "--gpu", gpu, "--format", "json",
                               *sets], capture_output=True, text=True)
        if made.returncode != 0:
            skip("memtune job refused the arguments")
            print(f"{test}: {made.stderr.strip()}", file=sys.stderr)
            continue
        job = json.loads(made.stdout)["job"]
        steps = sorted(series, key=int)
        first = series[steps[0]]
        case = {
            "id": f"mlm-ci-{family}-{test}" + ("" if platform == "dgx_h100" else f"-{platform[4:]}"),
            "source": (f"NVIDIA/Megatron-LM {case_dir}/{platform_file} at {head[:10]} "
                       f"(https://github.com/NVIDIA/Megatron-LM/blob/{head}/{path})"),
            "job": job,
            "measured": {"metric": "max_allocated", "bytes": int(peak), "rank": "last"},
            "assumptions": [
                "mem-max-allocated-bytes from the TensorBoard writer, which only the last global "
                "rank has; largest value over the logged steps (the counter is never reset)",
                f"steps logged: {steps[0]}..{steps[-1]}; step {steps[0]} (first iteration, before "
                f"the optimizer state exists) read {int(float(first))} bytes",
                f"{platform}: {world} GPUs (tests/test_utils/recipes/{folder}), memtune GPU {gpu}",
                "launch arguments (model_config.yaml MODEL_ARGS): " + command,
                "launch environment kept (model_config.yaml ENV_VARS): " + (
                    ", ".join(f"{k}={v}" for k, v in sorted(env.items())) or "none"),
            ],
            "quality": "high",
        }
        print(json.dumps(case))
    for why, n in sorted(skipped.items()):
        print(f"skipped {n}: {why}", file=sys.stderr)


if __name__ == "__main__":
    main()
