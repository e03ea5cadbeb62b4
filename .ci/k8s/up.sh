#!/bin/bash
# Brings up a real single-node Kubernetes (etcd, kube-apiserver, kubelet; no
# scheduler or controller-manager: sandbox Pods are bound with spec.nodeName
# "localhost") for the Kubernetes backend's tests, on a cgroup-v1 or v2 Debian
# host with Docker, as root. It uses a PRIVATE containerd (Debian's
# containerd + runc, own root, state and socket), a loopback-only network
# (Pods get no network), a locally built pause image, and imports the images
# in $IMAGES from the local Docker daemon (no registry needed).
#
# Binaries come from .ci/k8s/build.sh (cached; first build ~12 min, later
# runs ~30 s). State lives under $PDM_K8S_DIR (default /tmp/pdm-k8s); the
# last line printed is the kubeconfig path, e.g.
#
#   export PDM_KUBECONFIG=$(.ci/k8s/up.sh | tail -1)
#   go test ./executor/kubernetes -count=1 -v
#   .ci/k8s/down.sh             # --purge also drops etcd data and images
#
# Ports on 127.0.0.1: 6443 (API), 2379/2380 (etcd), 10250/10248 (kubelet).
#
# RUNSC=1 also registers gVisor with the private containerd: runsc and its
# shim from .ci/k8s/gvisor.sh (built once, cached), the containerd runtime
# "runsc" (runsc flags in $PDM_K8S_DIR/containerd/runsc.toml: platform
# $RUNSC_PLATFORM, default systrap; no network) and the RuntimeClass
# "gvisor" of examples/kubernetes. Without it the node has runc only. A
# containerd already running with the other setting is refused: down.sh
# first.
#
# CONTROLLERS=1 also starts kube-scheduler and kube-controller-manager (its
# deployment, replicaset, node lifecycle (it lifts the new node's not-ready
# taint), endpointslice, serviceaccount, root CA publisher and garbage
# collector controllers), so a Deployment applied as written gets its
# Pods. POD_NETWORK="ns ..." gives the Pods of those namespaces a network to
# the node and the API server (pdm-net below); every other Pod has lo only.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
K=${PDM_K8S_DIR:-/tmp/pdm-k8s}
IMAGES=${IMAGES:-python-docker-mcp-sandbox:latest}
POD_PIDS=${POD_PIDS:-256}      # the kubelet's podPidsLimit: Kubernetes has no per-Pod pids limit
NAMESPACES=${NAMESPACES:-python-docker-mcp python-docker-mcp-sandboxes}
NODE=localhost
CG=pdm-k8s                     # cgroup parent of every Pod
SOCK=$K/containerd/containerd.sock
T0=$(date +%s); ts() { echo "[k8s up $(( $(date +%s)-T0 ))s] $*" >&2; }

missing=
for pkg in containerd runc openssl curl; do command -v $pkg >/dev/null || missing="$missing $pkg"; done
if [ -n "$missing" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  ts "installing$missing with apt-get"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
for cmd in containerd ctr runc openssl curl docker; do
  command -v $cmd >/dev/null || { echo "up.sh: $cmd not found (as root: apt-get install containerd runc openssl curl; and Docker)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "up.sh: run as root (the kubelet and containerd manage cgroups and mounts)" >&2; exit 1; }
BIN=$("$HERE/build.sh" | tail -1)
RUNSC=${RUNSC:-}
RUNSC_PLATFORM=${RUNSC_PLATFORM:-systrap}
GVBIN= RUNSC_RUNTIME=
if [ "$RUNSC" = 1 ]; then GVBIN=$("$HERE/gvisor.sh" | tail -1); fi
mkdir -p $K/{logs,pids,pki,pause,cni/bin,cni/net.d,containerd,kubelet,etcd,podlogs,images}

# ---- pause image: the built binary as a one-layer OCI image tar ----
if [ ! -f $K/pause/pause-oci.tar ]; then
  ts "packing the pause image"
  cd $K/pause; rm -rf oci layer; mkdir -p oci/blobs/sha256 layer; cp $BIN/pause layer/pause
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C layer -cf layer.tar pause
  blob() { local d; d=$(sha256sum "$1" | cut -d' ' -f1); echo "$d $(stat -c %s "$1")"; mv "$1" oci/blobs/sha256/$d; }
  read -r LD LS < <(blob layer.tar)
  printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":["/pause"],"User":"65535:65535"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' $LD > cfg.json
  read -r CD CS < <(blob cfg.json)
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' $CD $CS $LD $LS > m.json
  read -r MD MS < <(blob m.json)
  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"io.containerd.image.name":"pdm-k8s.local/pause:1"}}]}' $MD $MS > oci/index.json
  echo '{"imageLayoutVersion":"1.0.0"}' > oci/oci-layout
  tar -C oci -cf pause-oci.tar .
