#!/usr/bin/env bash
# testhosts.sh: several hosts on this one machine, for running MPI jobs across real
# (if virtual) nodes. Each host is a network namespace with a veth pair on a bridge
# (10.77.0.0/24; the bridge holds 10.77.0.254, where mpiexec runs) and its own mount,
# UTS and IPC namespaces, kept by a holder process (sleep): its own /dev/shm (a tmpfs),
# hostname and SysV IPC. The rsh agent below runs each MPI proxy (orted /
# hydra_pmi_proxy) in the namespaces of the host it names, so the proxy and the ranks
# it starts share them. The host MPIs therefore see separate nodes, talk TCP between
# them and shared memory inside each.
#
#   testhosts.sh check            can this machine make them? (exit 77 and the reason if not)
#   testhosts.sh up [--qdisc SPEC] [--mtu BYTES] N
#                                 make hosts mch1..mchN (2-8); removes a stale set first;
#                                 --qdisc "tbf rate 1gbit burst 32kb latency 1ms" (or
#                                 "netem rate 1gbit delay 50us" where the kernel has
#                                 sch_netem): that qdisc on each host's bridge-side veth
#                                 (every packet between two hosts leaves through one of
#                                 them: the receiver's link); `down` removes it with the veth.
#                                 --mtu 9000 (jumbo frames, default 1500): tbf cuts every
#                                 64 KiB TCP segment larger than its burst into MTU-sized
#                                 packets, each of which the CPU carries through the bridge
#                                 and the peer's stack: 1/6 of the packets at 9000
#   testhosts.sh down             remove every host, veth, bridge and state (idempotent)
#   testhosts.sh status           list what exists
#   testhosts.sh run [--mpi openmpi|mpich] [--native] [--build DIR] --ranks 2,1 prog args
#                                 run prog across hosts: 2 ranks on mch1, 1 on mch2, under
#                                 bin/mcollrun (or the MPI's own mpiexec with --native);
#                                 exit 3 if an mcoll-* file was left in a host's /dev/shm
#   testhosts.sh launcher-args openmpi|mpich 2,1
#                                 the mpiexec options that place the ranks so (one a line)
#   testhosts.sh agent HOST CMD   the rsh agent both launchers call (not for direct use)
#
# Needs root (or CAP_SYS_ADMIN + CAP_NET_ADMIN), iproute2 with netns, util-linux's
# unshare, and tmpfs mounts; `check` names what is missing.
set -euo pipefail

# A second set can exist beside the first with another prefix and subnet (the agent,
# started by mpiexec, inherits them).
PREFIX=${MCOLL_TESTHOSTS_PREFIX:-mch}        # host, netns and veth names start so
SUBNET=${MCOLL_TESTHOSTS_SUBNET:-10.77.0}    # a /24: hosts .1-.8, the bridge .254
BRIDGE=${PREFIX}br0
STATE=/run/mcoll-testhosts-$PREFIX           # the holders' pids
here=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
agent_exe=$here/scripts/testhosts-agent

die() { echo "testhosts: $*" >&2; exit 1; }

hosts_present() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${PREFIX}[0-9]+$" | sort -V || true; }

# The reason this machine cannot make test hosts, or nothing.
missing_privilege() {
  [[ $(id -u) -eq 0 ]] || { echo "not root (needs CAP_SYS_ADMIN and CAP_NET_ADMIN for network namespaces and tmpfs mounts)"; return; }
  command -v ip >/dev/null || { echo "iproute2 (ip) not installed"; return; }
  command -v unshare >/dev/null || { echo "util-linux unshare not installed"; return; }
  local probe=${PREFIX}probe$$ err
  if ! err=$(ip netns add "$probe" 2>&1); then echo "ip netns add failed: $err"; return; fi
  if ! err=$(ip netns exec "$probe" unshare --mount --uts --ipc --propagation private \
               sh -c 'mount -t tmpfs none /dev/shm && hostname probe' 2>&1); then
    ip netns del "$probe" 2>/dev/null || true
    echo "unshare --mount --uts --ipc with a tmpfs on /dev/shm failed: $err"; return
  fi
  if ! err=$(ip link add "${probe}a" type veth peer name "${probe}b" 2>&1); then
    ip netns del "$probe" 2>/dev/null || true
    echo "ip link add type veth failed: $err"; return
  fi
  ip link del "${probe}a" 2>/dev/null || true
  ip netns del "$probe" 2>/dev/null || true
}

down() {
  local h pids
  for h in $(hosts_present); do
    # Whatever still runs in a host (a killed job's proxies and ranks) goes with it;
    # the tmpfs of each /dev/shm goes with the last process of its mount namespace.
    pids=$(ip netns pids "$h" 2>/dev/null || true)
    [[ -n $pids ]] && kill -KILL $pids 2>/dev/null || true
    ip netns del "$h" 2>/dev/null || true
  done
  # Host ends of veth pairs whose namespace end is gone are deleted with it; any left:
  for h in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E "^${PREFIX}[0-9]+v$" || true); do
    ip link del "$h" 2>/dev/null || true
  done
  ip link show "$BRIDGE" >/dev/null 2>&1 && ip link del "$BRIDGE"
  rm -rf "$STATE"
}

