#!/usr/bin/env bash
# Usage: run_in_memory_cgroup.sh LIMIT_BYTES NAME COMMAND
# Runs COMMAND (one shell string, as a launcher template's {command}) inside a memory cgroup of its
# own, limited to LIMIT_BYTES, and removes the cgroup afterwards; exits with COMMAND's status
# (137 when the kernel killed it for memory). Tests give each node process of a job its own limit
# this way, as a machine of that size would. cgroup v2 (memory.max) or v1 (memory.limit_in_bytes);
# exits 77 with a reason when this machine lets it make neither.
set -uo pipefail
limit=$1 name=$2 command=$3

v2_path=$(awk -F: '$1 == "0" { print $3 }' /proc/self/cgroup)
v1_path=$(awk -F: '$2 == "memory" { print $3 }' /proc/self/cgroup)
if [[ -n $v1_path && -f /sys/fs/cgroup/memory${v1_path}/memory.limit_in_bytes ]]; then
  parent=/sys/fs/cgroup/memory${v1_path} limit_file=memory.limit_in_bytes
elif [[ -n $v2_path && -f /sys/fs/cgroup${v2_path}/memory.max ]] ||
     grep -qw memory "/sys/fs/cgroup${v2_path%/}/cgroup.subtree_control" 2>/dev/null; then
  parent=/sys/fs/cgroup${v2_path%/} limit_file=memory.max
else
  echo "run_in_memory_cgroup: no memory cgroup controller here" >&2
  exit 77
fi
group=$parent/troupe-${name//[^A-Za-z0-9_.-]/_}-$$
if ! mkdir "$group" 2>/dev/null || ! echo "$limit" >"$group/$limit_file" 2>/dev/null; then
  rmdir "$group" 2>/dev/null
  echo "run_in_memory_cgroup: cannot make a memory cgroup under $parent (needs root)" >&2
  exit 77
fi
[[ -f $group/memory.swap.max ]] && echo 0 >"$group/memory.swap.max"

bash -c "echo \$\$ >'$group/cgroup.procs' && exec $command" &
child=$!
trap 'kill -TERM "$child" 2>/dev/null' TERM INT HUP
wait "$child"
status=$?
# A signal ends the first wait early: wait again for the command itself.
while kill -0 "$child" 2>/dev/null; do wait "$child"; status=$?; done
rmdir "$group" 2>/dev/null || { sleep 0.2; rmdir "$group" 2>/dev/null; }
exit "$status"
