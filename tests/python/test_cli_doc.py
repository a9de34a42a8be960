"""docs/cli.md must equal what scripts/gen-cli-doc renders from the golden --help files."""
import os
import pathlib
import subprocess
import sys

root = pathlib.Path(os.environ.get("MEMTUNE_SOURCE_DIR", pathlib.Path(__file__).parents[2]))
result = subprocess.run([sys.executable, str(root / "scripts/gen-cli-doc"), "--check"])
sys.exit(result.returncode)
