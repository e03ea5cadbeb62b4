#!/bin/bash
# Applies examples/kubernetes/ as written to the local node of up.sh, with the
# server image `make server-image` builds (python-docker-mcp-server:latest,
# imported into the node's containerd), after creating the two objects the
# header of server.yaml asks for (the session-key Secret and the issuer's
# public key ConfigMap, from a key pair made here). Then:
#
#  A. as written: the node runs no controller-manager and no scheduler, so
#     this script does their part for one replica: it creates a Pod from the
#     Deployment's template, bound to the node, and publishes the namespace's
#     kube-root-ca.crt ConfigMap (the controller-manager's job). It reports
#     how the Pod starts. The node's Pods have no network (loopback only), so
#     a server Pod cannot reach the API server at the in-cluster address
#     (the kubernetes Service): it is expected to log its config and stop
#     with "cannot start the executor" naming that address; anything else
#     before that point (image name, mounts, security context, config,
#     probes) is what this phase checks.
#  B. the same template, changed only so that it reaches the API server on
#     this node (hostNetwork, KUBERNETES_SERVICE_HOST=127.0.0.1:6443, a free
#     loopback port, sandboxes bound to node localhost; the namespace's
#     Pod Security level lowered to allow hostNetwork for this Pod and
#     restored after): /livez, /healthz, the protected resource metadata
#     naming server.public_url, a 401 without a token, and one
#     execute-transient call with a JWT signed by the key whose public half
#     the ConfigMap holds.
#  C. the API server stopped: /healthz 503 and /livez 200; started again
#     (up.sh): /healthz 200.
#
# Usage: .ci/k8s/manifests.sh        (root, Docker; KEEP=1 leaves the node up)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
K=${PDM_K8S_DIR:-/tmp/pdm-k8s}
IMG=python-docker-mcp-server:latest
make server-image GO="${GO:-go}" >/dev/null
docker image inspect "$IMG" >/dev/null
KC=$(IMAGES="python-docker-mcp-sandbox:latest $IMG" .ci/k8s/up.sh | tail -1)
[ "${KEEP:-}" = 1 ] || trap '.ci/k8s/down.sh' EXIT
BIN=$(.ci/k8s/build.sh | tail -1)
export KUBECONFIG=$KC
kc() { "$BIN/kubectl" "$@"; }
NS=python-docker-mcp
W=$(mktemp -d)
ok=0 bad=0
pass() { echo "PASS: $*"; ok=$((ok + 1)); }
fail() { echo "FAIL: $*"; bad=$((bad + 1)); }

# ---- what server.yaml's header asks for, then the manifests as written ----
kc apply -f examples/kubernetes/namespace.yaml
openssl genrsa -out $W/issuer.key 2048 2>/dev/null
openssl rsa -in $W/issuer.key -pubout -out $W/issuer-public.pem 2>/dev/null
kc -n $NS delete secret python-docker-mcp-session-key --ignore-not-found >/dev/null
kc -n $NS create secret generic python-docker-mcp-session-key --from-literal=key=$(openssl rand -hex 32)
kc -n $NS delete configmap python-docker-mcp-jwt --ignore-not-found >/dev/null
kc -n $NS create configmap python-docker-mcp-jwt --from-file=public.pem=$W/issuer-public.pem
kc apply -f examples/kubernetes/
# the controller-manager's root CA publisher (the service account token volume needs it)
kc -n $NS create configmap kube-root-ca.crt --from-file=ca.crt=$K/pki/ca.crt --dry-run=client -o yaml | kc apply -f -

# podFromTemplate NAME [python edits]: a Pod from the Deployment's template, bound to the node
podFromTemplate() {
  kc -n $NS get deployment python-docker-mcp -o json | python3 -c '
import json, sys
d = json.load(sys.stdin)
t = d["spec"]["template"]
pod = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": sys.argv[1], "namespace": d["metadata"]["namespace"], "labels": t["metadata"]["labels"]},
       "spec": t["spec"]}
