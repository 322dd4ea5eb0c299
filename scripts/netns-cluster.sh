#!/usr/bin/env bash
# Simulated hosts on one machine, for tests of the cross-host path (docs/multi-host.md).
#
#   netns-cluster.sh up N [--rate RATE] [--delay MS] [--loss PCT]
#   netns-cluster.sh down
#   netns-cluster.sh exec HOST COMMAND...     (as ssh would: the words joined, run by bash -c)
#   netns-cluster.sh link HOST up|down        (a partition: the host's cable pulled, or back)
#   netns-cluster.sh hosts                    (one "HOST ADDRESS" line per host)
#
# `up` makes hosts h0 .. h(N-1). Each is a network namespace wired to one bridge, with an address
# in a private /24 (TROUPE_NETNS_SUBNET, default 10.213.7; the bridge, here, is .1, host i is
# .(i+2)), and its own UTS (hostname hI), IPC and mount namespace with a private /dev/shm, /sys
# and /etc/hosts. Hosts share nothing but the wire, as machines do: UCX between them finds only
# TCP (UCX tells shared-memory peers by machine and IPC namespace). Processes here reach a host
# at its address; a job supervisor listening on the bridge's address is reachable from every host.
# --rate shapes each host's link in both directions with tc tbf; --delay and --loss need netem,
# which not every kernel has: without it they are refused, not ignored.
#
# As a launcher template: --launcher 'scripts/netns-cluster.sh exec {host} {command}'.
# Needs root, ip (iproute2), tc, unshare and nsenter. `up` removes what it made when it fails;
# `down` removes everything the script makes and may run any number of times.
set -euo pipefail

prefix=troupe
bridge=${prefix}-br
subnet=${TROUPE_NETNS_SUBNET:-10.213.7}
state=/run/${prefix}-netns-cluster

die() {
  echo "netns-cluster: $*" >&2
  exit 2
}

host_ns() { echo "${prefix}-$1"; }
host_veth() { echo "${prefix}-$1-v"; }  # the bridge's end of a host's cable (15 characters at most)

usage() {
  sed -n '4,8p' "$0" | sed 's/^# *//' >&2
  exit 2
}

need_tools() {
  [[ $(id -u) == 0 ]] || die "needs root (network namespaces, a bridge, tc)"
  local tool
  for tool in ip tc unshare nsenter mount; do
    command -v "$tool" >/dev/null || die "needs '$tool', which is not on PATH"
  done
}

hosts() {
  [[ -d $state ]] || return 0
  local entry
  for entry in "$state"/h*/; do
    [[ -d $entry ]] && basename "$entry"
  done | sort -V
}

# The bind mounts that keep a host's UTS, IPC and mount namespaces alive without a process.
release_host() {
  local host=$1 kind
  for kind in mnt ipc uts; do
    umount "$state/$host/$kind" 2>/dev/null || true
  done
  rm -rf "${state:?}/$host"
  ip netns del "$(host_ns "$host")" 2>/dev/null || true
  ip link del "$(host_veth "$host")" 2>/dev/null || true
}

down() {
  local host
  # Processes still inside a host (a test that failed half-way) go first: a namespace with a
  # process in it outlives its name.
  for host in $(hosts) $(ip netns list 2>/dev/null | awk -v p="${prefix}-" 'index($1, p) == 1 { print substr($1, length(p) + 1) }'); do
    ip netns pids "$(host_ns "$host")" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
    release_host "$host"
  done
  ip link del "$bridge" 2>/dev/null || true
  if mountpoint -q "$state" 2>/dev/null; then umount "$state" 2>/dev/null || umount -l "$state"; fi
  rm -rf "$state"
}

has_netem() {
  local probe=${prefix}-probe result=0
  ip link add "$probe" type veth peer name "${probe}p" 2>/dev/null || return 1
  tc qdisc add dev "$probe" root netem delay 1ms 2>/dev/null || result=1
  ip link del "$probe" 2>/dev/null || true
  return $result
}

