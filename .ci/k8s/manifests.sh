#!/bin/bash
# Applies examples/kubernetes/ as written to the local node of up.sh, with the
# server image `make server-image` builds (python-docker-mcp-server:latest,
# imported into the node's containerd), after creating the two objects the
# header of server.yaml asks for (the session-key Secret and the issuer's
# public key ConfigMap, from a key pair made here). The node runs the
# scheduler and the controller-manager (CONTROLLERS=1), and the server's
# namespace has a Pod network to the node and the API server (POD_NETWORK);
# sandbox Pods keep lo only, as the example NetworkPolicy keeps them where the
# network plugin enforces it. There is no kube-proxy: the Service's
# EndpointSlice is read, and each replica is called at its Pod address.
#
#  A. the Deployment's two replicas become ready (readiness is /healthz, which
#     asks the API server) from the image as written; the Service selects
#     both; each log names its own instance id.
#  B. a client with a JWT signed by the key whose public half the ConfigMap
#     holds: /livez, /healthz, the protected resource metadata naming
#     server.public_url, a 401 without a token; execute-transient in a
#     sandbox Pod the scheduler bound, which sees no interface but lo; an
#     execute-persistent session started on one replica and continued, with
#     the same MCP session id, on the other.
#  C. the API server stopped: /healthz 503 and /livez 200 on both replicas;
#     started again (up.sh): /healthz 200.
#
# Usage: .ci/k8s/manifests.sh        (root, Docker; KEEP=1 leaves the node up)
set -euo pipefail
cd "$(dirname "$0")/../.."
K=${PDM_K8S_DIR:-/tmp/pdm-k8s}
IMG=python-docker-mcp-server:latest
NS=python-docker-mcp
make server-image GO="${GO:-go}" >/dev/null
docker image inspect "$IMG" >/dev/null
export CONTROLLERS=1 POD_NETWORK=$NS IMAGES="python-docker-mcp-sandbox:latest $IMG"
KC=$(.ci/k8s/up.sh | tail -1)
[ "${KEEP:-}" = 1 ] || trap '.ci/k8s/down.sh' EXIT
BIN=$(.ci/k8s/build.sh | tail -1)
export KUBECONFIG=$KC
kc() { "$BIN/kubectl" "$@"; }
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
kc -n $NS delete deployment python-docker-mcp --ignore-not-found --wait=true >/dev/null   # a run that stopped half way
kc apply -f examples/kubernetes/

# ---- A: the Deployment as written ----
SEL=app.kubernetes.io/name=python-docker-mcp,app.kubernetes.io/component=server
if kc -n $NS rollout status deployment/python-docker-mcp --timeout=300s; then
  pass "A: the Deployment's replicas are ready (readiness /healthz)"
else
  fail "A: the Deployment did not become ready"
  kc -n $NS get pods -o wide || true
  for p in $(kc -n $NS get pods -l $SEL -o name); do kc -n $NS describe $p | sed -n '/^Events:/,$p' | tail -12; kc -n $NS logs $p --tail 20 || true; done
