# kray's developer entry points. The two that matter most:
#   make run    the local cluster (real kube-apiserver, Kruise and kwok nodes), the operator, a sample RayCluster
#   make test   unit, integration (envtest) and end-to-end tests, building every tool they need
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

include hack/versions.env

ROOT := $(CURDIR)
BIN := $(ROOT)/bin
CONTROLLER_GEN := $(BIN)/controller-gen
KUBECONFIG_LOCAL := $(ROOT)/.local/kubeconfig
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMG ?= kray-operator:$(VERSION)
GO_TEST_FLAGS ?= -count=1

##@ General
.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-18s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Build
.PHONY: build
build: ## Build the operator into bin/kray-operator.
	go build -ldflags "-X main.version=$(VERSION)" -o $(BIN)/kray-operator ./cmd/kray-operator

.PHONY: tools
tools: ## Build the pinned local tools (Kubernetes, etcd, kwok, kruise-manager, controller-gen) into bin/.
	hack/tools.sh all

$(CONTROLLER_GEN):
	hack/tools.sh controller-gen

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate the CRD and the operator's RBAC.
	$(CONTROLLER_GEN) crd:maxDescLen=0,generateEmbeddedObjectMeta=true,allowDangerousTypes=true paths=./api/... output:crd:artifacts:config=config/crd/bases
	go run ./hack/crdbounds config/crd/bases/*.yaml
	cp config/crd/bases/*.yaml charts/kray/crds/
	$(CONTROLLER_GEN) rbac:roleName=kray-operator paths=./internal/controller/... output:rbac:artifacts:config=config/rbac

.PHONY: verify-generated
verify-generated: generate manifests ## Fail when generated files differ from what is committed.
	@git diff --exit-code -- api config/crd config/rbac charts/kray/crds || { echo "generated files are stale: run 'make generate manifests' and commit"; exit 1; }

.PHONY: fmt vet tracked-files
tracked-files: ## Fail when git tracks a compiled executable or a file over 1 MiB (generated CRDs excepted).
	go run ./hack/trackedfiles
fmt: ## Fail when gofmt would change a file.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
vet: ## go vet (test/kuberaytypes is its own module).
	go vet ./...
	cd test/kuberaytypes && go vet ./...

##@ Test
.PHONY: test
test: tools-background tracked-files fmt vet verify-generated ## Run every test: unit, fuzz (bounded), integration, end to end (on both supported Kruise releases and on the oldest supported Kubernetes) and on kind (real kubelets).
	hack/beside.sh kind-e2e -- $(MAKE) --no-print-directory $(TEST_STAGES)

# test's stages after the checks. The kind suite, which mostly waits on real kubelets and Ray's timeouts, runs
# beside them (hack/beside.sh): the local cluster's suites use about one core, and the kind cluster is its own.
TEST_STAGES := test-unit test-fuzz test-integration e2e e2e-kruise-compat e2e-kubernetes-compat

# The tools of test's stages in the order they are needed, built in the background while the stages before
# them leave a core idle; each stage still asks hack/tools.sh for what it needs (and waits for a build under way).
TEST_TOOLS := controller-gen kube-apiserver etcd kube-controller-manager kube-scheduler kwok kruise kueue \
	scheduler-plugins yunikorn cert-manager kruise-compat kube-compat kind-node kruise-daemon \
	kube-network-policies
.PHONY: tools-background
tools-background: ## Start building test's tools in the background at the lowest priority, for as long as make runs.
	hack/tools-background.sh $$PPID $(TEST_TOOLS)

.PHONY: test-unit
test-unit: ## Unit tests (pure logic, golden files, schema parity with KubeRay).
	go test $(GO_TEST_FLAGS) ./api/... ./internal/... ./pkg/... ./cmd/... ./hack/... ./test/install/... ./test/kind/...

FUZZ_TIME ?= 15s
.PHONY: test-fuzz
test-fuzz: ## A bounded fuzz run over validation and every builder (seeded from config/samples), and over the Serve details decoder.
	go test -run='^$$' -fuzz=FuzzBuilders -fuzztime=$(FUZZ_TIME) ./pkg/builder
	go test -run='^$$' -fuzz=FuzzDecodeServeDetails -fuzztime=$(FUZZ_TIME) ./pkg/dashboard

.PHONY: test-integration
test-integration: ## The reconciler against a real kube-apiserver and etcd (envtest).
	KUBEBUILDER_ASSETS="$$(hack/tools.sh envtest-assets)" go test $(GO_TEST_FLAGS) ./test/integration/...

.PHONY: e2e
e2e: build ## End to end on the local cluster: real Kruise, kwok nodes, the operator with its own RBAC.
	hack/e2e.sh

# compat_pass runs hack/e2e.sh with the version override $(1) on a local cluster in $(2), only the tests $(3),
# then stops that cluster whatever the result.
define compat_pass
rc=0; $(1) KRAY_LOCAL_DIR=$(2) E2E_RUN='$(3)' hack/e2e.sh || rc=$$?; \
	  $(1) KRAY_LOCAL_DIR=$(2) hack/cluster.sh down; exit $$rc
endef

# The seeds (pods created once, an evicted head replaced), scaling, upgrades and the quota report, run again on
# the older supported Kruise.
KRUISE_COMPAT_E2E ?= ^(TestTenClustersAtOnceCreateEachPodOnce|TestScaleZeroFiftyZeroFifty|TestEvictedHeadIsReplaced|TestEvictedWorkerIsReplaced|TestSampleBecomesReady|TestScaleGroupUpAndDown|TestRollingUpdateImageInPlace|TestRollingUpdateEnvChangeRecreates|TestUpgradeStrategyRecreate|TestResourceQuotaRefusalIsReported)$$
KRUISE_COMPAT_DIR := $(ROOT)/.local-kruise-compat
.PHONY: e2e-kruise-compat
e2e-kruise-compat: build ## The seeds, scaling and upgrades on Kruise $(KRUISE_COMPAT_VERSION), on a local cluster of its own (the main one is stopped first).
	hack/cluster.sh down
	hack/tools.sh kruise-compat
	$(call compat_pass,KRUISE_VERSION=$(KRUISE_COMPAT_VERSION),$(KRUISE_COMPAT_DIR),$(KRUISE_COMPAT_E2E))

# The same tests on the oldest Kubernetes kray supports (kube-apiserver, kube-controller-manager and kube-scheduler of
# KUBERNETES_COMPAT_VERSION), with the newest Kruise.
KUBERNETES_COMPAT_E2E ?= $(KRUISE_COMPAT_E2E)
KUBERNETES_COMPAT_DIR := $(ROOT)/.local-kubernetes-compat
.PHONY: e2e-kubernetes-compat
e2e-kubernetes-compat: build ## The seeds, scaling and upgrades on Kubernetes $(KUBERNETES_COMPAT_VERSION), on a local cluster of its own (the main one is stopped first).
	hack/cluster.sh down
	hack/tools.sh kube-compat
	$(call compat_pass,KUBERNETES_VERSION=$(KUBERNETES_COMPAT_VERSION),$(KUBERNETES_COMPAT_DIR),$(KUBERNETES_COMPAT_E2E))

##@ Local cluster
.PHONY: cluster-up cluster-down
cluster-up: ## Start the local cluster (etcd, kube-apiserver, controllers, kwok nodes, kruise-manager).
	hack/cluster.sh up
cluster-down: ## Stop exactly what cluster-up started.
	hack/cluster.sh down

.PHONY: install
install: ## Install kray's CRDs into the cluster of $KUBECONFIG.
	kubectl apply --server-side --force-conflicts -f config/crd/bases

.PHONY: run
run: build ## Local cluster + CRDs + operator in the foreground + a sample RayCluster (Ctrl-C stops the operator).
	hack/run.sh

.PHONY: kind-up kind-down
kind-up: ## A kind cluster with real kubelets, Kruise and kray from charts/kray, every image built here (.local/kind/kubeconfig).
	hack/kind.sh up
kind-down: ## Remove exactly what kind-up made (the images stay in ~/.cache/kray/kind/docker as the cache of every clone).
	hack/kind.sh down

##@ Deploy
.PHONY: docker-build
docker-build: ## Build the operator image (needs a Docker engine).
	docker build --build-arg VERSION=$(VERSION) -t $(IMG) .

.PHONY: kind-e2e
kind-e2e: ## The kind suite: a kind cluster with real kubelets (built here, Docker started if needed), Kruise, kray from its chart; removed after.
	hack/kind-e2e.sh

##@ Benchmarks
.PHONY: bench
bench: ## kray vs KubeRay, one after the other on fresh local clusters (.local-bench/); writes docs/benchmarks.md.
	hack/bench/bench.sh $(BENCH_ARGS)

.PHONY: bench-kruise-defaults
bench-kruise-defaults: ## The same with kruise-manager at Kruise's own defaults; writes docs/bench/kruise-defaults/.
	hack/bench/bench.sh -kruise=defaults -out=docs/bench/kruise-defaults -report=docs/bench/kruise-defaults/report.md $(BENCH_ARGS)

.PHONY: bench-start-delay
bench-start-delay: ## The same with pods that take 10 s +- 5 s to start; writes docs/bench/start-delay/.
	hack/bench/bench.sh -pod-start-delay=10s -pod-start-jitter=5s -out=docs/bench/start-delay -report=docs/bench/start-delay/report.md $(BENCH_ARGS)

.PHONY: bench-pod-webhook
bench-pod-webhook: ## The same with Kruise's pod webhooks on, as in a default Kruise install; writes docs/bench/pod-webhook/.
	hack/bench/bench.sh -kruise-pod-webhook -out=docs/bench/pod-webhook -report=docs/bench/pod-webhook/report.md $(BENCH_ARGS)

.PHONY: bench-kind-upgrade
bench-kind-upgrade: ## A busy cluster's workers moved to another big image from the kind registry at a limited rate: KubeRay's Recreate vs kray's three ways; writes docs/bench/kind-upgrade.md.
	hack/bench/kind.sh upgrade

.PHONY: bench-kind-headloss
bench-kind-headloss: ## A head pod lost on real kubelets (kind): how long until every worker is back in the new GCS, kray vs KubeRay; writes docs/bench/kind-headloss.md.
	hack/bench/kind.sh headloss

.PHONY: bench-growth
bench-growth: ## kray vs KubeRay creating 100, 300 and 1,000 clusters, a fresh cluster each; writes docs/bench/growth/ and a section of docs/benchmarks.md.
	hack/bench/bench.sh -growth=100,300,1000 -operators=kray,kuberay $(BENCH_ARGS)
