#!/usr/bin/env bash
# A real Slurm cluster on this one machine, for tests: munge, slurmctld, and N slurmd "nodes"
# (n1..nN, all on 127.0.0.1, each with its own port and spool). Needs root and Debian's
# slurm-wlm + munge. Nothing under /etc/slurm is touched: the config lives in $SLURM_TEST_DIR.
#
#   scripts/slurm-test-cluster.sh start [NODES]   # prints `export SLURM_CONF=...` on success
#   scripts/slurm-test-cluster.sh stop
set -euo pipefail

dir="${SLURM_TEST_DIR:-/tmp/servesweep-slurm}"
conf="$dir/slurm.conf"
ctld_port="${SLURM_TEST_CTLD_PORT:-16817}"
first_node_port="${SLURM_TEST_NODE_PORT:-17001}"

stop() {
  # Jobs first, so no step outlives the cluster (holding ports, or CPU).
  if [ -f "$conf" ] && [ -f "$dir/slurmctld.pid" ]; then
    SLURM_CONF="$conf" scancel --quiet --full --state=PENDING,RUNNING --user="$(id -un)" 2>/dev/null || true
    for _ in $(seq 1 25); do
      [ -z "$(SLURM_CONF="$conf" squeue -h 2>/dev/null)" ] && break
      sleep 0.2
    done
  fi
  for pidfile in "$dir"/slurmd-*.pid "$dir"/slurmctld.pid; do
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile" 2>/dev/null || true)
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
    rm -f "$pidfile"
  done
  # Jobs' processes and munged are ours too; give slurmd a moment to reap its steps.
  sleep 0.5
  if [ -f "$dir/munged.pid" ]; then
    kill "$(cat "$dir/munged.pid")" 2>/dev/null || true
    rm -f "$dir/munged.pid"
  fi
}

start() {
  local nodes="${1:-3}"
  [ "$(id -u)" -eq 0 ] || { echo "slurm-test-cluster: expected root, found uid $(id -u)" >&2; exit 1; }
  for cmd in slurmctld slurmd munged sbatch; do
    command -v "$cmd" >/dev/null || { echo "slurm-test-cluster: expected $cmd (apt-get install slurm-wlm munge), found none" >&2; exit 1; }
  done
  stop
  mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
  local host; host=$(hostname -s)
  local last_port=$((first_node_port + nodes - 1))

  # munge: its own socket and key, so a system munged (if any) is left alone.
  if [ ! -f "$dir/munge/munge.key" ]; then
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  fi
  chown -R munge:munge "$dir/munge"
  chmod 700 "$dir/munge"; chmod 400 "$dir/munge/munge.key"
  runuser -u munge -- /usr/sbin/munged --key-file="$dir/munge/munge.key" \
    --socket="$dir/munge/munge.socket" --pid-file="$dir/munge/munged.pid" \
    --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed" --force
  cp "$dir/munge/munged.pid" "$dir/munged.pid"

  cat > "$conf" <<CONF
ClusterName=servesweep-test
SlurmctldHost=${host}(127.0.0.1)
SlurmctldPort=${ctld_port}
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=${dir}/munge/munge.socket
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SlurmdParameters=config_overrides
ReturnToService=2
StateSaveLocation=${dir}/state
SlurmdSpoolDir=${dir}/spool/%n
SlurmctldPidFile=${dir}/slurmctld.pid
SlurmdPidFile=${dir}/slurmd-%n.pid
SlurmctldLogFile=${dir}/slurmctld.log
SlurmdLogFile=${dir}/slurmd-%n.log
TmpFS=${dir}/tmp/%n
SchedulerType=sched/backfill
# Heterogeneous jobs are started by the backfill pass only: run it every second.
SchedulerParameters=bf_interval=1
SelectType=select/linear
JobCompType=jobcomp/none
# A new cluster starts at a random job id: jobs of an earlier cluster still winding down never
# share a job id (and so a coordinator port) with this one's.
FirstJobId=$((RANDOM % 9000 + 1000))
MinJobAge=300
NodeName=n[1-${nodes}] NodeHostname=${host} NodeAddr=127.0.0.1 Port=[${first_node_port}-${last_port}] CPUs=2 RealMemory=2000 State=UNKNOWN
PartitionName=test Nodes=n[1-${nodes}] Default=YES MaxTime=INFINITE State=UP
CONF
  export SLURM_CONF="$conf"
  slurmctld -f "$conf"
  # Each node its own TmpFS: PMIx puts per-step folders there, which would collide otherwise.
  for i in $(seq 1 "$nodes"); do mkdir -p "$dir/tmp/n$i"; slurmd -f "$conf" -N "n$i"; done

  # Ready when every node is idle.
  for _ in $(seq 1 100); do
    idle=$(sinfo -h -N -t idle -o '%N' 2>/dev/null | sort -u | wc -l)
    [ "$idle" -ge "$nodes" ] && { echo "export SLURM_CONF=$conf"; return 0; }
    sleep 0.2
  done
  echo "slurm-test-cluster: expected $nodes idle nodes, found $(sinfo -h -N -o '%N %T' 2>&1 | tr '\n' ' ')" >&2
  tail -5 "$dir/slurmctld.log" >&2 || true
  exit 1
}

case "${1:-}" in
  start) start "${2:-3}" ;;
  stop) stop ;;
  *) echo "usage: $0 start [NODES] | stop" >&2; exit 2 ;;
esac
