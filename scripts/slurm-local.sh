#!/usr/bin/env bash
# A throwaway one-node Slurm cluster (this host) for the tests: munged,
# slurmctld and slurmd with a generated slurm.conf. Everything it writes (munge
# key, conf, spool, state, logs, pid files, sockets) stays under one state
# directory; nothing is written to /etc (beyond what Debian's packages
# put there). Needs root and Debian's slurm-wlm and munge (scripts/setup.sh).
#
#   scripts/slurm-local.sh start   # prints "export SLURM_CONF=..." on stdout
#   scripts/slurm-local.sh status  # exit 0 when the node answers
#   scripts/slurm-local.sh stop    # idempotent; only what `start` started
#
#   eval "$(bash scripts/slurm-local.sh start)" && srun -n 2 hostname
#
# Environment:
#   TRAINSCOPE_SLURM_DIR            state directory [<repo>/build/slurm-local]
#   TRAINSCOPE_SLURM_PORT           slurmctld port; slurmd uses the next [16817]
#   TRAINSCOPE_SLURM_START_TIMEOUT  seconds to wait for the node to be idle [60]
#
# Messages go to stderr; a failure ends with a line "slurm-local: error: ..."
# (then the logs' tail), which callers can use as the reason.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=${TRAINSCOPE_SLURM_DIR:-$repo/build/slurm-local}
port=${TRAINSCOPE_SLURM_PORT:-16817}
start_timeout=${TRAINSCOPE_SLURM_START_TIMEOUT:-60}

say() { echo "slurm-local: $*" >&2; }

tail_logs() {
  local f
  for f in "$dir"/log/munged.log "$dir"/log/slurmctld.log "$dir"/log/slurmd.log; do
    [[ -s $f ]] || continue
    echo "--- tail of $f" >&2
    tail -n 20 "$f" >&2
  done
}

fail() {  # message [--logs]
  echo "slurm-local: error: $1" >&2
  if [[ ${2:-} == --logs ]]; then tail_logs; fi
  exit 1
}

# The state directory as an absolute path; `start` creates it, and without
# it there is nothing to stop.
case ${1:-} in
  start) mkdir -p "$dir" ;;
  stop) [[ -d $dir ]] || exit 0 ;;
  status) [[ -d $dir ]] || { say "not started (no $dir)"; exit 1; } ;;
esac
[[ ! -d $dir ]] || dir=$(cd "$dir" && pwd)
conf=$dir/slurm.conf
sock=$dir/run/munge.socket.2
node=$(hostname -s)

# Whether a process exists and is not a zombie (this container's pid 1 may be
# slow to reap, and kill -0 succeeds on zombies).
alive() {  # pid
  local state
  state=$(sed -E 's/^[0-9]+ \(.*\) ([A-Za-z]).*/\1/' "/proc/$1/stat" 2>/dev/null) || return 1
  [[ -n $state && $state != Z && $state != X ]]
}

# pid of a daemon this script started (its pid file names a live process whose
# command line mentions our state directory), or nothing.
our_pid() {  # name
  local name=$1 file="$dir/run/$1.pid" pid
  [[ -f $file ]] || return 0
  pid=$(tr -dc '0-9' < "$file" || true)
  [[ -n $pid ]] && alive "$pid" || return 0
  [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "$name" ]] || return 0
  tr '\0' ' ' < "/proc/$pid/cmdline" | grep -qF -- "$dir/" || return 0
  echo "$pid"
}

stop_daemon() {  # name
  local name=$1 pid i
  pid=$(our_pid "$name")
  if [[ -n $pid ]]; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
      alive "$pid" || break
      sleep 0.1
    done
    if alive "$pid"; then
      say "$name ($pid) ignored SIGTERM for 10 s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    say "stopped $name ($pid)"
  fi
  rm -f "$dir/run/$name.pid"
}

