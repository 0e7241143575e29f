# chargeonce: `make help` lists the targets.

SHELL := /bin/bash
GO ?= go
# The test PostgreSQL that db/dbtest starts when TEST_DATABASE_URL is unset.
TEST_PG_DIR := .data/test-postgres

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

.PHONY: run
run: ## Run the server on :8080 (a project-local PostgreSQL under .data/ unless DATABASE_URL is set)
	$(GO) run .

.PHONY: build
build: ## Build the server binary into bin/chargeonce
	$(GO) build -o bin/chargeonce .

.PHONY: test
test: ## Run every test with -race against a real PostgreSQL (its own, unless TEST_DATABASE_URL is set)
	@status=0; $(GO) test -race -count=1 ./... || status=$$?; \
	if [ -z "$$TEST_DATABASE_URL" ]; then $(GO) run . localdb stop $(TEST_PG_DIR) || true; fi; \
	exit $$status

.PHONY: generate
generate: ## Rebuild generated code (gqlgen, sqlc)
	$(GO) tool gqlgen generate
	CGO_ENABLED=0 $(GO) tool sqlc generate

.PHONY: check-generated
check-generated: generate ## Fail when committed generated code is stale
	@if [ -n "$$(git status --porcelain -- graph sqlc)" ]; then \
		echo "generated code is stale; run 'make generate' and commit:"; git status --porcelain -- graph sqlc; git --no-pager diff --stat -- graph sqlc; exit 1; \
	fi

.PHONY: lint
lint: ## go vet, gofmt, and staticcheck when installed
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	@if command -v staticcheck >/dev/null; then staticcheck ./...; else echo "staticcheck not installed; skipped"; fi

.PHONY: bench
bench: ## Run the benchmarks
	$(GO) test -run '^$$' -bench . -benchmem ./...

.PHONY: clean
clean: ## Stop the project-local PostgreSQL servers and delete .data/
	-$(GO) run . localdb stop .data/postgres
	-$(GO) run . localdb stop $(TEST_PG_DIR)
	rm -rf .data bin
