# drover: agentless process management over SSH and WinRM on Temporal.
SHELL := /bin/bash
GO ?= go
# The Temporal server of make cluster and BENCH_TEMPORAL=cluster, built from
# its Go module (the release the pinned CLI's dev server embeds).
TEMPORAL_SERVER_VERSION := v1.29.1
# History shards of make cluster.
CLUSTER_SHARDS ?= 16
BIN := $(CURDIR)/bin
# Most end-to-end tests wait on hosts and the engine, not the CPU: those that
# only wait run side by side.
GOFLAGS_TEST ?= -parallel 8
TEST_TIMEOUT ?= 20m
# What the binaries say they are (starter version, worker --version, the
# worker's Temporal identity).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)
LDFLAGS := -X github.com/drover-sh/drover/internal/version.Version=$(VERSION) -X github.com/drover-sh/drover/internal/version.Commit=$(COMMIT)
# rclone serves S3 for the object-store test (make test-s3).
RCLONE_VERSION := v1.76.0
# Time each fuzz target gets: in make test (CI), and in make chaos.
FUZZTIME ?= 5s
CHAOS_FUZZTIME ?= 30s

.PHONY: all build deps bench-deps cluster-deps cluster bench bench-sim bench-fleet demo test test-unit test-scale test-hostcheck-scale test-s3 chaos fuzz lint fmt vet staticcheck shellcheck clean

all: build

# apt_missing installs, from Debian, the package of each command (CMD:PACKAGE)
# that is missing.
define apt_missing
	@missing=""; \
	for pair in $(1); do \
	  cmd=$${pair%%:*}; command -v $$cmd >/dev/null 2>&1 || [ -x /usr/sbin/$$cmd ] || missing="$$missing $${pair#*:}"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq && apt-get install -y -qq $$missing; \
	fi
endef

## deps: install the Debian packages the test bed needs, when missing
deps:
	$(call apt_missing,sshd:openssh-server sudo:sudo unshare:util-linux shellcheck:shellcheck)

## build: bin/worker, bin/starter and the pinned bin/temporal
build: bin/worker bin/starter bin/temporal

bin/worker: FORCE
	$(GO) build -ldflags "$(LDFLAGS)" -o $@ ./cmd/worker

bin/starter: FORCE
	$(GO) build -ldflags "$(LDFLAGS)" -o $@ ./cmd/starter

# The temporal CLI is pinned (v1.5.1: later versions carry a replace
# directive) in a build module of its own, which also pins a SQLite driver
# that survives a cancelled query (see its tools.go). Built once, then
# rebuilt when the pins change.
bin/temporal: internal/testbed/devserver/go.mod internal/testbed/devserver/go.sum
	cd internal/testbed/devserver && $(GO) build -o $(BIN)/temporal github.com/temporalio/cli/cmd/temporal

# rclone, built from its Go module (Debian's is too old to serve S3): the
# S3-compatible server of make test-s3. Built once (a few minutes), then reused.
bin/rclone:
	GOBIN=$(BIN) $(GO) install github.com/rclone/rclone@$(RCLONE_VERSION)

# The Temporal server and its SQL schema tool, built from the server's Go
# module (go install names them server and sql). Built once (the server takes
# several minutes cold), then reused.
bin/temporal-server:
	@tmp=$$(mktemp -d) && GOBIN=$$tmp $(GO) install go.temporal.io/server/cmd/server@$(TEMPORAL_SERVER_VERSION) && mv $$tmp/server $@ && rmdir $$tmp

bin/temporal-sql-tool:
	@tmp=$$(mktemp -d) && GOBIN=$$tmp $(GO) install go.temporal.io/server/cmd/tools/sql@$(TEMPORAL_SERVER_VERSION) && mv $$tmp/sql $@ && rmdir $$tmp

FORCE:

## demo: dev server with UI, three hosts, a worker, a status request
demo: deps build
	$(GO) run ./internal/testbed/cmd/demo --bin $(BIN) $(if $(DEMO_ONCE),--once,)

## cluster-deps: PostgreSQL from Debian, when missing
cluster-deps:
	@ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || { \
	  echo "installing: postgresql"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq && apt-get install -y -qq postgresql; }

## cluster: a Temporal server on a throwaway PostgreSQL, in the foreground:
## $(CLUSTER_SHARDS) history shards, namespace default with drover's search
## attributes; prints the frontend's address; Ctrl-C stops and removes both
## (CLUSTER_ARGS, e.g. CLUSTER_ARGS="--port 7233 --dir /tmp/cluster")
cluster: cluster-deps bin/temporal-server bin/temporal-sql-tool
	$(GO) run ./internal/testbed/cmd/cluster --shards $(CLUSTER_SHARDS) $(CLUSTER_ARGS)

## test: shellcheck, unit and end-to-end tests against real sshd hosts and a
## real dev server, the fault tests reduced, and every fuzz target for $(FUZZTIME)
test: deps bin/temporal shellcheck
	$(GO) vet ./...
	$(GO) test -race -timeout $(TEST_TIMEOUT) $(GOFLAGS_TEST) ./...
	$(GO) test -tags upgradeprobe -run TestReplay ./workflows/
	GO=$(GO) .ci/fuzz $(FUZZTIME)

