# mneme: long-term memory for LLM agents inside PostgreSQL.
# `make demo` and `make test` start a private PostgreSQL under .mneme/ unless
# DATABASE_URL points at a server already.

GO       ?= go
BIN      := bin/mneme
# The lab: benchmarks, evaluations, soak, private clusters (not in the daemon).
LAB      := bin/mneme-lab
# The binary's semantic version is sidecar/version.Release; a development
# build appends its commit (COMMIT=, empty, for a release build).
COMMIT   ?= $(shell git describe --always --dirty --exclude '*' 2>/dev/null)
PKGS     := ./...
TESTFLAGS ?= -count=1 -timeout 45m
export GOFLAGS ?= -buildvcs=false

.PHONY: help build demo run psql test bench eval lint clean stop deps

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{gsub(/\$$\$$/, "$$", $$2); printf "  %-12s %s\n", $$1, $$2}'

deps: ## download the Go modules the build needs (PostgreSQL is installed when missing by mneme-lab cluster, which make demo and make test run)
	@command -v $(GO) >/dev/null || { echo "Go 1.21 or newer is required (it fetches the 1.26 toolchain go.mod names)"; exit 1; }
	$(GO) mod download

build: deps ## build bin/mneme (the daemon) and bin/mneme-lab (benchmarks, evaluations, soak, private clusters)
	$(GO) build -ldflags "-X github.com/mneme-memory/mneme/sidecar/version.Commit=$(COMMIT)" -o $(BIN) ./sidecar
	$(GO) build -ldflags "-X github.com/mneme-memory/mneme/sidecar/version.Commit=$(COMMIT)" -o $(LAB) ./sidecar/cmd/mneme-lab

demo: build ## private cluster, migrate, sample conversation, retrieval, review, FSRS changes
	./scripts/demo.sh

run: build ## run the sidecar daemon against $$DATABASE_URL (or the demo cluster)
	@if [ -z "$$DATABASE_URL" ]; then export DATABASE_URL=$$($(LAB) cluster url --dir .mneme/pg); fi; \
	$(BIN) migrate && exec $(BIN) run

psql: build ## psql on $$DATABASE_URL (or the demo cluster, started if needed)
	@if [ -z "$$DATABASE_URL" ]; then export DATABASE_URL=$$($(LAB) cluster url --dir .mneme/pg); fi; \
	exec $(BIN) psql

test: build ## all tests on every deployment this machine can run: array, pgvector, Citus (scripts/test.sh; MNEME_EXTENSION_SOURCES=DIR builds the extensions)
	GO="$(GO)" TESTFLAGS="$(TESTFLAGS)" PKGS="$(PKGS)" ./scripts/test.sh

bench: build ## benchmarks: retrieval and event latency
	./scripts/with-test-db.sh ./scripts/bench.sh

eval: build ## LoCoMo evaluation (dev split, offline) and the feedback simulation
	./scripts/with-test-db.sh ./scripts/eval.sh

lint: ## go vet, gofmt, go.mod/go.sum tidy, released goose migrations unchanged, no test code and no lab package in the daemon
	$(GO) vet $(PKGS)
	@out=$$(gofmt -l sidecar tests sql goose client scripts); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }
	@$(GO) test -count=1 ./goose || { echo "a released goose migration changed (goose/frozen.sha256)"; exit 1; }
	@out=$$($(GO) list -deps ./sidecar | grep -E '/llmtest$$|/dbtest$$|^testing$$|^net/http/httptest$$'); if [ -n "$$out" ]; then echo "mneme links test-only packages:"; echo "$$out"; exit 1; fi
	@out=$$($(GO) list -deps ./sidecar | grep -E '/sidecar/(bench|eval|soak|scratch|cluster)(/|$$)'); if [ -n "$$out" ]; then echo "mneme (the daemon) links lab packages; they belong to mneme-lab (sidecar/cmd/mneme-lab):"; echo "$$out"; exit 1; fi

stop: ## stop the private clusters
	-@[ -x $(LAB) ] && $(LAB) cluster stop --dir .mneme/pg 2>/dev/null; true
	-@[ -x $(LAB) ] && $(LAB) cluster stop --dir .mneme/test 2>/dev/null; true

clean: stop ## remove build output and the private clusters
	rm -rf bin .mneme
