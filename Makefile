# chargeonce: `make help` lists the targets.

SHELL := /bin/bash
GO ?= go
# The test PostgreSQL that db/dbtest starts when TEST_DATABASE_URL is unset.
TEST_PG_DIR := .data/test-postgres
NPM ?= npm
# The demo checkout (web-demo/): its npm packages, its sources, and the build
# that the server embeds.
WEB := web-demo
WEB_DEPS := $(WEB)/node_modules/.installed
WEB_SRC := $(shell find $(WEB)/src -type f 2>/dev/null) $(WEB)/index.html $(WEB)/playground.html \
	$(WEB)/package.json $(WEB)/package-lock.json $(WEB)/vite.config.ts $(WEB)/tsconfig.json
# The checkout client library (client/, @chargeonce/client): its npm
# packages, its sources, and its build, which the browser tests load as
# published (npm pack).
CLIENT := client
CLIENT_DEPS := $(CLIENT)/node_modules/.installed
CLIENT_SRC := $(shell find $(CLIENT)/src -type f 2>/dev/null) $(CLIENT)/package.json $(CLIENT)/package-lock.json \
	$(CLIENT)/tsconfig.json $(CLIENT)/tsconfig.build.json

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

# run builds, then runs the binary itself: go run exits 1 when it is
# interrupted, whatever the program does, so a Ctrl-C would fail make.
.PHONY: run
run: build ## Run the server and the demo checkout on :8080 (a project-local PostgreSQL under .data/ unless DATABASE_URL is set); Ctrl-C stops it
	./bin/chargeonce serve

.PHONY: build
build: web ## Build the server binary, with the demo checkout, into bin/chargeonce
	$(GO) build -o bin/chargeonce .

# Jaeger, the tracing backend of make trace and of the tracing system test:
# built from its tools module, whose dependencies stay out of chargeonce's
# (several minutes the first time).
bin/jaeger: tools/jaeger/go.mod tools/jaeger/go.sum
	cd tools/jaeger && $(GO) build -o ../../bin/jaeger github.com/jaegertracing/jaeger/cmd/jaeger

.PHONY: trace
trace: build lab bin/jaeger ## Run the server (as make run) exporting its traces to Jaeger's all-in-one on loopback; prints the query API's address; Ctrl-C stops both
	./bin/lab trace

.PHONY: web
web: client $(WEB)/dist/index.html ## Build the client library and the demo checkout (web-demo/dist) when missing or stale (needs Node 20+)

.PHONY: client
client: $(CLIENT)/dist/index.js ## Build @chargeonce/client into client/dist when missing or stale

$(CLIENT_DEPS): $(CLIENT)/package.json $(CLIENT)/package-lock.json
	cd $(CLIENT) && $(NPM) ci --no-audit --no-fund
	@touch $@

$(CLIENT)/dist/index.js: $(CLIENT_DEPS) $(CLIENT_SRC)
	cd $(CLIENT) && $(NPM) run build

.PHONY: check-client
check-client: client ## The client library's checks: no import circle in src/, no bare import in dist/, API.md declares exactly what each entry exports, the size budgets, publint and attw on the packed tarball
	cd $(CLIENT) && $(NPM) run check:cycles && $(NPM) run check:imports && $(NPM) run check:api && $(NPM) run size && $(NPM) run size:table -- --check && $(NPM) run check:pack

$(WEB_DEPS): $(WEB)/package.json $(WEB)/package-lock.json
	cd $(WEB) && $(NPM) ci --no-audit --no-fund
	@touch $@

$(WEB)/dist/index.html: $(WEB_DEPS) $(WEB_SRC)
	cd $(WEB) && $(NPM) run build

.PHONY: test
test: web bin/jaeger ## Build the demo, then run every test: Go with -race against a real PostgreSQL (its own, unless TEST_DATABASE_URL is set), then test-web
	@status=0; $(GO) test -race -count=1 ./... || status=$$?; \
	if [ -z "$$TEST_DATABASE_URL" ]; then $(GO) run . localdb stop $(TEST_PG_DIR) || true; fi; \
	exit $$status
	@$(MAKE) --no-print-directory test-web

.PHONY: test-fast
test-fast: ## The inner loop: go test -short ./..., which skips the tests of real processes (systest/, lab/)
	$(GO) test -short ./...

.PHONY: test-web
test-web: web ## The client library's unit, browser, end-to-end and Node tests (the last two against the real server), then the demo's unit and browser tests (headless Chromium; skipped without it, except under CI=true)
	cd $(CLIENT) && $(NPM) test && $(NPM) run test:browser && $(NPM) run test:e2e && $(NPM) run test:node-e2e
	cd $(WEB) && $(NPM) test
	cd $(WEB) && $(NPM) run test:e2e

.PHONY: generate
generate: $(CLIENT_DEPS) ## Rebuild generated code (gqlgen, sqlc, the clients' GraphQL operations for the library and the Go client, the error codes the clients retry)
	$(GO) tool gqlgen generate
	CGO_ENABLED=0 $(GO) tool sqlc generate
	$(GO) tool genqlient internal/apiclient/genqlient.yaml
	$(GO) run ./internal/errorcodegen
	cd $(CLIENT) && $(NPM) run codegen

GENERATED := graph sqlc cardsim/internal/sqlc internal/apiclient $(CLIENT)/src/generated

.PHONY: check-generated
check-generated: generate ## Fail when committed generated code is stale
	@if [ -n "$$(git status --porcelain -- $(GENERATED))" ]; then \
		echo "generated code is stale; run 'make generate' and commit:"; git status --porcelain -- $(GENERATED); git --no-pager diff --stat -- $(GENERATED); exit 1; \
	fi

