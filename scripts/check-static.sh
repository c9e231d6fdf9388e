#!/usr/bin/env bash
# Static checks, run by .ci/run before the tests: ruff (lint everywhere, format on the control side), mypy on
# gpudiag/, vulture (dead names) on both sides, and probes/ under the oldest Python it supports (3.9): ruff's 3.9 grammar, then every probe module
# imported by a real 3.9 interpreter when one is installed (pyenv's or python3.9 on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
"$PY" -m ruff check .
"$PY" -m ruff format --check .
"$PY" -m ruff check --target-version py39 probes
"$PY" -m mypy
# Dead names: vulture over both sides, with the names only frameworks and child protocols call whitelisted.
"$PY" -m vulture gpudiag probes scripts/vulture_whitelist.py --min-confidence 60
py39=""
for candidate in "$(pyenv root 2>/dev/null || echo /nonexistent)"/versions/3.9*/bin/python3 python3.9; do
  if "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 9))' >/dev/null 2>&1; then
    py39=$candidate
    break
  fi
done
if [ -n "$py39" ]; then
  "$py39" -I -c '
import importlib, pathlib, sys
sys.path.insert(0, ".")
names = sorted(".".join(p.with_suffix("").parts) for p in pathlib.Path("probes").rglob("*.py"))
for name in names:
    importlib.import_module(name.removesuffix(".__init__"))
print("check-static: %d probe modules import under Python %s" % (len(names), sys.version.split()[0]))'
else
  echo "check-static: no Python 3.9 here; probes/ checked with ruff's 3.9 grammar only"
fi
