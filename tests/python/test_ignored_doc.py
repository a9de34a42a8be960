"""docs/ignored-fields.md must hold the table `memtune job --list-ignored` prints, so the
documented classification of ignored inputs is the one the code applies."""
import os
import pathlib
import subprocess
import sys

root = pathlib.Path(os.environ.get("MEMTUNE_SOURCE_DIR", pathlib.Path(__file__).parents[2]))
binary = sys.argv[1]
table = subprocess.run([binary, "job", "--list-ignored"], capture_output=True, text=True,
                       check=True).stdout
doc = (root / "docs" / "ignored-fields.md").read_text()
if table not in doc:
    print("docs/ignored-fields.md is stale: paste the output of "
          "`memtune job --list-ignored` into it")
    sys.exit(1)
