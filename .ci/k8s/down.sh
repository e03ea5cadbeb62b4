#!/bin/bash
# Stops what up.sh started: kubelet, kube-apiserver, etcd, the Pods' containers
# and shims (runc's and gVisor's, with gVisor's sandbox and gofer processes),
# the private containerd; unmounts what they mounted under
# $PDM_K8S_DIR and removes their cgroups. Only processes whose PIDs up.sh
# recorded, and shims started for OUR containerd socket, are stopped; Docker and
# its containers are left alone. The built binaries stay cached.
# Usage: down.sh [--purge]     (--purge also drops etcd data, certificates and imported images)
K=${PDM_K8S_DIR:-/tmp/pdm-k8s}
SOCK=$K/containerd/containerd.sock
CG=pdm-k8s
stop() { # name: TERM the recorded PID, KILL after 10 s
  local f=$K/pids/$1.pid p; [ -f $f ] || return 0; p=$(cat $f)
  if kill -0 $p 2>/dev/null; then
    kill $p; for i in $(seq 50); do kill -0 $p 2>/dev/null || break; sleep 0.2; done
    kill -0 $p 2>/dev/null && kill -9 $p
  fi
  rm -f $f
}
stop kubelet; stop scheduler; stop controller-manager
if [ -S $SOCK ]; then   # every Pod container and sandbox in our containerd
  CTR="ctr -a $SOCK -n k8s.io"
  for c in $($CTR tasks ls -q 2>/dev/null); do $CTR tasks kill -s SIGKILL $c >/dev/null 2>&1; done
  sleep 1
  for c in $($CTR tasks ls -q 2>/dev/null); do $CTR tasks delete -f $c >/dev/null 2>&1; done
  for c in $($CTR containers ls -q 2>/dev/null); do $CTR containers delete $c >/dev/null 2>&1; done
fi
stop apiserver; stop etcd; stop containerd
# shims of OUR containerd: their argv names our socket exactly
for d in /proc/[0-9]*; do
  if { tr '\0' ' ' < $d/cmdline; } 2>/dev/null | grep -qF -- "-address $SOCK "; then kill -9 ${d#/proc/} 2>/dev/null; fi
done
# gVisor's sandbox and gofer processes (up.sh with RUNSC=1), which outlive a
# killed shim: their argv names our runsc root
for d in /proc/[0-9]*; do
  if { tr '\0' ' ' < $d/cmdline; } 2>/dev/null | grep -qF -- "--root=$K/containerd/runsc/"; then kill -9 ${d#/proc/} 2>/dev/null; fi
done
sleep 0.5
# mounts below $K (rootfs overlays, netns, shm, volumes), deepest first
for m in $(awk -v k="$K/" 'index($2,k)==1{print $2}' /proc/self/mounts | sort -r); do umount $m 2>/dev/null || umount -l $m; done
# the Pods' cgroups, deepest first
for c in cpu cpuacct cpuset memory devices freezer blkio pids systemd unified ""; do
  d=/sys/fs/cgroup/$c/$CG; [ -d $d ] && find $d -depth -type d -exec rmdir {} \; 2>/dev/null
done
# pdm-net's veths, addresses and API forward (up.sh with POD_NETWORK)
for l in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep '^pdm'); do ip link del $l 2>/dev/null; done
rm -rf $K/cni/leases
while iptables -t nat -D PREROUTING -i pdm+ -d 10.0.0.1/32 -p tcp --dport 443 -m comment --comment pdm-k8s -j DNAT --to-destination 127.0.0.1:6443 2>/dev/null; do :; done
# the kubelet insists on these host paths; remove them if only ours is there
rm -f /var/lib/kubelet/device-plugins/kubelet.sock
rmdir /var/lib/kubelet/device-plugins /var/lib/kubelet 2>/dev/null
rmdir /usr/libexec/kubernetes/kubelet-plugins/volume/exec /usr/libexec/kubernetes/kubelet-plugins/volume \
  /usr/libexec/kubernetes/kubelet-plugins /usr/libexec/kubernetes 2>/dev/null
rm -f $SOCK $SOCK.ttrpc
if [ "${1:-}" = "--purge" ]; then
  rm -rf $K/pki $K/etcd $K/containerd/root $K/containerd/state $K/containerd/runc $K/containerd/runsc $K/kubelet/root $K/podlogs $K/logs $K/images
fi
echo "k8s down: mounts left under $K: $(awk -v k="$K/" 'index($2,k)==1' /proc/self/mounts | wc -l); cgroup dirs left: $(ls -d /sys/fs/cgroup/*/$CG /sys/fs/cgroup/$CG 2>/dev/null | wc -l)"
