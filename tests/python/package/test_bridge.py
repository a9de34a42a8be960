"""memtune.bridge.check on a duck-typed Megatron-Bridge ConfigContainer (Bridge's names)."""
import dataclasses
import enum

import pytest

import memtune
import memtune.bridge


def silu(x):  # stands in for torch.nn.functional.silu, a callable in the provider
    return x


class AttnBackend(enum.Enum):  # Bridge configs hold enums (e.g. attention_backend)
    auto = 5


@dataclasses.dataclass
class GPTModelProvider:  # field names as Bridge's model providers
    num_layers: int = 32
    hidden_size: int = 4096
    ffn_hidden_size: int = 14336
    num_attention_heads: int = 32
    num_query_groups: int = 8
    kv_channels: int = 128
    vocab_size: int = 128256
    gated_linear_unit: bool = True
    activation_func: object = silu
    normalization: str = "RMSNorm"
    add_bias_linear: bool = False
    share_embeddings_and_output_weights: bool = False
    seq_length: int = 8192
    tensor_model_parallel_size: int = 1
    pipeline_model_parallel_size: int = 1
    context_parallel_size: int = 1
    sequence_parallel: bool = False
    recompute_granularity: object = None
    attention_backend: AttnBackend = AttnBackend.auto
    lr_warmup_like_field_memtune_ignores: float = 0.1


@dataclasses.dataclass
class TrainingConfig:
    micro_batch_size: int = 1
    global_batch_size: int = 64
    train_iters: int = 1000


@dataclasses.dataclass
class OptimizerConfig:
    optimizer: str = "adam"
    lr: float = 3e-4
    use_distributed_optimizer: bool = True


@dataclasses.dataclass
class DistributedDataParallelConfig:
    use_distributed_optimizer: bool = True
    grad_reduce_in_fp32: bool = True


@dataclasses.dataclass
class DatasetConfig:
    seq_length: int = 8192


class ConfigContainer:
    """Like Bridge's: sections as attributes, to_dict() with a _target_ per dataclass."""

    def __init__(self, **sections):
        self.sections = sections

    def to_dict(self):
        def convert(value):
            if dataclasses.is_dataclass(value):
                out = {"_target_": f"megatron.bridge.{type(value).__name__}"}
                out.update({f.name: convert(getattr(value, f.name))
                            for f in dataclasses.fields(value)})
                return out
            return value
        return {name: convert(v) for name, v in self.sections.items()}


def bridge_config(**model):
    return ConfigContainer(model=GPTModelProvider(**model), train=TrainingConfig(),
                           optimizer=OptimizerConfig(), ddp=DistributedDataParallelConfig(),
                           dataset=DatasetConfig(), mixed_precision="bf16_mixed")


def test_check_assesses_a_config_container(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "8")
    result = memtune.bridge.check(bridge_config(tensor_model_parallel_size=2),
                                  gpu="h100-sxm-80gb", strict=True)
    assert result.verdict == "fits"
    assert result.check.errors == 0
    # The same document through memtune.assess gives the same numbers.
    doc = bridge_config(tensor_model_parallel_size=2).to_dict()
    doc["memtune"] = {"world_size": 8}
    assert memtune.assess(doc, gpu="h100-sxm-80gb").ranks == result.ranks


def test_num_microbatches_is_passed_on(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "8")
    cfg = bridge_config(pipeline_model_parallel_size=2)
    one = memtune.bridge.check(cfg, num_microbatches=1, gpu="h100-sxm-80gb")
    many = memtune.bridge.check(cfg, num_microbatches=8, gpu="h100-sxm-80gb")
    assert one.peak_bytes <= many.peak_bytes


def test_strict_raises_when_predicted_out_of_memory(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "8")
    cfg = bridge_config(num_layers=80, hidden_size=8192, ffn_hidden_size=28672,
                        num_attention_heads=64)
    cfg.sections["optimizer"].use_distributed_optimizer = False
    cfg.sections["ddp"].use_distributed_optimizer = False
    result = memtune.bridge.check(cfg, gpu="h100-sxm-80gb")  # not strict: returns
    assert result.verdict == "oom"
    with pytest.raises(memtune.bridge.PredictedOutOfMemory) as info:
        memtune.bridge.check(cfg, gpu="h100-sxm-80gb", strict=True)
    assert info.value.assessment.verdict == "oom"
    assert "out of GPU memory" in str(info.value)


def test_a_bad_field_raises_job_error_with_its_path(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "8")
    with pytest.raises(memtune.JobError) as info:
        memtune.bridge.check(bridge_config(tensor_model_parallel_size=3), gpu="h100-sxm-80gb")
    assert info.value.field.startswith(("model.", "memtune."))
    with pytest.raises(memtune.JobError) as info:
        memtune.bridge.check(bridge_config(normalization="BatchNorm"))
    assert info.value.field == "model.normalization"