# slurmstepd processes of this cluster (slurmd starts them with its own
# environment, which has SLURM_CONF=<our conf>) and their tasks, which outlive
# them after a crash: only left when the daemons were killed uncleanly.
our_steps() {
  local p stepds=() all
  for p in /proc/[0-9]*; do
    [[ $(cat "$p/comm" 2>/dev/null) == slurmstepd ]] || continue
    alive "${p#/proc/}" || continue
    tr '\0' '\n' < "$p/environ" 2>/dev/null | grep -qxF "SLURM_CONF=$conf" || continue
    stepds+=("${p#/proc/}")
  done
  ((${#stepds[@]})) || return 0
  # The stepds and all their descendants (from "pid ppid" of /proc/*/stat).
  all=$(for p in /proc/[0-9]*/stat; do
          sed -E 's/^([0-9]+) \(.*\) [A-Za-z] ([0-9]+) .*/\1 \2/' "$p" 2>/dev/null || true
        done | awk -v roots="${stepds[*]}" '
    BEGIN { n = split(roots, r, " "); for (i = 1; i <= n; i++) keep[r[i]] = 1 }
    { parent[$1] = $2 }
    END {
      do { grew = 0
        for (p in parent) if (!(p in keep) && (parent[p] in keep)) { keep[p] = 1; grew = 1 }
      } while (grew)
      for (p in keep) printf "%s ", p
    }')
  echo "${all% }"
}

cmd_stop() {
  local ids pids i
  if [[ -f $conf && -n $(our_pid slurmctld) ]]; then
    # Cancel the jobs first: slurmstepd outlives slurmd by design.
    ids=$(SLURM_CONF=$conf timeout 10 squeue -h -o %A 2>/dev/null | tr '\n' ' ' || true)
    ids=${ids% }
    if [[ -n $ids ]]; then
      say "cancelling jobs $ids"
      # shellcheck disable=SC2086
      SLURM_CONF=$conf timeout 10 scancel $ids 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do
        [[ -z $(SLURM_CONF=$conf timeout 5 squeue -h -o %A 2>/dev/null || true) ]] && break
        sleep 0.2
      done
    fi
  fi
  stop_daemon slurmd
  stop_daemon slurmctld
  pids=$(our_steps)
  if [[ -n $pids ]]; then
    say "killing leftover job steps (slurmstepd and tasks): $pids"
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
  fi
  stop_daemon munged
}

node_state() {
  SLURM_CONF=$conf timeout 10 sinfo -h -n "$node" -o %T 2>/dev/null | head -1 || true
}

cmd_status() {
  local name pid rc=0 state
  for name in munged slurmctld slurmd; do
    pid=$(our_pid "$name")
    if [[ -n $pid ]]; then say "$name running ($pid)"; else say "$name not running"; rc=1; fi
  done
  if ((rc == 0)); then
    state=$(node_state)
    say "node $node: ${state:-no answer} (SLURM_CONF=$conf)"
    [[ $state == idle* || $state == mixed* || $state == allocated* ]] || rc=1
  fi
  return $rc
}

write_conf() {
  local hw
  # The node as slurmd itself detects it (CPUs, topology, RealMemory), so the
  # controller does not drain it for a mismatch; `nproc` and /proc/meminfo
  # if that fails.
  hw=$(slurmd -C 2>/dev/null | sed -n 's/^NodeName=[^ ]* //p' | head -1)
  if [[ -z $hw ]]; then
    hw="CPUs=$(nproc) RealMemory=$(($(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024))"
  fi
  cat > "$conf.tmp" <<EOF
# Generated by scripts/slurm-local.sh: a one-node test cluster. Do not edit.
ClusterName=trainscope-local
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$sock
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/slurmd
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$dir/plugstack.conf
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmctldTimeout=10
SlurmdTimeout=10
MessageTimeout=10
BatchStartTimeout=10
TCPTimeout=5
InactiveLimit=0
KillWait=5
UnkillableStepTimeout=30
Waittime=0
MinJobAge=300
NodeName=$node NodeAddr=127.0.0.1 $hw State=UNKNOWN
PartitionName=local Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
  mv "$conf.tmp" "$conf"
  : > "$dir/plugstack.conf"
}

cmd_start() {
  local b i state
  [[ $(id -u) -eq 0 ]] || fail "needs root (slurmd runs jobs as their user; SlurmUser=root)"
  for b in munged munge slurmctld slurmd sinfo srun; do
    command -v "$b" >/dev/null || fail "$b not found: apt-get install slurm-wlm munge (scripts/setup.sh)"
  done
  # Unix socket paths are limited to 108 bytes (munge's, slurmd's step sockets).
  ((${#dir} <= 70)) || fail "state directory path too long for Unix sockets (${#dir} > 70 chars): $dir; set TRAINSCOPE_SLURM_DIR"

  if [[ -f $conf ]] && cmd_status 2>/dev/null; then
    say "already running"
    printf 'export SLURM_CONF=%q\n' "$conf"
    return 0
  fi
  # Leftovers of an earlier (maybe killed) run: stop what is ours, drop stale
  # pid files, sockets and state.
  cmd_stop
  rm -rf "$dir/state" "$dir/spool" "$dir/run" "$dir/log" "$sock" "$sock.lock"
  for b in "$port" "$((port + 1))"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$b") 2>/dev/null; then
      fail "port $b is in use (another Slurm?): set TRAINSCOPE_SLURM_PORT to a free pair"
    fi
  done
  umask 022
  mkdir -p "$dir/munge" "$dir/state" "$dir/spool/slurmd" "$dir/run" "$dir/log"
  chmod 700 "$dir/munge"  # key and seed; the socket (in run/) must be reachable by all

  # munged, with a key of its own under the state directory.
  if [[ ! -s $dir/munge/munge.key ]]; then
    if command -v mungekey >/dev/null; then
      mungekey --create --keyfile="$dir/munge/munge.key" --force
    else
      dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
    fi
    chmod 400 "$dir/munge/munge.key"
    say "generated $dir/munge/munge.key"
  fi
  munged --socket="$sock" --key-file="$dir/munge/munge.key" \
    --log-file="$dir/log/munged.log" --pid-file="$dir/run/munged.pid" \
    --seed-file="$dir/munge/munged.seed" 2>>"$dir/log/munged.log" \
    || { cmd_stop; fail "munged did not start" --logs; }
  for ((i = 0; i < 50; i++)); do
    munge -n -S "$sock" 2>/dev/null | unmunge -S "$sock" >/dev/null 2>&1 && break
    sleep 0.1
  done
  munge -n -S "$sock" 2>/dev/null | unmunge -S "$sock" >/dev/null 2>&1 \
    || { cmd_stop; fail "munged does not answer on $sock" --logs; }

  write_conf
  # Daemons get SLURM_CONF too, which marks their slurmstepd children as ours.
  export SLURM_CONF=$conf
  # -c: start from a clean state (no jobs or node states from an earlier run).
  slurmctld -c -f "$conf" 2>>"$dir/log/slurmctld.log" \
    || { cmd_stop; fail "slurmctld did not start" --logs; }
  slurmd -c -f "$conf" -N "$node" 2>>"$dir/log/slurmd.log" \
    || { cmd_stop; fail "slurmd did not start" --logs; }

  local deadline=$((SECONDS + start_timeout))
  while :; do
    state=$(node_state)
    [[ $state == idle* ]] && break
    if ((SECONDS >= deadline)); then
      cmd_stop >/dev/null 2>&1 || true
      fail "node $node not idle after ${start_timeout}s (state: ${state:-no answer from slurmctld}); logs in $dir/log" --logs
    fi
    if [[ -z $(our_pid slurmctld) || -z $(our_pid slurmd) ]] && ((SECONDS > 3)); then
      local dead=slurmctld
      [[ -n $(our_pid slurmctld) ]] && dead=slurmd
      cmd_stop >/dev/null 2>&1 || true
      fail "$dead exited during start-up; logs in $dir/log" --logs
    fi
    sleep 0.5
  done
  say "node $node idle (munged $(our_pid munged), slurmctld $(our_pid slurmctld), slurmd $(our_pid slurmd))"
  printf 'export SLURM_CONF=%q\n' "$conf"
}

case ${1:-} in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  *)
    echo "usage: $0 start|stop|status  (state in \$TRAINSCOPE_SLURM_DIR, default $repo/build/slurm-local)" >&2
    exit 2
    ;;
esac