up() {
  local qdisc= mtu=1500
  while [[ ${1:-} == --* ]]; do
    case $1 in
      --qdisc) qdisc=$2; shift 2 ;;
      --mtu) mtu=$2; shift 2 ;;
      *) die "up: unknown option $1" ;;
    esac
  done
  local n=${1:-2} k h
  [[ $n =~ ^[0-9]+$ && $n -ge 1 && $n -le 8 ]] || die "up: 1 to 8 hosts, not '$n'"
  local why; why=$(missing_privilege)
  [[ -z $why ]] || { echo "testhosts: cannot make test hosts: $why" >&2; exit 77; }
  down
  mkdir -p "$STATE"
  ip link add "$BRIDGE" type bridge forward_delay 0 stp_state 0
  ip addr add "$SUBNET.254/24" dev "$BRIDGE"
  ip link set "$BRIDGE" mtu "$mtu" up
  for k in $(seq 1 "$n"); do
    h=$PREFIX$k
    ip netns add "$h"
    ip link add "${h}v" type veth peer name eth0 netns "$h"
    ip link set "${h}v" mtu "$mtu" master "$BRIDGE" up
    if [[ -n $qdisc ]]; then
      # shellcheck disable=SC2086  # SPEC is tc's words
      tc qdisc add dev "${h}v" root $qdisc || { down; die "tc qdisc add ... root $qdisc failed"; }
    fi
    ip -n "$h" addr add "$SUBNET.$k/24" dev eth0
    ip -n "$h" link set eth0 mtu "$mtu" up
    ip -n "$h" link set lo up
    # The holder keeps the host's mount, UTS and IPC namespaces (and its /dev/shm)
    # alive between jobs; it runs in the netns, so `down` ends it with the rest.
    # It keeps none of this shell's descriptors above 2: e.g. the lock of a caller's
    # `flock LOCK testhosts.sh up` would stay held for as long as the hosts are up.
    ( close_inherited_fds
      exec setsid ip netns exec "$h" unshare --mount --uts --ipc --propagation private \
        sh -c 'mount -t tmpfs -o mode=1777,size=50% "shm-$1" /dev/shm && hostname "$1" &&
               echo $$ > "$2" && exec sleep infinity' sh "$h" "$STATE/$h.pid" ) </dev/null >/dev/null 2>&1 &
  done
  for k in $(seq 1 "$n"); do
    for _ in $(seq 1 50); do [[ -s $STATE/$PREFIX$k.pid ]] && break; sleep 0.1; done
    holder_of "$PREFIX$k" >/dev/null
  done
  # Bridge ports forward at once (no STP, no forward delay); wait for that anyway.
  for k in $(seq 1 "$n"); do
    for _ in $(seq 1 50); do
      [[ $(cat "/sys/class/net/$PREFIX${k}v/brport/state" 2>/dev/null) == 3 ]] && break
      sleep 0.1
    done
  done
}

