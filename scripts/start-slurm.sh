#!/usr/bin/env bash
# A throwaway one-node Slurm on this machine, for the engine tests (tests/integration/test_engines_slurm.py).
#
#   scripts/start-slurm.sh DIR          start munged, slurmctld and slurmd with every file under DIR; wait
#                                       until the node is idle; print SLURM_CONF=DIR/slurm.conf and NODE=name
#   scripts/start-slurm.sh --stop DIR   cancel this cluster's jobs, then stop the three by the PIDs recorded
#                                       in DIR (nothing else is touched)
#
# Needs root and Debian's slurm-wlm and munge (scripts/test.sh installs them). Nothing outside DIR is read
# or written: its own munge key and socket (AuthInfo=socket=...), its own ports on 127.0.0.1, no cgroup
# plugins (proctrack/linuxproc, task/none), so it runs in a container too. Clients find the cluster through
# SLURM_CONF. On failure it stops what it started and prints one line saying what failed (exit 1).
set -uo pipefail
export PATH="$PATH:/usr/sbin:/sbin"   # munged, slurmctld and slurmd live there

fail() { echo "start-slurm: $*" >&2; [ -n "${DIR:-}" ] && stop_all; exit 1; }

# The PID a daemon recorded, only while that daemon still runs under it (a zombie or a reused PID is not it).
running_pid() {
  local pid
  pid=$(cat "$DIR/pids/$1" 2>/dev/null) && [ -n "$pid" ] || return 1
  grep -q "^$pid ($1) [^Z]" "/proc/$pid/stat" 2>/dev/null && echo "$pid"
}

stop_all() {
  local name pid
  for name in slurmd slurmctld munged; do
    pid=$(running_pid "$name") && kill "$pid" 2>/dev/null
  done
  for _ in $(seq 50); do   # up to 5 s for all three to exit
    running_pid slurmd >/dev/null || running_pid slurmctld >/dev/null || running_pid munged >/dev/null || return 0
    sleep 0.1
  done
  for name in slurmd slurmctld munged; do
    pid=$(running_pid "$name") && kill -9 "$pid" 2>/dev/null
  done
  return 0
}

if [ "${1:-}" = "--stop" ]; then
  DIR=${2:?usage: start-slurm.sh --stop DIR}
  if running_pid slurmctld >/dev/null; then
    # Job steps run under slurmstepd, which outlives slurmd: cancel every job of this cluster first.
    export SLURM_CONF="$DIR/slurm.conf"
    scancel --quiet --user=root 2>/dev/null
    for _ in $(seq 40); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.25; done
  fi
  stop_all
  exit 0
fi
DIR=${1:?usage: start-slurm.sh DIR}
DIR=$(cd "$DIR" && pwd) || { DIR=; fail "no such directory: $1"; }

[ "$(id -u)" = 0 ] || { DIR=; fail "needs root (slurmd runs jobs as their users)"; }
for tool in munged slurmctld slurmd sinfo squeue scancel srun sbatch; do
  command -v "$tool" >/dev/null 2>&1 || { DIR=; fail "$tool not found (apt-get install slurm-wlm munge)"; }
done

mkdir -p "$DIR"/{munge,state,spool,log,pids} && chmod 700 "$DIR" "$DIR/munge" || fail "cannot create $DIR"
NODE=$(hostname -s)
# slurmd's own view of this machine: NodeName=... CPUs=... RealMemory=... (first line of `slurmd -C`).
NODE_LINE=$(slurmd -C 2>/dev/null | head -n1)
case "$NODE_LINE" in NodeName=*) ;; *) fail "slurmd -C did not describe this machine: $NODE_LINE" ;; esac
NODE_LINE="NodeName=$NODE ${NODE_LINE#NodeName=* }"
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
CTLD_PORT=$(free_port) && SLURMD_PORT=$(free_port) || fail "no free port on 127.0.0.1"

dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none && chmod 400 "$DIR/munge/munge.key" \
  || fail "cannot write the munge key"
cat >"$DIR/slurm.conf" <<EOF
ClusterName=gpudiag-test
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge/munge.socket
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/pids/slurmctld
SlurmdPidFile=$DIR/pids/slurmd
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
KillWait=5
MinJobAge=300
$NODE_LINE NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$DIR/slurm.conf"

last_log() { tail -n 3 "$DIR/log/$1.log" 2>/dev/null | tr '\n' ' '; }

munged --force --socket="$DIR/munge/munge.socket" --key-file="$DIR/munge/munge.key" \
  --pid-file="$DIR/pids/munged" --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/seed" \
  >"$DIR/log/munged.out" 2>&1 || fail "munged did not start: $(tail -n1 "$DIR/log/munged.out") $(last_log munged)"
slurmctld -c >"$DIR/log/slurmctld.out" 2>&1 \
  || fail "slurmctld did not start: $(cat "$DIR/log/slurmctld.out") $(last_log slurmctld)"
slurmd -N "$NODE" >"$DIR/log/slurmd.out" 2>&1 \
  || fail "slurmd did not start: $(cat "$DIR/log/slurmd.out") $(last_log slurmd)"

state=
for _ in $(seq 120); do   # up to 30 s for the node to register
  state=$(sinfo -h -n "$NODE" -o %t 2>/dev/null)
  [ "$state" = idle ] && break
  for name in munged slurmctld slurmd; do
    running_pid "$name" >/dev/null || fail "$name exited: $(last_log "$name")"
  done
  sleep 0.25
done
[ "$state" = idle ] || fail "node $NODE is '${state:-unknown}', not idle, after 30 s: $(last_log slurmd)"
echo "SLURM_CONF=$SLURM_CONF"
echo "NODE=$NODE"