fi

# ---- certificates and kubeconfigs ----
P=$K/pki
if [ ! -f $P/ca.crt ]; then
  ts "generating certificates"
  cd $P
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 -subj "/CN=pdm-k8s-ca" 2>/dev/null
  sign() { # name subject [subjectAltName]
    openssl req -newkey rsa:2048 -nodes -keyout $1.key -out $1.csr -subj "$2" 2>/dev/null
    if [ -n "${3:-}" ]; then printf "subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n" "$3" > $1.ext
    else printf "extendedKeyUsage=clientAuth\n" > $1.ext; fi
    openssl x509 -req -in $1.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out $1.crt -days 3650 -extfile $1.ext 2>/dev/null
  }
  sign apiserver "/CN=kube-apiserver" "IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
  sign admin "/O=system:masters/CN=admin"
  sign kubelet "/O=system:nodes/CN=system:node:$NODE"
  sign kubelet-serving "/CN=$NODE" "IP:127.0.0.1,DNS:localhost"
  sign apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
  openssl genrsa -out sa.key 2048 2>/dev/null; openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  for u in admin kubelet; do cat > $u.kubeconfig <<EOK
apiVersion: v1
kind: Config
clusters:
- name: pdm-k8s
  cluster: {server: "https://127.0.0.1:6443", certificate-authority: $P/ca.crt}
users:
- name: $u
  user: {client-certificate: $P/$u.crt, client-key: $P/$u.key}
contexts:
- name: pdm-k8s
  context: {cluster: pdm-k8s, user: $u}
current-context: pdm-k8s
EOK
  done
fi

# ---- CNI: containerd sets up lo itself with the loopback plugin; pdm-net (below) does the rest ----
if [ ! -x $K/cni/bin/loopback ]; then
  for d in /usr/lib/cni /opt/cni/bin; do [ -x $d/loopback ] && cp $d/loopback $K/cni/bin/ && break; done
  if [ ! -x $K/cni/bin/loopback ]; then
    ts "fetching Debian's containernetworking-plugins for the loopback plugin"
    mkdir -p $K/debs; (cd $K/debs && apt-get download containernetworking-plugins >/dev/null)
    dpkg -x $K/debs/containernetworking-plugins_*.deb $K/cni-x; cp $K/cni-x/usr/lib/cni/loopback $K/cni/bin/
  fi
fi
# pdm-net: a Pod of a namespace listed in $K/cni/networked (POD_NETWORK)
# gets a veth to the node, an address 10.254.0.N/32 and a route to the API
# server's in-cluster address (10.0.0.1:443, forwarded to 127.0.0.1:6443);
# every other Pod keeps only lo and is reported with an eth0 and an address,
# because containerd's CRI requires a result with one. So sandbox Pods stay
# without network, as the NetworkPolicy of examples/kubernetes keeps them on a
# cluster whose network plugin enforces it, while the server's Pods reach the
# API and answer the kubelet's probes.
cat > $K/cni/bin/pdm-net <<EOF
#!/bin/bash
K=$K
EOF
cat >> $K/cni/bin/pdm-net <<'EOF'
set -u
cat >/dev/null
arg() { printf %s "${CNI_ARGS:-}" | tr ';' '\n' | sed -n "s/^$1=//p"; }
HV=pdm${CNI_CONTAINERID:0:11}
L=$K/cni/leases
case "$CNI_COMMAND" in
ADD)
  if grep -qxF -- "$(arg K8S_POD_NAMESPACE)" $K/cni/networked 2>/dev/null; then
    mkdir -p $L
    ip=
    for n in $(seq 2 254); do
      if mkdir $L/10.254.0.$n 2>/dev/null; then ip=10.254.0.$n; echo "$CNI_CONTAINERID" > $L/$ip/id; break; fi
    done
    [ -n "$ip" ] || { echo '{"code":11,"msg":"pdm-net: no free address in 10.254.0.0/24"}'; exit 1; }
    { ip link add $HV type veth peer name eth0 netns "$CNI_NETNS" &&
      ip addr add 10.254.0.1/32 dev $HV && sysctl -qw net.ipv4.conf.$HV.route_localnet=1 &&
      ip link set $HV up && ip route add $ip/32 dev $HV &&
      nsenter --net="$CNI_NETNS" sh -c "ip addr add $ip/32 dev eth0 && ip link set eth0 up &&
        ip route add 10.254.0.1/32 dev eth0 scope link && ip route add default via 10.254.0.1 dev eth0"
    } >&2 || { ip link del $HV 2>/dev/null; rm -rf $L/$ip; echo '{"code":11,"msg":"pdm-net: could not set up the veth"}'; exit 1; }
    printf '{"cniVersion":"0.4.0","interfaces":[{"name":"%s"},{"name":"eth0","sandbox":"%s"}],"ips":[{"version":"4","address":"%s/32","gateway":"10.254.0.1","interface":1}]}\n' $HV "$CNI_NETNS" $ip
  else
    h=$(printf %s "$CNI_CONTAINERID" | cksum | cut -d' ' -f1)
    printf '{"cniVersion":"0.4.0","interfaces":[{"name":"eth0","sandbox":"%s"}],"ips":[{"version":"4","address":"10.253.%d.%d/32","interface":0}]}\n' "$CNI_NETNS" $(( (h/256) % 256 )) $(( h % 254 + 1 ))
  fi ;;
