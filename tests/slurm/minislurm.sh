#!/usr/bin/env bash
# minislurm.sh up|down DIR: a single-node Slurm for tests, from Debian's packages
# (slurmctld, slurmd, munge), everything under DIR: its own munge key and socket,
# its own ports, state, logs and pid files, so that it touches no system Slurm.
# up prints the SLURM_CONF to export; down stops what up started and keeps DIR.
# Env: MINISLURM_PORT (slurmctld's port, default 16817; slurmd takes the next).
set -euo pipefail
cmd=${1:-}; dir=${2:-}
[[ ($cmd == up || $cmd == down) && -n $dir ]] || { echo "usage: $0 up|down DIR" >&2; exit 2; }
dir=$(realpath -m "$dir")
port=${MINISLURM_PORT:-16817}

stop_pidfile() {  # pidfile name: TERM, then KILL after 5 s
  local pidfile=$1 pid
  [[ -s $pidfile ]] || return 0
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
}

if [[ $cmd == down ]]; then
  export SLURM_CONF=$dir/slurm.conf
  [[ -f $SLURM_CONF ]] && timeout 10 scancel --quiet --user="$(id -un)" 2>/dev/null || true
  stop_pidfile "$dir/slurmd.pid"
  stop_pidfile "$dir/slurmctld.pid"
  stop_pidfile "$dir/munged.pid"
  exit 0
fi

for prog in munged mungekey slurmctld slurmd srun sbatch scontrol; do
  command -v "$prog" >/dev/null || { echo "minislurm: $prog not found (apt-get install slurm-wlm munge)" >&2; exit 3; }
done
mkdir -p "$dir"/{state,spool,munge}
chmod 700 "$dir/munge"
[[ -f $dir/munge/munge.key ]] || mungekey --create --keyfile="$dir/munge/munge.key" >/dev/null 2>&1 \
  || { dd if=/dev/urandom of="$dir/munge/munge.key" bs=1 count=1024 status=none; }
chmod 600 "$dir/munge/munge.key"
socket=$dir/munge/munge.socket
munged --force --socket="$socket" --key-file="$dir/munge/munge.key" \
  --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge/seed" \
  || { echo "minislurm: munged did not start ($dir/munged.log)" >&2; exit 4; }

host=$(hostname -s)
# The node as slurmd sees it (CPUs, sockets, cores, memory), less its uptime line.
node=$(slurmd -C | grep '^NodeName=')
user=$(id -un)
cat >"$dir/slurm.conf" <<CONF
ClusterName=minislurm
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
AuthInfo=socket=$socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SlurmctldTimeout=10
SlurmdTimeout=10
InactiveLimit=0
KillWait=2
# sbatch --wait polls every 2 s while MinJobAge/3 <= 2 s (else 2 s, then 8 s: a short
# job took 10 s); the record stays 6 s past the job's end, three polls
MinJobAge=6
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=10 State=UP OverSubscribe=FORCE:4
CONF
export SLURM_CONF=$dir/slurm.conf
slurmctld -f "$SLURM_CONF" -i || { echo "minislurm: slurmctld did not start ($dir/slurmctld.log)" >&2; exit 4; }
slurmd -f "$SLURM_CONF" || { echo "minislurm: slurmd did not start ($dir/slurmd.log)" >&2; exit 4; }
# Up when the node takes jobs (idle), within 20 s.
for _ in $(seq 100); do
  state=$(timeout 5 sinfo -h -n "$host" -o %t 2>/dev/null || true)
  [[ $state == idle* ]] && { echo "$SLURM_CONF"; exit 0; }
  sleep 0.2
done
echo "minislurm: the node did not come up (state '${state:-}'; logs in $dir)" >&2
exit 5
