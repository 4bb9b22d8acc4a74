#!/bin/sh
# Runs a program as one emulated node of a `tessera up` cluster: joins the node's CPU cgroup
# first (before exec, so the program never runs unthrottled), then its network namespace when it
# has one, so that both the CPU quota and the shaped link apply. Used by scripts/peers.sh for every
# MPI rank and Dask worker.
#   peers/place.sh CGROUP_DIR NETNS|- PROGRAM [ARGS...]
# CGROUP_DIR and NETNS come from the cluster's <run dir>/<cluster>/emulation.json.
set -eu
cgroup="$1"
netns="$2"
shift 2
# cgroup.procs moves the whole process on cgroup v1 and v2 alike.
echo $$ > "$cgroup/cgroup.procs"
if [ "$netns" = "-" ]; then
  exec "$@"
fi
exec ip netns exec "$netns" "$@"