fi
read -r -a PODS <<< "$(kc -n $NS get pods -l $SEL --field-selector=status.phase=Running -o jsonpath='{.items[*].metadata.name}')"
read -r -a IPS <<< "$(kc -n $NS get pods -l $SEL --field-selector=status.phase=Running -o jsonpath='{.items[*].status.podIP}')"
echo "A: replicas ${PODS[*]:-none} at ${IPS[*]:-none}"
[ ${#PODS[@]} = 2 ] && pass "A: two replicas run" || fail "A: ${#PODS[@]} replicas run, want 2"
[ ${#PODS[@]} -ge 1 ] || { echo "manifests.sh: no replica runs; $ok passed, $((bad + 1)) failed"; exit 1; }
imgs=$(kc -n $NS get pods -l $SEL -o jsonpath='{.items[*].status.containerStatuses[0].image}')
case " $imgs " in *" docker.io/library/$IMG "*|*" $IMG "*) pass "A: the replicas run $IMG ($imgs)" ;; *) fail "A: the replicas run $imgs" ;; esac
eps=$(kc -n $NS get endpointslices -l kubernetes.io/service-name=python-docker-mcp \
  -o jsonpath='{range .items[*].endpoints[?(@.conditions.ready==true)]}{.addresses[0]}{" "}{end}')
n=0; for ip in "${IPS[@]}"; do case " $eps " in *" $ip "*) n=$((n + 1)) ;; esac; done
[ $n = ${#IPS[@]} ] && pass "A: the Service's EndpointSlice holds every replica as ready ($eps)" || fail "A: EndpointSlice ready addresses '$eps', replicas ${IPS[*]}"
ids=
for p in "${PODS[@]}"; do
  id=$(kc -n $NS logs $p | grep -o 'server started.*instance=[0-9a-f]\{16\}' | grep -o '[0-9a-f]\{16\}$' | head -1 || true)
  [ -n "$id" ] && pass "A: $p's log names its instance id $id" || fail "A: no instance id in $p's log"
  ids="$ids $id"
done
[ $(echo $ids | tr ' ' '\n' | sort -u | wc -l) = ${#PODS[@]} ] && pass "A: the instance ids differ" || fail "A: instance ids$ids"
echo "A: ${PODS[0]}'s log:"; kc -n $NS logs ${PODS[0]} | sed 's/^/  | /' | head -20

# ---- B: a client with a JWT, at each replica's Pod address ----
U1=http://${IPS[0]}:8000 U2=http://${IPS[1]:-${IPS[0]}}:8000
[ "$(curl -s -o /dev/null -w '%{http_code}' $U1/livez)" = 200 ] && pass "B: /livez 200" || fail "B: /livez"
[ "$(curl -s -o /dev/null -w '%{http_code}' $U1/healthz)" = 200 ] && pass "B: /healthz 200 with the API server up" || fail "B: /healthz"
meta=$(curl -s $U1/.well-known/oauth-protected-resource/mcp)
echo "$meta" | grep -q '"resource":"https://mcp.example.com/mcp"' && pass "B: the metadata names server.public_url" || fail "B: metadata $meta"
hdr=$(curl -s -o /dev/null -D - -X POST $U1/mcp -H 'Content-Type: application/json' -d '{}' | tr -d '\r')
echo "$hdr" | grep -qi '^www-authenticate:.*https://mcp.example.com/.well-known/oauth-protected-resource/mcp' && pass "B: 401 without a token, challenge under public_url" || fail "B: challenge: $hdr"
b64url() { openssl base64 -A | tr '+/' '-_' | tr -d '='; }
now=$(date +%s)
h=$(printf '{"alg":"RS256","typ":"JWT"}' | b64url)
p=$(printf '{"iss":"https://issuer.example.com/","aud":"mcp-pyexec","sub":"manifests-test","iat":%d,"exp":%d,"scope":"python:execute python:sessions"}' $now $((now + 600)) | b64url)
sig=$(printf %s "$h.$p" | openssl dgst -sha256 -sign $W/issuer.key | b64url)
TOK="$h.$p.$sig"
mcp() { local u=$1; shift; curl -s -X POST $u/mcp -H "Authorization: Bearer $TOK" -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' "$@"; }
# result FIELD: the tools/call reply (JSON or one SSE event) on stdin; prints the
# structured result's FIELD (text: the text content, where the streams are),
# or the whole reply when it has none
result() { python3 -c '
import json, sys
raw = sys.stdin.read()
body = raw
for line in raw.splitlines():
    if line.startswith("data:"):
        body = line[5:]
try:
    r = json.loads(body)["result"]
    if sys.argv[1] == "text":
        print("\n".join(c["text"] for c in r["content"] if c["type"] == "text"))
    else:
        print(r["structuredContent"][sys.argv[1]])
except Exception:
    print("no " + sys.argv[1] + " in: " + raw[:600])' "$1"; }
call() { # url tool arguments-json
  mcp $1 -H "Mcp-Session-Id: $SID" --max-time 300 -d '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"'$2'","arguments":'"$3"'}}'
}
init=$(mcp $U1 -D $W/init.h -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"manifests.sh","version":"1"}}}')
SID=$(tr -d '\r' < $W/init.h | awk -F': ' 'tolower($1)=="mcp-session-id"{print $2}')
echo "$init" | grep -q '"serverInfo"' && pass "B: initialize with a JWT verified against the mounted public key" || fail "B: initialize: $init"
mcp $U1 -H "Mcp-Session-Id: $SID" -d '{"jsonrpc":"2.0","method":"notifications/initialized"}' >/dev/null
t0=$(date +%s.%N)
out=$(call $U1 execute-transient '{"code":"print(6*7)\nprint(sorted(l.split(\":\")[0].strip() for l in open(\"/proc/net/dev\").readlines()[2:]))"}')
echo "B: execute-transient took $(python3 -c "import time; print(round(time.time()-$t0, 1))") s"
st=$(echo "$out" | result status) so=$(echo "$out" | result text)
[ "$st" = ok ] && echo "$so" | grep -qx 42 && pass "B: execute-transient ran in a sandbox Pod" || fail "B: execute-transient: status $st, stdout $so"
echo "$so" | grep -qx "\['lo'\]" && pass "B: the sandbox Pod sees no interface but lo" || fail "B: the sandbox's interfaces: $so"
bound=$(kc -n python-docker-mcp-sandboxes get pods -o jsonpath='{.items[*].spec.nodeName}')
[ -n "$bound" ] && pass "B: the scheduler bound the sandbox Pods (nodes: $bound)" || fail "B: no sandbox Pod bound to a node"
out=$(call $U1 execute-persistent '{"code":"x = 41"}')
sess=$(echo "$out" | result session_id)
[ "$(echo "$out" | result status)" = ok ] && pass "B: execute-persistent started session $sess on ${PODS[0]}" || fail "B: execute-persistent on ${PODS[0]}: $sess"
out=$(call $U2 execute-persistent '{"session_id":"'$sess'","code":"print(x + 1)"}')
so=$(echo "$out" | result text)
echo "$so" | grep -qx 42 && pass "B: the session continued on ${PODS[1]:-the same replica} with the same MCP session id" || fail "B: the session on ${PODS[1]:-?}: $so"
call $U2 cleanup-session '{"session_id":"'$sess'"}' >/dev/null

# ---- C: the API server stops: /healthz 503 (the replica leaves the Service), /livez stays 200 ----
AP=$(cat $K/pids/apiserver.pid)
kill $AP   # it drains for up to a minute: KILL it after 10 s (up.sh starts it only once it is gone)
for i in $(seq 20); do kill -0 $AP 2>/dev/null || break; sleep 0.5; done
kill -9 $AP 2>/dev/null || true
for i in $(seq 20); do kill -0 $AP 2>/dev/null || break; sleep 0.5; done
for u in $U1 $U2; do
  hz=$(curl -s -w ' %{http_code}' --max-time 10 $u/healthz | tr -d '\n'); lz=$(curl -s -o /dev/null -w '%{http_code}' $u/livez)
  [ "${hz##* }" = 503 ] && pass "C: $u/healthz with the API server stopped: $hz" || fail "C: $u/healthz with the API server stopped: $hz"
  [ "$lz" = 200 ] && pass "C: $u/livez with the API server stopped: 200" || fail "C: $u/livez with the API server stopped: $lz"
done
.ci/k8s/up.sh >/dev/null 2>&1
for i in $(seq 60); do [ "$(curl -s -o /dev/null -w '%{http_code}' $U1/healthz)" = 200 ] && break; sleep 1; done
[ "$(curl -s -o /dev/null -w '%{http_code}' $U1/healthz)" = 200 ] && pass "C: /healthz 200 again once the API server is back" || fail "C: /healthz after the API server came back"
kc -n $NS logs ${PODS[0]} | grep -E 'healthz' | sed 's/^/  | /'
for p in "${PODS[@]}"; do kc -n $NS logs -f $p > $W/$p.log 2>&1 & done   # their last words, for a failure below
kc delete -f examples/kubernetes/server.yaml --cascade=foreground --wait=true --timeout=90s >/dev/null || true
for i in $(seq 60); do
  left=$(kc -n python-docker-mcp-sandboxes get pods -o name | wc -l)
  [ "$left" = 0 ] && break; sleep 1
done
sleep 1   # the logs' last lines reach the files
grep -h -E 'stopping|stopped|lost track|removing sandboxes' $W/*.log | sed 's/^/  | /' || true
if [ "$left" = 0 ]; then
  pass "the replicas removed their sandbox Pods when they stopped"
else
  fail "$left sandbox Pods left after the replicas stopped"
  kc -n python-docker-mcp-sandboxes get pods -L python-docker-mcp.instance,python-docker-mcp.kind
  for p in "${PODS[@]}"; do echo "$p's log from its stop:"; grep -n -A40 -i 'shutting\|signal\|stopping' $W/$p.log | tail -40 | sed 's/^/  | /'; done
fi
echo "manifests.sh: $ok passed, $bad failed"
[ $bad = 0 ]