# The rsh agent: `agent [options] HOST command...`, as Open MPI's plm_rsh and hydra's
# rsh launcher call it. The command is shell text (both launchers put environment
# settings and `cd` in it); it runs in all of HOST's namespaces.
agent() {
  while [[ $# -gt 0 && $1 == -* ]]; do shift; done   # ssh-style options (-x) mean nothing here
  [[ $# -ge 2 ]] || die "agent: usage: agent HOST command"
  local host=$1; shift
  # The launchers may name a host by its address.
  [[ $host == "$SUBNET".* ]] && host=$PREFIX${host##*.}
  exec nsenter -t "$(holder_of "$host")" --net --mount --uts --ipc sh -c "$*"
}

close_inherited_fds() {  # in a subshell: closes its descriptors above 2
  local fd
  for fd in $(ls "/proc/$BASHPID/fd"); do
    (( fd > 2 )) && eval "exec $fd>&-" 2>/dev/null
  done
  return 0
}

holder_of() {
  local pid; pid=$(cat "$STATE/$1.pid" 2>/dev/null) || die "no test host '$1' (testhosts.sh up N)"
  [[ -d /proc/$pid ]] || die "test host '$1' lost its namespace holder $pid (testhosts.sh up N)"
  echo "$pid"
}

# Prints and removes the mcoll-* files in each host's /dev/shm; false if there were any.
sweep_shm() {
  local h left clean=0
  for h in $(hosts_present); do
    left=$(nsenter -t "$(holder_of "$h")" --mount sh -c 'cd /dev/shm && for f in mcoll-*; do [ -e "$f" ] && echo "$f" && rm -f "$f"; done; true')
    [[ -z $left ]] && continue
    echo "testhosts: left in /dev/shm of $h: $(tr '\n' ' ' <<<"$left")" >&2
    clean=1
  done
  return $clean
}

# mpiexec options that put counts[k] ranks on host k+1, TCP between hosts.
launcher_args() {
  local kind=$1 ranks=$2 k=0 c hostlist="" total=0
  IFS=, read -ra counts <<<"$ranks"
  for c in "${counts[@]}"; do
    k=$((k + 1))
    [[ $c =~ ^[0-9]+$ && $c -ge 1 ]] || die "bad rank count '$c' in '$ranks'"
    hostlist+="${hostlist:+,}$PREFIX$k:$c"
    total=$((total + c))
  done
  # The hosts share this machine's cores: with more ranks in the job than cores, a rank
  # with a core of its own on its host still shares one, so its waits must yield
  # (MCOLL_SPIN_US=0) instead of polling for a while as with a core per rank.
  local spin=()
  if [[ -z ${MCOLL_SPIN_US:-} && $total -gt $(nproc) ]]; then
    [[ $kind == openmpi ]] && spin=(-x MCOLL_SPIN_US=0) || spin=(-genv MCOLL_SPIN_US 0)
  fi
  case $kind in
    openmpi)
      # mpirun runs outside the hosts, on the bridge: its daemons reach it there.
      # --bind-to none: each host's daemon binds its first rank to core 0 (np <= 2),
      # and the hosts share this machine's cores, so every host's rank 0 would share
      # one core (a 1-byte ping-pong took 8 ms: a scheduler tick each way).
      printf '%s\n' --host "$hostlist" -np "$total" --bind-to none \
        --mca plm_rsh_agent "$agent_exe" \
        --mca plm_rsh_no_tree_spawn 1 \
        --mca oob_tcp_if_include "$SUBNET.0/24" \
        --mca btl tcp,self,vader --mca btl_tcp_if_include "$SUBNET.0/24" \
        --mca pml ob1 "${spin[@]}" ;;
    mpich)
      # hydra tells its proxies to call back to the address of -iface; UCX (Debian's
      # MPICH is ch4:ucx) uses TCP on eth0 between hosts, shared memory inside one.
      # UCX 1.13's TCP endpoints often hang in MPI_Finalize's disconnect, without
      # mcoll too (openucx/ucx#8738); its new protocols (UCX_PROTO_ENABLE=y) made
      # that rarer (test_coll natively: 0 of 24 jobs, 5 of 42 without), not gone.
      printf '%s\n' -hosts "$hostlist" -np "$total" \
        -launcher rsh -launcher-exec "$agent_exe" -iface "$BRIDGE" \
        -genv UCX_NET_DEVICES eth0 -genv UCX_PROTO_ENABLE y "${spin[@]}" ;;
    *) die "launcher-args: openmpi or mpich, not '$kind'" ;;
  esac
}

run() {
  local mpi=openmpi native=0 build="" ranks=""
  while [[ $# -gt 0 ]]; do
    case $1 in
      --mpi) mpi=$2; shift 2 ;;
      --native) native=1; shift ;;
      --build) build=$2; shift 2 ;;
      --ranks) ranks=$2; shift 2 ;;
      --) shift; break ;;
      *) break ;;
    esac
  done
  [[ -n $ranks ]] || die "run: --ranks N,M,... is required"
  [[ $# -gt 0 ]] || die "run: no program"
  local nhosts; nhosts=$(tr ',' '\n' <<<"$ranks" | wc -l)
  local k; for k in $(seq 1 "$nhosts"); do
    ip netns list | awk '{print $1}' | grep -qx "$PREFIX$k" || die "run: host $PREFIX$k missing (testhosts.sh up $nhosts)"
  done
  mapfile -t largs < <(launcher_args "$mpi" "$ranks")
  sweep_shm 2>/dev/null || true   # what an earlier (killed) job left is not this job's
  local cmd
  if [[ $native -eq 1 ]]; then
    cmd=("mpiexec.$mpi")
    if [[ $mpi == openmpi ]]; then
      cmd+=(--allow-run-as-root --oversubscribe)
    fi
  else
    cmd=("$here/bin/mcollrun" --mpi "$mpi")
    [[ -n $build ]] && cmd+=(--build "$build")
  fi
  local rc=0
  "${cmd[@]}" "${largs[@]}" "$@" || rc=$?
  local clean=0
  sweep_shm || clean=3
  [[ $rc -ne 0 ]] && return $rc
  return $clean
}

status() {
  echo "hosts: $(hosts_present | tr '\n' ' ')"
  local q; q=$(tc qdisc show dev "${PREFIX}1v" 2>/dev/null | grep -v noqueue || true)
  [[ -z $q ]] || echo "links: $q"
  ip -br addr show "$BRIDGE" 2>/dev/null || echo "bridge $BRIDGE: none"
  local h; for h in $(hosts_present); do
    echo "$h: $(ip -n "$h" -br addr show eth0 2>/dev/null) pids: $(ip netns pids "$h" | tr '\n' ' ')"
  done
}

cmd=${1:-}; shift || true
case $cmd in
  check) why=$(missing_privilege); if [[ -n $why ]]; then echo "$why"; exit 77; fi; echo ok ;;
  up) up "$@" ;;
  down) down ;;
  status) status ;;
  run) run "$@" ;;
  launcher-args) launcher_args "$@" ;;
  agent) agent "$@" ;;
  *) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
