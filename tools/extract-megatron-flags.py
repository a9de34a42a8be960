#!/usr/bin/env python3
"""Lists every --flag Megatron-LM's argument parser defines, without importing Megatron.

Usage: tools/extract-megatron-flags.py MEGATRON_LM_GIT_DIR [COMMIT] > tests/data/megatron_flags.txt

Reads megatron/training/arguments.py at COMMIT (default HEAD) with `git show`: the literal
flags of every add_argument call, plus the flags ArgumentGroupFactory derives from a config
dataclass (megatron/training/argument_utils.py: `--field-name`; a bool whose default is not
False becomes `--no-field-name` and `--disable-field-name`; argparse_meta["arg_names"] wins;
fields in `exclude` or with init=False are skipped). Prints one flag a line, sorted.
"""
import ast
import subprocess
import sys


def git_show(repo, commit, path):
    return subprocess.run(["git", "-C", repo, "show", f"{commit}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def class_file(repo, commit, name):
    out = subprocess.run(["git", "-C", repo, "grep", "-l", f"^class {name}\\b", commit, "--",
                          "megatron/*.py"], capture_output=True, text=True).stdout.split()
    return out[0].split(":", 1)[1] if out else None


def literal_flags(call):
    return [a.value for a in call.args
            if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("--")]


def keyword(call, name):
    return next((k.value for k in call.keywords if k.arg == name), None)


def field_flags(stmt):
    """The flags one dataclass field (an AnnAssign) produces, or [] when it has none."""
    name = stmt.target.id
    ann = ast.unparse(stmt.annotation)
    if "ClassVar" in ann or "InitVar" in ann:
        return []
    default = stmt.value
    meta_names = None
    if isinstance(default, ast.Call) and ast.unparse(default.func).endswith("field"):
        init = keyword(default, "init")
        if isinstance(init, ast.Constant) and init.value is False:
            return []
        meta = keyword(default, "metadata")
        if isinstance(meta, ast.Dict):
            for k, v in zip(meta.keys, meta.values):
                if isinstance(k, ast.Constant) and k.value == "argparse_meta" and isinstance(v, ast.Dict):
                    for mk, mv in zip(v.keys, v.values):
                        if isinstance(mk, ast.Constant) and mk.value == "arg_names":
                            meta_names = [e.value for e in mv.elts]
        default = keyword(default, "default")
    if meta_names:
        return meta_names
    flag = name.replace("_", "-")
    is_bool = ann in ("bool", "Optional[bool]", "bool | None", "typing.Optional[bool]")
    default_false = isinstance(default, ast.Constant) and default.value is False
    if is_bool and not default_false:
        return [f"--no-{flag}", f"--disable-{flag}"]
    return [f"--{flag}"]


def dataclass_flags(repo, commit, name, exclude, seen=None):
    seen = seen if seen is not None else set()
    path = class_file(repo, commit, name)
    if path is None or name in seen:
        return {}
    seen.add(name)
    tree = ast.parse(git_show(repo, commit, path))
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == name)
    fields = {}
    for base in cls.bases:  # dataclass fields of the bases come first; the class overrides
        if isinstance(base, ast.Name):
            fields.update(dataclass_flags(repo, commit, base.id, set(), seen))
    for stmt in cls.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            fields[stmt.target.id] = field_flags(stmt)
    return {k: v for k, v in fields.items() if k not in exclude}


def list_value(node, scope):
    if isinstance(node, ast.Name):
        name = node.id
        for stmt in ast.walk(scope):
            if isinstance(stmt, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
                node = stmt.value
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return {e.value for e in node.elts if isinstance(e, ast.Constant)}
    return set()


def main():
    repo = sys.argv[1]
    commit = sys.argv[2] if len(sys.argv) > 2 else "HEAD"
    tree = ast.parse(git_show(repo, commit, "megatron/training/arguments.py"))
    flags = set()
    for func in (n for n in tree.body if isinstance(n, ast.FunctionDef)):
        if not func.name.startswith("_add_"):
            continue
        for call in (n for n in ast.walk(func) if isinstance(n, ast.Call)):
            callee = ast.unparse(call.func)
            if callee.endswith("add_argument"):
                flags.update(literal_flags(call))
            elif callee == "ArgumentGroupFactory":
                exclude = list_value(keyword(call, "exclude"), func) if keyword(call, "exclude") else set()
                cls = call.args[0].id
                for names in dataclass_flags(repo, commit, cls, exclude).values():
                    flags.update(names)
    print("\n".join(sorted(flags)))


if __name__ == "__main__":
    main()
