#!/usr/bin/env bash
# Installs what the tests need on a fresh machine, then runs the whole suite (arguments go to pytest).
# Works inside a venv (everything goes into it) and outside one (into $PYTHON's environment).
# GPU tests (marked `gpu`) skip themselves without CUDA; scripts/gpu-check.sh runs them on a GPU host.
#
# System changes, all undone or documented here:
#  - apt packages openssh-server, openssh-client, pdsh, zsh, tcsh, fish (when one is missing; needs root);
#  - apt packages slurm-wlm and munge (when missing, as root); nothing of theirs is configured system-wide
#    (on a systemd machine Debian's own munge service may start);
#  - the login-shell tests create one user per shell and remove them when they end;
#  - the integration fixture creates the system user `gdnoisy` (a login whose .bashrc prints a banner, to
#    prove framing survives it). This script removes it again when it did not exist before the run;
#    GPUDIAG_KEEP_TEST_USER=1 keeps it.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
PIP=("$PY" -m pip install -q --disable-pip-version-check)

# apt-get that waits for another apt or dpkg (unattended-upgrades, a parallel job) instead of failing.
apt_get() {
  local err waited=0
  err=$(mktemp)
  until apt-get -o DPkg::Lock::Timeout=60 "$@" 2>"$err"; do
    if ! grep -q "Could not get lock\|Unable to acquire\|is another process using it" "$err" \
        || [ "$waited" -ge 900 ]; then
      cat "$err" >&2; rm -f "$err"; return 1
    fi
    echo "test.sh: apt is busy (another apt/dpkg holds its lock); waiting" >&2
    sleep 15; waited=$((waited + 15))
  done
  rm -f "$err"
}

# sshd and pdsh for the loopback fleet; zsh, tcsh and fish so the login-shell tests run against real shells.
missing=0
{ command -v sshd || [ -x /usr/sbin/sshd ]; } >/dev/null 2>&1 || missing=1
for tool in pdsh zsh tcsh fish; do command -v "$tool" >/dev/null 2>&1 || missing=1; done
if [ "$missing" = 1 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt_get update -qq
  apt_get install -y -qq openssh-server openssh-client pdsh zsh tcsh fish >/dev/null
fi

# torch: the tests need the CPU build of 2.13.0; an installed 2.13.0 is kept. Otherwise PyTorch's CPU wheel
# index is asked first where it is reachable, else pip's configured sources for the CPU build by its local
# version (`torch==2.13.0+cpu`: these machines keep that wheel in a local find-links directory). A plain
# `torch==2.13.0` is never asked of them: on PyPI that is the CUDA build, several GB of NVIDIA libraries the
# tests never use. Without either source the script stops with one line saying how to get the CPU build.
# The line printed says which build was installed, from where, and why.
TORCH_CPU_INDEX=https://download.pytorch.org/whl/cpu
install_torch() {
  local why err
  if "$PY" -c 'import sys, torch; sys.exit(torch.__version__.split("+")[0] != "2.13.0")' 2>/dev/null; then
    why="already installed"
  else
    if ! "$PY" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + "/torch/", timeout=15)' \
        "$TORCH_CPU_INDEX" 2>/dev/null; then
      why="$TORCH_CPU_INDEX is not reachable from here"
    elif "${PIP[@]}" --index-url "$TORCH_CPU_INDEX" torch==2.13.0; then
      why=""
    else
      why="installing from $TORCH_CPU_INDEX failed"
    fi
    if [ -z "$why" ]; then
      why="from PyTorch's CPU wheel index $TORCH_CPU_INDEX"
    else
      err=$(mktemp)
      if ! "${PIP[@]}" "torch==2.13.0+cpu" 2>"$err"; then
        echo "test.sh: no CPU build of torch 2.13.0 to install: $why, and pip's configured sources have no" \
          "torch==2.13.0+cpu ($(grep -v '^\s*$' "$err" | tail -n 1 | cut -c1-160)); install it first:" \
          "$PY -m pip install --index-url $TORCH_CPU_INDEX torch==2.13.0, or PIP_FIND_LINKS=<a folder holding" \
          "torch-2.13.0+cpu-*.whl> scripts/test.sh" >&2
        rm -f "$err"
        exit 1
      fi
      rm -f "$err"
      why="the CPU build from pip's configured sources: $why"
    fi
  fi
  echo "test.sh: torch $("$PY" -c 'import torch; print(torch.__version__, "(CUDA build)" if torch.version.cuda \
    else "(CPU build)", "at", torch.__file__)'), $why"
}
install_torch
"${PIP[@]}" -e '.[test,plots,static]'   # plots: the chart tests draw for real; static: ruff and mypy
# Engines the ingest tests drive for real (test-only, never runtime dependencies).
"${PIP[@]}" ansible-core
"$PY" scripts/install-ansible-posix.py   # the json stdout callback, without the full `ansible` package
# Slurm and ClusterShell for the engine tests (test-only). The Slurm tests start their own one-node cluster
# (scripts/start-slurm.sh: munged, slurmctld, slurmd, every file in a temp dir, stopped by PID); it needs root.
if [ "$(id -u)" = 0 ] && ! { [ -x /usr/sbin/slurmd ] && [ -x /usr/sbin/munged ]; }; then
  export DEBIAN_FRONTEND=noninteractive
  apt_get update -qq
  apt_get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
fi
"${PIP[@]}" ClusterShell

# CI (GPUDIAG_STATIC_CHECKS=1) runs ruff and mypy first: a lint or type error fails before the long suite.
if [ -n "${GPUDIAG_STATIC_CHECKS:-}" ]; then
  PYTHON="$PY" bash scripts/check-static.sh
fi

had_user=0
getent passwd gdnoisy >/dev/null 2>&1 && had_user=1
status=0
"$PY" -m pytest -q -p no:cacheprovider "$@" || status=$?
if [ "$had_user" = 0 ] && [ -z "${GPUDIAG_KEEP_TEST_USER:-}" ] && getent passwd gdnoisy >/dev/null 2>&1; then
  userdel -r gdnoisy 2>/dev/null || userdel gdnoisy || echo "test.sh: could not remove the test user gdnoisy" >&2
fi
exit "$status"
