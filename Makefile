# The README's commands. `make test` is what CI runs (.ci/run): it installs
# what it needs itself (debootstrap and the sandbox image via `image build`,
# opa as a Go tool) and needs a running Docker daemon.
GO       ?= go
REGO     := rules examples/policy
BIN      := bin/python-docker-mcp

.PHONY: all build serve image server-image test rego gotest bench fuzz test-kubernetes test-kubernetes-manifests

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

gotest:
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 45m ./...

test: image rego gotest

bench:
	$(GO) run ./cmd/python-docker-mcp bench

# The Kubernetes backend against a real single-node cluster (.ci/k8s, root,
# Docker running): not part of `make test`, because the first run builds
# Kubernetes from Go modules (~12 min); later runs take ~30 s to come up.
test-kubernetes:
	GO=$(GO) .ci/k8s/test.sh

# The example manifests applied as written to that node, with the image
# `make server-image` builds (.ci/k8s/manifests.sh says what it checks).
test-kubernetes-manifests:
	GO=$(GO) .ci/k8s/manifests.sh