pod["spec"]["nodeName"] = "localhost"
exec(sys.argv[2] if len(sys.argv) > 2 else "")
json.dump(pod, sys.stdout)' "$@"
}
logsOf() { # pod: the current container's log, else the last one's (after a crash)
  kc -n $NS logs $1 2>/dev/null || kc -n $NS logs --previous $1 2>/dev/null || true
}
waitLog() { # pod pattern seconds
  for i in $(seq $3); do
    logsOf $1 | grep -q "$2" && return 0
    sleep 1
  done
  return 1
}

# ---- A: one replica as written ----
kc -n $NS delete pod pdm-manifests-a pdm-manifests-b --ignore-not-found --grace-period=5 >/dev/null   # a run that stopped half way
podFromTemplate pdm-manifests-a | kc create -f -
st=
for i in $(seq 120); do
  st=$(kc -n $NS get pod pdm-manifests-a -o jsonpath='{.status.containerStatuses[0].state}' 2>/dev/null || true)
  case "$st" in *running*|*terminated*|*CrashLoopBackOff*) break ;; *ErrImage*|*ImagePull*|*CreateContainerConfigError*) break ;; esac
  sleep 1
done
echo "A: container state: $st"
case "$st" in *ErrImage*|*ImagePull*) fail "A: the image $IMG of the Deployment is not found on the node" ;; esac
waitLog pdm-manifests-a "config loaded" 60 && pass "A: the server started from $IMG as written and loaded the ConfigMap's config" || fail "A: no 'config loaded' in the log"
sleep 5
echo "A: the server's log (as written, on a node whose Pods have no network):"
logsOf pdm-manifests-a | sed 's/^/  | /' | head -20
kc -n $NS get pod pdm-manifests-a -o jsonpath='{range .status.containerStatuses[*]}A: restarts {.restartCount}, last state {.lastState}, state {.state}{"\n"}{end}' || true
if logsOf pdm-manifests-a | grep -q "cannot start the executor"; then
  echo "A: as expected here: the server Pod cannot reach the API server at its in-cluster address (no pod network on this node)"
fi
echo "A: the Pod's events:"; kc -n $NS describe pod pdm-manifests-a | sed -n '/^Events:/,$p' | sed 's/^/  | /' | tail -12
kc -n $NS delete pod pdm-manifests-a --grace-period=1 --wait=false >/dev/null

# ---- B: the same template, reaching the API server of this node ----
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
kc label ns $NS pod-security.kubernetes.io/enforce=privileged --overwrite >/dev/null
trap '"$BIN/kubectl" label ns '$NS' pod-security.kubernetes.io/enforce=restricted --overwrite >/dev/null; [ "${KEEP:-}" = 1 ] || .ci/k8s/down.sh' EXIT
podFromTemplate pdm-manifests-b "
s = pod['spec']; c = s['containers'][0]
s['hostNetwork'] = True
c['env'] = c.get('env', []) + [{'name': 'KUBERNETES_SERVICE_HOST', 'value': '127.0.0.1'}, {'name': 'KUBERNETES_SERVICE_PORT', 'value': '6443'}]
c['args'] = c['args'] + ['--addr', '127.0.0.1:$PORT', '--set', 'kubernetes.node_name=localhost']
for p in ('readinessProbe', 'livenessProbe'): c[p]['httpGet']['port'] = $PORT
c['ports'] = [{'name': 'http', 'containerPort': $PORT, 'protocol': 'TCP'}]
" | kc create -f -
if waitLog pdm-manifests-b "serving MCP over Streamable HTTP" 120; then
  pass "B: the server serves (log below)"
else
  fail "B: the server did not start serving"
