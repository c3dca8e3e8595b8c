# tests/clients/lib.sh: job control shared by the client suites (mpi4py.sh,
# mpich_coll.sh), sourced after `set -euo pipefail` and after `root` is set.
#
#   client_setup NAME TAG_VAR LOGS   once, first: NAME prefixes the temporary log
#                        directory (used when LOGS, the user's choice, is empty),
#                        TAG_VAR is the environment variable that marks the
#                        processes of our jobs; sets logs and own_logs
#   client_launcher FLAVOUR MODE     sets the array `launch`: bin/mcollrun under
#                        mcoll (MODE mcoll), else the flavour's own mpiexec
#   client_job MODE SECONDS LOGFILE COMMAND...   runs COMMAND in $logs under
#                        timeout(1), our tag in its environment (and MCOLL_VERBOSE=1
#                        under mcoll); sets job_rc and left_behind (our processes
#                        still alive afterwards, killed)
#   client_wait          waits for the background process just started ($!) as the
#                        job running now; sets job_rc
#   client_failed RC SECONDS   "FAIL <why>" for a timeout, processes left behind or
#                        an exit code other than 0; nothing when none of those
#   client_fork N        in a subshell about to run jobs beside others: its jobs'
#                        tag becomes TAG.N (what it leaves behind is its own)

client_setup() {
  client_tag_var=$2
  job_tag=$1-$$-$RANDOM
  logs=$3
  own_logs=0
  if [[ -z $logs ]]; then
    logs=$(mktemp -d "${TMPDIR:-/tmp}/mcoll-$1.XXXXXX")
    own_logs=1
  fi
  mkdir -p "$logs"
  job_pid=""
  trap 'client_cleanup; client_kill_tagged >/dev/null' EXIT
  trap 'client_cleanup; exit 130' INT TERM
}

# Processes of our jobs still alive: the ranks and MPICH's proxies (which start
# sessions of their own) carry our tag in their environment. Jobs run side by side
# (client_fork) carry TAG.N: theirs too.
# One grep over every environ file: a grep per process took ~0.1-0.5 s a job.
client_tagged() {
  local env
  { grep -lxzsE -- "$client_tag_var=$job_tag(\.[0-9]+)*" /proc/[0-9]*/environ 2>/dev/null || true; } \
    | while read -r env; do echo "${env//[!0-9]/}"; done
  return 0
}

# Kills them; prints their pids.
client_kill_tagged() {
  local pids sig
  pids=$(client_tagged | tr '\n' ' ')
  [[ -n $pids ]] || return 0
  echo "$pids"
  for sig in TERM KILL; do
    kill -"$sig" $pids 2>/dev/null || true
    sleep 1
    pids=$(client_tagged | tr '\n' ' ')
    [[ -n $pids ]] || return 0
  done
}

# The job (or build) running now: its timeout(1) leads its own process group, which
# a signal to us takes down with it, so nothing outlives the script.
client_cleanup() {
  if [[ -n $job_pid ]] && kill -0 "$job_pid" 2>/dev/null; then
    kill -TERM -- "-$job_pid" 2>/dev/null || true
    sleep 2
    kill -KILL -- "-$job_pid" 2>/dev/null || true
  fi
  return 0
}

client_launcher() {
  local flavour=$1 mode=$2
  if [[ $mode == mcoll ]]; then
    launch=("$root/bin/mcollrun" --mpi "$flavour")
  elif [[ $flavour == openmpi ]]; then
    launch=(mpiexec.openmpi --oversubscribe)
  else
    launch=(mpiexec.mpich)
  fi
}

client_wait() {
  job_pid=$!
  job_rc=0
  wait "$job_pid" || job_rc=$?
  job_pid=""
}

client_job() {
  local mode=$1 seconds=$2 logfile=$3
  shift 3
  (
    cd "$logs"
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export "$client_tag_var=$job_tag"
    [[ $mode == mcoll ]] && export MCOLL_VERBOSE=1
    exec timeout -k 10 "$seconds" "$@"
  ) >"$logfile" 2>&1 </dev/null &
  client_wait
  left_behind=$(client_kill_tagged)
}

client_failed() {
  local rc=$1 seconds=$2
  if [[ $rc -eq 124 || $rc -eq 137 ]]; then echo "FAIL timeout after ${seconds}s"; return; fi
  if [[ -n $left_behind ]]; then echo "FAIL processes left behind: $left_behind"; return; fi
  if [[ $rc -ne 0 ]]; then echo "FAIL exit code $rc"; return; fi
  return 0
}

client_fork() { job_tag=$job_tag.$1; }
