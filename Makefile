# The README's commands. `make test` is what CI runs (.ci/run): it installs
# what it needs itself (debootstrap and the sandbox image via `image build`,
# opa as a Go tool, runsc for test-gvisor, containerd and Kubernetes for
# test-kubernetes) and needs root, a running Docker daemon and the host's
# python3.
GO       ?= go
REGO     := rules examples/policy
BIN      := bin/python-docker-mcp

.PHONY: all build serve image server-image test rego gotest runner-test test-gvisor bench bench-gvisor fuzz test-kubernetes test-kubernetes-gvisor test-kubernetes-manifests

all: build

build:
	$(GO) build -o $(BIN) ./cmd/python-docker-mcp

serve:
	$(GO) run ./cmd/python-docker-mcp

# Builds the sandbox image offline when missing or stale; a no-op otherwise.
image:
	$(GO) run ./cmd/python-docker-mcp image build

# The server's own container image (python-docker-mcp-server:latest) from a
# static build of this repository; no registry, no base image.
server-image:
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/python-docker-mcp-static ./cmd/python-docker-mcp
	bin/python-docker-mcp-static image build-server

# Policy CI: the same commands operators run on their own Rego.
rego:
	$(GO) tool opa fmt --fail -l $(REGO)
	$(GO) tool opa check --strict $(REGO)
	$(GO) tool opa test --coverage --threshold 90 --format json $(REGO) > /dev/null || \
		{ $(GO) tool opa test -v $(REGO); $(GO) tool opa test --coverage --threshold 90 $(REGO) | tail -3; exit 1; }
	$(GO) tool opa test -v $(REGO)

# go vet and every package's tests; a failure's summary is printed last
# (.ci/gotest.sh keeps the whole output in $GOTEST_LOG).
gotest:
	GO=$(GO) .ci/gotest.sh

# The runner's unit tests: the host's python3 (3.11 or later), no Docker.
# What needs a sandbox is tested end to end by gotest.
runner-test:
	@python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || \
		{ echo "runner-test: needs python3 3.11 or later on the host (apt-get install python3)" >&2; exit 1; }
	python3 -B -m unittest discover -s executor/runner/tests -t executor/runner/tests

test: runner-test image rego gotest test-gvisor test-kubernetes test-kubernetes-gvisor test-kubernetes-manifests

# A chosen set of the executor's Docker tests with every sandbox under
# gVisor's runsc, and the tests of the runtime the policy chooses per call,
# against a private Docker daemon with runsc registered (.ci/gvisor: root,
# Debian's runsc and fuse-overlayfs, installed with apt-get when missing).
# The machine's daemon is only read (the image is copied from it); the
# private one is always torn down. About 4 minutes.
test-gvisor: image
	GO=$(GO) .ci/gvisor/test.sh

bench:
	$(GO) run ./cmd/python-docker-mcp bench

# The bench's cold, pooled and session print(1) under runc and runsc in one
# run, on the private daemon of .ci/gvisor (see test-gvisor).
bench-gvisor: image
	GO=$(GO) .ci/gvisor/bench.sh

# The Kubernetes backend against a real single-node cluster (.ci/k8s, root,
# Docker running): the first run builds Kubernetes from Go modules (6 min on
# a fresh machine on 27 Nov, cached after), later runs take ~30 s to come
# up; the tests take about 2 minutes.
test-kubernetes:
	GO=$(GO) .ci/k8s/test.sh

# The same with gVisor on that node (RUNSC=1: runsc and its containerd shim
# built once from the gvisor.dev/gvisor Go module, .ci/k8s/gvisor.sh) and
# every sandbox Pod under the RuntimeClass gvisor. On a fresh machine the
# gVisor build takes about 5 minutes (cached after) and the tests about 3.5
# (executor/kubernetes/README.md).
test-kubernetes-gvisor:
	RUNSC=1 GO=$(GO) .ci/k8s/test.sh

# The example manifests applied as written to that node, with the image
# `make server-image` builds, the scheduler and controller-manager running
# and a Pod network for the server's namespace only (.ci/k8s/manifests.sh
# says what it checks). About 3 minutes with the node's binaries built.
test-kubernetes-manifests:
	GO=$(GO) .ci/k8s/manifests.sh