## fuzz: every fuzz target for $(FUZZTIME) each
fuzz:
	GO=$(GO) .ci/fuzz $(FUZZTIME)

## chaos: the fault tests at full size, malformed requests, every fuzz target
## for $(CHAOS_FUZZTIME), and the summary table (about 15 minutes)
chaos: deps bin/temporal
	GO=$(GO) CHAOS_FUZZTIME=$(CHAOS_FUZZTIME) .ci/chaos

test-unit:
	$(GO) test -short ./...

lint: fmt vet staticcheck shellcheck

fmt:
	@out=$$(gofmt -l . | grep -v '^vendor/'); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

staticcheck:
	@command -v staticcheck >/dev/null 2>&1 || $(GO) install honnef.co/go/tools/cmd/staticcheck@v0.8.2
	staticcheck ./...

## shellcheck: the sh scripts drover sends to hosts; any finding fails
SCRIPTS_SH := $(wildcard activities/scripts/*.sh transport/scripts/*.sh)
shellcheck: deps
	shellcheck $(SCRIPTS_SH)

clean:
	rm -f bin/worker bin/starter

## test-scale: start, status, restart and stop over 10,000 identities, and the
## supervision cost (DROVER_FANOUT=1000 for a quick run; not part of make test)
test-scale: deps bin/temporal
	$(GO) test -tags scale -timeout 120m -run "TestFanOut|TestSupervisionCost|TestSupervisionServerCost" -v ./internal/e2e

## test-hostcheck-scale: `starter hosts check` timed against `starter status` over
## 1,000 identities on 10 sshd hosts (the 100-identity run is part of make test)
test-hostcheck-scale: deps bin/temporal
	DROVER_HOSTCHECK_IDENTITIES=1000 DROVER_HOSTCHECK_SSHD=10 $(GO) test -count=1 -timeout 40m -run 'TestHostsCheckTimeAgainstStatus' -v ./internal/e2e

## test-s3: the content store on a real S3-compatible server (rclone serve
## s3 on 127.0.0.1): a starter, `starter serve` and a worker share one bucket
## for config push, repair and logs. Not part of make test: bin/rclone takes
## minutes to build; the test itself takes seconds.
test-s3: deps bin/temporal bin/rclone
	DROVER_S3_TEST=1 $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) -run 'TestContentStoreOnS3' -v ./internal/e2e

# What BENCH_TEMPORAL=cluster needs besides the bench's own.
BENCH_CLUSTER_BINS = $(if $(filter cluster,$(BENCH_TEMPORAL)),cluster-deps bin/temporal-server bin/temporal-sql-tool)

## bench-deps: the peers drover is measured against, from Debian, when missing
bench-deps: deps
	$(call apt_missing,parallel-ssh:pssh pdsh:pdsh ansible:ansible ssh:openssh-client monit:monit)

## bench: drover against pssh, pdsh, Ansible and a bare Go fan-out on real
## sshd hosts: status, control ops (start, restart, stop), supervision cost,
## and every op over 200 and 10,000 identities (fleetops)
## (BENCH_HOSTS, BENCH_RUNS, BENCH_PARTS, ...: see bench/cmd/bench; flags in
## BENCH_ARGS, e.g. BENCH_ARGS="--hosts 50 --parts control"). Writes
## bench/results/latest.md, fleetops.md and scaling.png, and the results in
## docs/benchmarks.md. BENCH_TEMPORAL=cluster runs drover's engine on the
## cluster of make cluster (BENCH_CLUSTER_SHARDS history shards, 16) instead
## of the dev server, and writes to bench/results/cluster.
bench: bench-deps bin/starter bin/temporal $(BENCH_CLUSTER_BINS)
	$(GO) run ./bench/cmd/bench $(BENCH_ARGS)

## bench-sim: the fleet-size ops (register, start, status, restart, stop)
## over simulated hosts, answered in-process by the worker: drover's and the
## engine's cost without sshd's, past what one machine's sshd can serve
## (BENCH_FLEETOPS, default 200,10000,50000)
bench-sim: bin/starter bin/temporal
	BENCH_FLEETOPS_HOSTS=simulated BENCH_FLEETOPS=$${BENCH_FLEETOPS:-200,10000,50000} $(GO) run ./bench/cmd/bench --parts fleetops $(BENCH_ARGS)

## bench-fleet: supervision at fleet size: 2,000 sshd hosts x 10 processes
## (about 8 GB), 2 worker processes, then a mass failure and a worker's loss
## (BENCH_FLEET_HOSTS, _PROCS, _WORKERS, _INTERVAL, _QUIET). Rewrites the
## fleet section of docs/benchmarks.md.
bench-fleet: bench-deps bin/worker bin/temporal $(BENCH_CLUSTER_BINS)
	$(GO) run ./bench/cmd/bench --parts fleet
