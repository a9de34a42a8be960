#!/usr/bin/env python3
"""Lists the fields of Megatron-Bridge's ConfigContainer sections, without importing Bridge.

Usage: tools/extract-bridge-fields.py BRIDGE_GIT_DIR MEGATRON_LM_GIT_DIR > tests/data/bridge_fields.txt

Reads src/megatron/bridge/training/config.py at HEAD with `git show`. For the sections memtune
reads (model as GPTModelProvider, train, optimizer, ddp, mixed_precision, peft as LoRA,
dataset as GPTDatasetConfig) it prints `section.field` for every dataclass field of the
section's class and its bases (Megatron-Core and megatron.training bases are read from the
Megatron-LM checkout at its HEAD); for every other ConfigContainer section it prints the
section name (memtune ignores those sections whole). One name a line, sorted.
"""
import ast
import subprocess
import sys

SECTIONS = {"model": "GPTModelProvider", "train": "TrainingConfig",
            "optimizer": "OptimizerConfig", "ddp": "DistributedDataParallelConfig",
            "mixed_precision": "MixedPrecisionConfig", "peft": "LoRA",
            "dataset": "GPTDatasetConfig"}
CONFIG = "src/megatron/bridge/training/config.py"


def git(repo, *args):
    return subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True).stdout


def find_class(repo, name, under):
    hits = git(repo, "grep", "-l", f"^class {name}\\b", "HEAD", "--", f"{under}*.py").split()
    return hits[0].split(":", 1)[1] if hits else None


class Reader:
    def __init__(self, bridge, mlm):
        self.repos = {"bridge": (bridge, "src/"), "mlm": (mlm, "megatron/")}

    def parse(self, where, path):
        return ast.parse(git(self.repos[where][0], "show", f"HEAD:{path}"))

    def locate(self, where, path, name):
        """(where, path, class name) of `name` as seen from the module at path."""
        tree = self.parse(where, path)
        if any(isinstance(n, ast.ClassDef) and n.name == name for n in tree.body):
            return where, path, name
        for node in (n for n in tree.body if isinstance(n, ast.ImportFrom)):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    target = "bridge" if node.module.startswith("megatron.bridge") else "mlm"
                    repo, under = self.repos[target]
                    found = find_class(repo, alias.name, under)
                    return (target, found, alias.name) if found else None
        return None

    def fields(self, where, path, name, seen=None):
        seen = seen if seen is not None else set()
        if (where, path, name) in seen:
            return set()
        seen.add((where, path, name))
        tree = self.parse(where, path)
        cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)
        out = set()
        for base in cls.bases:
            base = base.value if isinstance(base, ast.Subscript) else base
            if isinstance(base, ast.Name):
                found = self.locate(where, path, base.id)
                if found:
                    out |= self.fields(*found, seen)
        for stmt in cls.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                ann = ast.unparse(stmt.annotation)
                init_false = isinstance(stmt.value, ast.Call) and any(
                    k.arg == "init" and isinstance(k.value, ast.Constant) and k.value.value is False
                    for k in stmt.value.keywords)
                if "ClassVar" not in ann and not init_false:
                    out.add(stmt.target.id)
        return out


def main():
    reader = Reader(sys.argv[1], sys.argv[2])
    tree = reader.parse("bridge", CONFIG)
    container = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ConfigContainer")
    names = set()
    for stmt in container.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        section = stmt.target.id
        if section.startswith("_"):
            continue
        if section not in SECTIONS:
            names.add(section)
            continue
        name = SECTIONS[section]
        found = reader.locate("bridge", CONFIG, name) or (
            "bridge", find_class(reader.repos["bridge"][0], name, "src/"), name)
        names |= {f"{section}.{f}" for f in reader.fields(*found) if not f.startswith("_")}
    print("\n".join(sorted(names)))


if __name__ == "__main__":
    main()
