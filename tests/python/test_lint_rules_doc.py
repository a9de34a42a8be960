"""docs/lint-rules.md must equal what `memtune lint --list-rules --format markdown` prints
(scripts/gen-lint-rules writes it)."""
import os
import pathlib
import subprocess
import sys

root = pathlib.Path(os.environ.get("MEMTUNE_SOURCE_DIR", pathlib.Path(__file__).parents[2]))
binary = sys.argv[1] if len(sys.argv) > 1 else str(root / "build/memtune")
result = subprocess.run([sys.executable, str(root / "scripts/gen-lint-rules"), binary, "--check"])
sys.exit(result.returncode)