fi
logsOf pdm-manifests-b | sed 's/^/  | /' | head -20
logsOf pdm-manifests-b | grep -q 'server started.*instance=[0-9a-f]\{16\}' && pass "B: the log names the instance id" || fail "B: no instance id in the log"
U=http://127.0.0.1:$PORT
[ "$(curl -s -o /dev/null -w '%{http_code}' $U/livez)" = 200 ] && pass "B: /livez 200" || fail "B: /livez"
[ "$(curl -s -o /dev/null -w '%{http_code}' $U/healthz)" = 200 ] && pass "B: /healthz 200 with the API server up" || fail "B: /healthz"
meta=$(curl -s $U/.well-known/oauth-protected-resource/mcp)
echo "$meta" | grep -q '"resource":"https://mcp.example.com/mcp"' && pass "B: the metadata names server.public_url" || fail "B: metadata $meta"
hdr=$(curl -s -o /dev/null -D - -X POST $U/mcp -H 'Content-Type: application/json' -d '{}' | tr -d '\r')
echo "$hdr" | grep -qi '^www-authenticate:.*https://mcp.example.com/.well-known/oauth-protected-resource/mcp' && pass "B: 401 without a token, challenge under public_url" || fail "B: challenge: $hdr"
b64url() { openssl base64 -A | tr '+/' '-_' | tr -d '='; }
now=$(date +%s)
h=$(printf '{"alg":"RS256","typ":"JWT"}' | b64url)
p=$(printf '{"iss":"https://issuer.example.com/","aud":"mcp-pyexec","sub":"manifests-test","iat":%d,"exp":%d,"scope":"python:execute python:sessions"}' $now $((now + 600)) | b64url)
sig=$(printf %s "$h.$p" | openssl dgst -sha256 -sign $W/issuer.key | b64url)
TOK="$h.$p.$sig"
mcp() { curl -s -X POST $U/mcp -H "Authorization: Bearer $TOK" -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' "$@"; }
init=$(mcp -D $W/init.h -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"manifests.sh","version":"1"}}}')
SID=$(tr -d '\r' < $W/init.h | awk -F': ' 'tolower($1)=="mcp-session-id"{print $2}')
echo "$init" | grep -q '"serverInfo"' && pass "B: initialize with a JWT verified against the mounted public key" || fail "B: initialize: $init"
mcp -H "Mcp-Session-Id: $SID" -d '{"jsonrpc":"2.0","method":"notifications/initialized"}' >/dev/null
t0=$(date +%s.%N)
out=$(mcp -H "Mcp-Session-Id: $SID" --max-time 300 -d '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute-transient","arguments":{"code":"print(6*7)"}}}')
echo "B: execute-transient took $(python3 -c "import time; print(round(time.time()-$t0, 1))") s"
echo "$out" | grep -q '42' && echo "$out" | grep -q '\\"status\\":\\"ok\\"\|"status":"ok"' && pass "B: execute-transient ran in a sandbox Pod" || fail "B: execute-transient: $(echo "$out" | head -c 600)"
echo "B: its reply: $(echo "$out" | grep -o '"structuredContent":{[^}]*' | head -c 300)"
# C: the API server stops: /healthz 503 (the replica leaves the Service), /livez stays 200
AP=$(cat $K/pids/apiserver.pid)
kill $AP   # it drains for up to a minute: KILL it after 10 s (up.sh starts it only once it is gone)
for i in $(seq 20); do kill -0 $AP 2>/dev/null || break; sleep 0.5; done
kill -9 $AP 2>/dev/null || true
for i in $(seq 20); do kill -0 $AP 2>/dev/null || break; sleep 0.5; done
hz=$(curl -s -w ' %{http_code}' --max-time 10 $U/healthz); lz=$(curl -s -o /dev/null -w '%{http_code}' $U/livez)
[ "${hz##* }" = 503 ] && pass "C: /healthz with the API server stopped: $hz" || fail "C: /healthz with the API server stopped: $hz"
[ "$lz" = 200 ] && pass "C: /livez with the API server stopped: 200" || fail "C: /livez with the API server stopped: $lz"
IMAGES="python-docker-mcp-sandbox:latest $IMG" .ci/k8s/up.sh >/dev/null 2>&1
for i in $(seq 60); do [ "$(curl -s -o /dev/null -w '%{http_code}' $U/healthz)" = 200 ] && break; sleep 1; done
[ "$(curl -s -o /dev/null -w '%{http_code}' $U/healthz)" = 200 ] && pass "C: /healthz 200 again once the API server is back" || fail "C: /healthz after the API server came back"
logsOf pdm-manifests-b | grep -E 'healthz' | sed 's/^/  | /'
kc -n $NS delete pod pdm-manifests-b --grace-period=5 >/dev/null
echo "manifests.sh: $ok passed, $bad failed"
[ $bad = 0 ]
