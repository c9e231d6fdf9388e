#!/usr/bin/env bash
# Installs what the tests need on a fresh machine, then runs the whole suite.
# GPU tests (marked `gpu`) skip themselves without CUDA; scripts/gpu-check.sh runs them on a GPU host.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v sshd >/dev/null 2>&1 && [ ! -x /usr/sbin/sshd ] || ! command -v pdsh >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq openssh-server openssh-client pdsh >/dev/null
fi
PY=${PYTHON:-python3}
# torch first, pinned: the CPU wheel; an open range would pull a multi-GB CUDA build.
$PY -m pip install -q --disable-pip-version-check torch==2.13.0
$PY -m pip install -q --disable-pip-version-check -e '.[test,plots]'   # plots: the chart tests draw for real
# Engines the ingest tests drive for real (test-only, never runtime dependencies).
$PY -m pip install -q --disable-pip-version-check ansible-core
$PY scripts/install-ansible-posix.py   # the json stdout callback, without the full `ansible` package
exec $PY -m pytest -q -p no:cacheprovider "$@"