# Shapes what DEVICE (in namespace NS, else here) sends. tbf's burst must hold at least a timer
# tick's worth of bytes at the rate; 256 KB does up to a few Gbit/s.
shape() {
  local device=$1 ns=${2:-}
  local -a tc=(tc)
  [[ -n $ns ]] && tc+=(-n "$ns")
  local -a netem=()
  [[ -n $delay ]] && netem+=(delay "${delay}ms")
  [[ -n $loss ]] && netem+=(loss "${loss}%")
  if [[ -n $rate && ${#netem[@]} -gt 0 ]]; then
    "${tc[@]}" qdisc add dev "$device" root handle 1: netem "${netem[@]}"
    "${tc[@]}" qdisc add dev "$device" parent 1:1 handle 10: tbf rate "$rate" burst 256kb latency 100ms
  elif [[ -n $rate ]]; then
    "${tc[@]}" qdisc add dev "$device" root tbf rate "$rate" burst 256kb latency 100ms
  elif [[ ${#netem[@]} -gt 0 ]]; then
    "${tc[@]}" qdisc add dev "$device" root netem "${netem[@]}"
  fi
}

up() {
  [[ $# -ge 1 && $1 =~ ^[0-9]+$ && $1 -ge 1 && $1 -le 200 ]] ||
    die "up takes a number of hosts from 1 to 200, not '${1:-}'"
  local count=$1
  shift
  rate='' delay='' loss=''
  while [[ $# -gt 0 ]]; do
    case $1 in
      --rate) [[ ${2:-} =~ ^[0-9]+(\.[0-9]+)?([kmg]?(bit|bps))$ ]] || die "--rate takes a tc rate such as 100mbit or 1gbit, not '${2:-}'"
        rate=$2 ;;
      --delay) [[ ${2:-} =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--delay takes milliseconds, not '${2:-}'"
        delay=$2 ;;
      --loss) [[ ${2:-} =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--loss takes a percentage, not '${2:-}'"
        loss=$2 ;;
      *) die "unknown option '$1' (up N [--rate RATE] [--delay MS] [--loss PCT])" ;;
    esac
    shift 2
  done
  need_tools
  if [[ -n $delay || -n $loss ]] && ! has_netem; then
    die "--delay and --loss need tc netem, which this kernel ($(uname -r)) does not have; --rate (tbf) works without it"
  fi
  [[ -d $state ]] && die "a cluster is already up ($(hosts | tr '\n' ' ')); run '$0 down' first"
  if ip -4 addr show | grep -q "inet ${subnet//./\\.}\."; then
    die "the subnet $subnet.0/24 is in use on this machine; choose another with TROUPE_NETNS_SUBNET"
  fi
  trap 'status=$?; trap - EXIT; [[ $status == 0 ]] || down; exit $status' EXIT
  trap 'exit 130' INT TERM HUP

  # The namespace files must sit on a private mount, or binding a mount namespace there fails.
  mkdir -p "$state"
  mount --bind "$state" "$state"
  mount --make-private "$state"
  ip link add "$bridge" type bridge
  ip addr add "$subnet.1/24" dev "$bridge"
  ip link set "$bridge" up

  local etc_hosts="$state/hosts" i
  echo "127.0.0.1 localhost" >"$etc_hosts"
  echo "$subnet.1 $(hostname)" >>"$etc_hosts"
  for ((i = 0; i < count; i++)); do echo "$subnet.$((i + 2)) h$i" >>"$etc_hosts"; done

  for ((i = 0; i < count; i++)); do
    local host=h$i ns veth
    ns=$(host_ns "$host") veth=$(host_veth "$host")
    mkdir -p "$state/$host"
    ip netns add "$ns"
    ip link add "$veth" type veth peer name eth0 netns "$ns"
    ip link set "$veth" master "$bridge"
    ip link set "$veth" up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$subnet.$((i + 2))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" route add default via "$subnet.1"
    # Both directions of a host's cable: its eth0 sends, the bridge's end delivers to it.
    shape eth0 "$ns"
    shape "$veth"
    touch "$state/$host/uts" "$state/$host/ipc" "$state/$host/mnt"
    nsenter --net="/run/netns/$ns" unshare --uts="$state/$host/uts" --ipc="$state/$host/ipc" \
      --mount="$state/$host/mnt" --propagation private sh -c "
        hostname $host
        mount -t tmpfs -o mode=1777 tmpfs /dev/shm
        mount -t sysfs sysfs /sys
        mount --bind '$etc_hosts' /etc/hosts"
  done
  # A bridge port forwards only once it has reached that state (3).
  for ((i = 0; i < count; i++)); do
    local tries=0
    until [[ $(cat "/sys/class/net/$(host_veth "h$i")/brport/state") == 3 ]]; do
      ((++tries < 50)) || die "host h$i's port on the bridge does not forward"
      sleep 0.1
    done
  done
  hosts_list
}

hosts_list() {
  local host
  for host in $(hosts); do
    echo "$host $subnet.$((${host#h} + 2))"
  done
}

host_exists() {
  [[ -d $state/$1 ]] || die "no host '$1' (hosts: $(hosts | tr '\n' ' '))"
}

run_on() {
  local host=$1
  shift
  host_exists "$host"
  [[ $# -gt 0 ]] || die "exec $host: no command"
  exec nsenter --net="/run/netns/$(host_ns "$host")" --uts="$state/$host/uts" --ipc="$state/$host/ipc" \
    --mount="$state/$host/mnt" -- bash -c "$*"
}

link() {
  [[ $# == 2 && ( $2 == up || $2 == down ) ]] || die "link takes a host and up or down"
  host_exists "$1"
  ip link set "$(host_veth "$1")" "$2"
}

command=${1:-}
[[ $# -gt 0 ]] && shift
case $command in
  up) up "$@" ;;
  down) need_tools; down ;;
  exec) [[ $# -ge 1 ]] || usage; run_on "$@" ;;
  link) need_tools; link "$@" ;;
  hosts) hosts_list ;;
  *) usage ;;
esac