.PHONY: lint
lint: ## go vet, gofmt, staticcheck, and internal/lint: no build output tracked, sqlc only in stores, no Markdown link that leads nowhere
	$(GO) run ./internal/lint
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) tool staticcheck ./...

# pg_auto_failover, from Debian, when pg_autoctl is missing: what .ci/run
# installs on a fresh machine, and what make cluster and make chaos need.
PG_AUTO_FAILOVER_PACKAGES := postgresql-15-auto-failover pg-auto-failover-cli

.PHONY: pg-auto-failover
pg-auto-failover: ## Install Debian's pg_auto_failover (apt-get, as root) when pg_autoctl is missing
	@if ! command -v pg_autoctl >/dev/null; then \
		echo "pg_auto_failover missing: installing Debian's $(PG_AUTO_FAILOVER_PACKAGES)"; \
		if [ "$$(id -u)" -ne 0 ]; then echo "run as root, or: sudo apt-get install $(PG_AUTO_FAILOVER_PACKAGES)"; exit 1; fi; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(PG_AUTO_FAILOVER_PACKAGES) >/dev/null; \
	fi

.PHONY: lab
lab: ## Build the lab (the local cluster and the chaos run) into bin/lab
	$(GO) build -o bin/lab ./lab

.PHONY: cluster
cluster: build lab pg-auto-failover ## Start a local cluster in the background: a pg_auto_failover formation, 3 NATS nodes, 3 instances (:8081-8083), the receipts consumer; prints how to kill each part
	./bin/lab cluster up

.PHONY: cluster-down
cluster-down: lab ## Stop the cluster that make cluster started
	./bin/lab cluster down

.PHONY: chaos
chaos: build lab pg-auto-failover ## The chaos run (about 2 min): load on a fresh cluster while the primary, a NATS node and an instance are killed; checks nothing is lost or doubled; writes lab/chaos/results/ and the figures in docs/beyond-one-machine.md
	./bin/lab chaos -out lab/chaos/results -readme docs/beyond-one-machine.md

.PHONY: door
door: build lab ## The public door's attacks (SECURITY.md, rows 1-8), each on a server of its own: what each made the server do (about 3 min; DOOR_BINARY=PATH to measure another binary)
	./bin/lab door -binary $(or $(DOOR_BINARY),bin/chargeonce)

# The build `make bench` compares fresh keys and replays with, both
# servers up at once (-baseline): the one before the levers of issue 36
# (its schema and its request path), with the minimal exactly-once ceiling.
BENCH_BASELINE ?= 09a39d9

.PHONY: bench
bench: ## The end-to-end benchmark (about 16 min): its own PostgreSQL, the real server, vegeta and pgbench, and this build against BENCH_BASELINE; writes bench/results/ and the latest run in docs/performance.md (go run ./bench -h: -only, -profile, -waldump, -statements)
	$(GO) run ./bench -baseline $(BENCH_BASELINE)

.PHONY: bench-smoke
bench-smoke: ## The end-to-end benchmark in short (under a minute, no targets), into bench/results/smoke/
	$(GO) run ./bench -smoke

.PHONY: bench-go
bench-go: ## The go test benchmarks of the hot functions (a first charge against a replay, on a real PostgreSQL), for benchstat
	@status=0; $(GO) test -run '^$$' -bench . -benchmem ./... || status=$$?; \
	if [ -z "$$TEST_DATABASE_URL" ]; then $(GO) run . localdb stop $(TEST_PG_DIR) || true; fi; \
	exit $$status

# The fuzz targets, as package:Target, and how long `make fuzz` runs each.
FUZZ_TARGETS := ./payment:FuzzValidateKey ./payment:FuzzChargeInputValidate ./payment:FuzzFingerprint \
	./graph:FuzzDecodeRequest ./graph:FuzzChargeCard ./graph:FuzzDocumentLimits
FUZZTIME ?= 1m
# Go minimizes every new interesting input for up to 60s by default, which
# stalls the database-backed FuzzChargeCard for most of a minute's run.
FUZZMINIMIZETIME ?= 10s

.PHONY: fuzz
fuzz: ## Run each fuzz target for FUZZTIME (default 1m), one after another; failing inputs land in testdata/fuzz/
	@status=0; for target in $(FUZZ_TARGETS); do \
		pkg=$${target%%:*}; name=$${target##*:}; \
		echo "== $$name ($$pkg, $(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) $$pkg \
			|| { status=1; failed="$$failed $$name"; }; \
	done; \
	if [ -z "$$TEST_DATABASE_URL" ]; then $(GO) run . localdb stop $(TEST_PG_DIR) || true; fi; \
	if [ $$status -ne 0 ]; then echo "fuzz: failed:$$failed"; fi; \
	exit $$status

.PHONY: clean
clean: ## Stop a running make cluster and the project-local PostgreSQL servers, and delete .data/, bin/ and the demo's build
	-@if [ -f .data/cluster/cluster.json ]; then $(GO) run ./lab cluster down; fi
	-$(GO) run . localdb stop .data/postgres
	-$(GO) run . localdb stop $(TEST_PG_DIR)
	-$(GO) run . localdb stop .data/client-e2e/postgres
	-$(GO) run . localdb stop .data/web-e2e/postgres
	-$(GO) run . localdb stop .data/bench-postgres
	rm -rf .data bin $(CLIENT)/dist
	find $(WEB)/dist -mindepth 1 ! -name .gitkeep -delete