DEL)
  ip link del $HV 2>/dev/null
  for d in $L/*/; do [ "$(cat $d/id 2>/dev/null)" = "$CNI_CONTAINERID" ] && rm -rf $d; done
  exit 0 ;;
VERSION) echo '{"cniVersion":"0.4.0","supportedVersions":["0.3.0","0.3.1","0.4.0"]}' ;;
esac
EOF
chmod +x $K/cni/bin/pdm-net
rm -f $K/cni/bin/noop-eth0 $K/cni/net.d/10-none.conflist
echo '{"cniVersion":"0.4.0","name":"pdm-net","plugins":[{"type":"pdm-net"}]}' > $K/cni/net.d/10-pdm-net.conflist
printf '%s\n' ${POD_NETWORK:-} > $K/cni/networked
if [ -n "${POD_NETWORK:-}" ]; then
  sysctl -qw net.ipv4.ip_forward=1
  DNAT=(PREROUTING -i pdm+ -d 10.0.0.1/32 -p tcp --dport 443 -m comment --comment pdm-k8s -j DNAT --to-destination 127.0.0.1:6443)
  iptables -t nat -C "${DNAT[@]}" 2>/dev/null || iptables -t nat -A "${DNAT[@]}"
fi

# ---- private containerd ----
if [ -n "$GVBIN" ]; then
  # The shim's options: which runsc, its state directory, its flags: no
  # network (a sandbox Pod has only lo anyway). Not oci-seccomp: with it,
  # runsc applies the Pod's RuntimeDefault profile inside the sandbox, where
  # clone3 then fails with EPERM rather than the profile's ENOSYS, so glibc
  # does not fall back to clone and no thread starts ("can't start new
  # thread"). runsc's default ignores the Pod's profile; the runner's own
  # filter is installed inside the sandbox either way.
  cat > $K/containerd/runsc.toml <<EOF
binary_name = "$GVBIN/runsc"
root = "$K/containerd/runsc"
[runsc_config]
  platform = "$RUNSC_PLATFORM"
  network = "none"
EOF
  RUNSC_RUNTIME="    [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runsc]
      runtime_type = \"io.containerd.runsc.v1\"
      [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runsc.options]
        TypeUrl = \"io.containerd.runsc.v1.options\"
        ConfigPath = \"$K/containerd/runsc.toml\""
fi
cat > $K/containerd/config.toml.new <<EOF
version = 2
root = "$K/containerd/root"
state = "$K/containerd/state"
[grpc]
  address = "$SOCK"
[ttrpc]
  address = "$SOCK.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "pdm-k8s.local/pause:1"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  disable_apparmor = true
  # runc cannot lower oom_score_adj in some VMs; this keeps containerd from asking it to
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "$(command -v runc)"
        Root = "$K/containerd/runc"
$RUNSC_RUNTIME
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$K/cni/bin"
    conf_dir = "$K/cni/net.d"
[plugins."io.containerd.internal.v1.opt"]
  path = "$K/containerd/opt"
EOF
if [ -f $K/pids/containerd.pid ] && kill -0 "$(cat $K/pids/containerd.pid)" 2>/dev/null && ! cmp -s $K/containerd/config.toml $K/containerd/config.toml.new; then
  echo "up.sh: the private containerd runs with another configuration (RUNSC=${RUNSC:-unset} now): run .ci/k8s/down.sh first" >&2; exit 1
fi
mv $K/containerd/config.toml.new $K/containerd/config.toml
start() { # name command...: starts it detached unless its recorded PID still runs
  local n=$1; shift
  if [ -f $K/pids/$n.pid ] && kill -0 "$(cat $K/pids/$n.pid)" 2>/dev/null; then return; fi
  setsid nohup "$@" > $K/logs/$n.log 2>&1 < /dev/null & echo $! > $K/pids/$n.pid
}
# containerd finds a runtime's shim (containerd-shim-runsc-v1) on its PATH
start containerd env PATH=${GVBIN:+$GVBIN:}$PATH containerd --config $K/containerd/config.toml
for i in $(seq 100); do [ -S $SOCK ] && break; sleep 0.2; done
[ -S $SOCK ] || { echo "up.sh: containerd did not start, see $K/logs/containerd.log" >&2; exit 1; }
ts "containerd up"
CTR="ctr -a $SOCK -n k8s.io"
$CTR images ls -q | grep -qx 'pdm-k8s.local/pause:1' || $CTR images import $K/pause/pause-oci.tar >/dev/null
for img in $IMAGES; do
  # re-import when the Docker image changed (stamp = its image id)
  id=$(docker image inspect -f '{{.Id}}' "$img" 2>/dev/null) || { echo "up.sh: image $img is not in Docker (build it first)" >&2; exit 1; }
  stamp=$K/images/$(echo "$img" | tr '/:' '__')
  if [ "$(cat $stamp 2>/dev/null)" != "$id" ]; then
    ts "importing $img from Docker"
    docker save "$img" | $CTR images import - >/dev/null
    echo "$id" > $stamp
  fi
done
ts "images ready"

# ---- etcd + kube-apiserver ----
start etcd $BIN/etcd --data-dir $K/etcd --name default \
  --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
  --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
  --initial-cluster default=http://127.0.0.1:2380 --unsafe-no-fsync --log-level warn
start apiserver $BIN/kube-apiserver --etcd-servers=http://127.0.0.1:2379 \
  --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port=6443 --endpoint-reconciler-type=none \
  --cert-dir=$K/apiserver-certs --tls-cert-file=$P/apiserver.crt --tls-private-key-file=$P/apiserver.key --client-ca-file=$P/ca.crt \
  --service-account-key-file=$P/sa.pub --service-account-signing-key-file=$P/sa.key --service-account-issuer=https://kubernetes.default.svc \
  --service-cluster-ip-range=10.0.0.0/24 --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
  --kubelet-client-certificate=$P/apiserver-kubelet-client.crt --kubelet-client-key=$P/apiserver-kubelet-client.key \
  --kubelet-certificate-authority=$P/ca.crt --kubelet-preferred-address-types=Hostname --profiling=false
api() { curl -sk --cacert $P/ca.crt --cert $P/admin.crt --key $P/admin.key "$@"; }
for i in $(seq 300); do api -f https://127.0.0.1:6443/readyz >/dev/null 2>&1 && break; sleep 0.5; done
api -f https://127.0.0.1:6443/readyz >/dev/null || { echo "up.sh: kube-apiserver not ready, see $K/logs/apiserver.log" >&2; exit 1; }
ts "apiserver ready"

# ---- kubelet (cgroupfs driver, private containerd) ----
if [ -d /sys/fs/cgroup/memory ]; then   # cgroup v1: the parent must exist in every hierarchy
  for c in cpu cpuacct cpuset memory devices freezer blkio pids systemd; do mkdir -p /sys/fs/cgroup/$c/$CG; done
  cat /sys/fs/cgroup/cpuset/cpuset.cpus > /sys/fs/cgroup/cpuset/$CG/cpuset.cpus
  cat /sys/fs/cgroup/cpuset/cpuset.mems > /sys/fs/cgroup/cpuset/$CG/cpuset.mems
else
  mkdir -p /sys/fs/cgroup/$CG
fi
cat > $K/kubelet/config.yaml <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: $P/kubelet-serving.crt
tlsPrivateKeyFile: $P/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $P/ca.crt}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
cgroupRoot: /$CG
failCgroupV1: false
failSwapOn: false
podPidsLimit: $POD_PIDS
containerRuntimeEndpoint: unix://$SOCK
imageServiceEndpoint: unix://$SOCK
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
podLogsDir: $K/podlogs
resolvConf: ""
serializeImagePulls: false
volumePluginDir: $K/kubelet/volume-plugins
EOF
start kubelet $BIN/kubelet --config=$K/kubelet/config.yaml --kubeconfig=$P/kubelet.kubeconfig \
  --root-dir=$K/kubelet/root --hostname-override=$NODE --v=1
for i in $(seq 300); do curl -sf http://127.0.0.1:10248/healthz >/dev/null 2>&1 && break; sleep 0.5; done
curl -sf http://127.0.0.1:10248/healthz >/dev/null || { echo "up.sh: kubelet not healthy, see $K/logs/kubelet.log" >&2; exit 1; }
st=
for i in $(seq 300); do
  st=$(api https://127.0.0.1:6443/api/v1/nodes/$NODE 2>/dev/null | tr -d ' \n' | grep -o '"type":"Ready","status":"[A-Za-z]*"' || true)
  [ "$st" = '"type":"Ready","status":"True"' ] && break; sleep 1
done
[ "$st" = '"type":"Ready","status":"True"' ] || { echo "up.sh: node $NODE not ready (${st:-not registered}), see $K/logs/kubelet.log" >&2; exit 1; }
ts "node $NODE ready"

# No controller-manager: create the sandbox namespace and the default service
# accounts ourselves (ServiceAccount admission wants them).
for ns in $NAMESPACES; do
  api -X POST -H 'Content-Type: application/json' https://127.0.0.1:6443/api/v1/namespaces -d "{\"metadata\":{\"name\":\"$ns\"}}" >/dev/null
done
for ns in default $NAMESPACES; do
  api -X POST -H 'Content-Type: application/json' https://127.0.0.1:6443/api/v1/namespaces/$ns/serviceaccounts -d '{"metadata":{"name":"default"}}' >/dev/null
done
if [ "${CONTROLLERS:-}" = 1 ]; then
  # What applying a Deployment as written needs: the scheduler binds its Pods
  # (and unbound sandbox Pods), the controller-manager makes them from the
  # Deployment and keeps the Service's EndpointSlices.
  KCF=$P/admin.kubeconfig
  start scheduler $BIN/kube-scheduler --kubeconfig=$KCF --authentication-kubeconfig=$KCF --authorization-kubeconfig=$KCF \
    --leader-elect=false --bind-address=127.0.0.1 --secure-port=10259
  start controller-manager $BIN/kube-controller-manager --kubeconfig=$KCF --authentication-kubeconfig=$KCF --authorization-kubeconfig=$KCF \
    --leader-elect=false --bind-address=127.0.0.1 --secure-port=10257 --use-service-account-credentials=false \
    --root-ca-file=$P/ca.crt --service-account-private-key-file=$P/sa.key \
    --controllers=deployment-controller,replicaset-controller,node-lifecycle-controller,endpointslice-controller,serviceaccount-controller,root-ca-certificate-publisher-controller,garbage-collector-controller
  for c in scheduler:10259 controller-manager:10257; do
    for i in $(seq 120); do curl -skf https://127.0.0.1:${c#*:}/healthz >/dev/null 2>&1 && break; sleep 0.5; done
    curl -skf https://127.0.0.1:${c#*:}/healthz >/dev/null || { echo "up.sh: ${c%:*} not healthy, see $K/logs/${c%:*}.log" >&2; exit 1; }
  done
  ts "scheduler and controller-manager up"
fi
if [ -n "$GVBIN" ]; then
  "$BIN/kubectl" --kubeconfig $P/admin.kubeconfig apply -f "$HERE/../../examples/kubernetes/runtimeclass.yaml" >/dev/null
  ts "RuntimeClass gvisor (handler runsc, $GVBIN/runsc, platform $RUNSC_PLATFORM)"
fi
ts "up; binaries in $BIN (kubectl too)"
echo "$P/admin.kubeconfig"
