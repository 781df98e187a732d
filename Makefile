# Queen Serverless. `make help` lists the targets.

SHELL      := /bin/bash
GO         ?= go
BUILD_DIR  := build
FUNCTIONS  := push pop ack dlq admin reaper dispatch migrate
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20

.DEFAULT_GOAL := help

.PHONY: help
help: ## show this help
	@# Names padded to the longest one; descriptions wrapped to the terminal
	@# (80 columns when there is none), indented under their first line.
	@awk -v cols="$$(tput cols 2>/dev/null || echo 80)" 'BEGIN { FS = ":.*## " } \
	  /^[a-zA-Z_-]+:.*## / { n++; name[n] = $$1; text[n] = $$2; if (length($$1) > w) w = length($$1) } \
	  END { indent = w + 9; if (cols < indent + 30) cols = indent + 30; if (cols > 120) cols = 120; \
	    for (i = 1; i <= n; i++) { \
	      line = sprintf("  \033[36mmake %-" w "s\033[0m  ", name[i]); len = indent; \
	      k = split(text[i], word, " "); \
	      for (j = 1; j <= k; j++) { \
	        if (len > indent && len + 1 + length(word[j]) > cols) { line = line "\n" sprintf("%" indent "s", ""); len = indent } \
	        else if (len > indent) { line = line " "; len++ } \
	        line = line word[j]; len += length(word[j]) } \
	      print line } }' $(MAKEFILE_LIST)

.PHONY: test
test: lint ## run every test (starts its own Postgres unless DATABASE_URL is set)
	@# The Go tests and the stack's tests side by side: both spend much of their
	@# time waiting (on Postgres, timers, the Lambda emulator), not computing.
	$(MAKE) --no-print-directory -j2 --output-sync=target test-go test-infra

# The longest-running packages first, so that they do not start last.
SLOW_TESTS := ./internal/soak ./core/pgstore

.PHONY: test-go
test-go: ## Go tests of core, functions and cmd against real Postgres, with the race detector (four packages at a time: most of their time is waiting)
	$(GO) test -race -count=1 -p 4 $(SLOW_TESTS) ./...

.PHONY: test-short
test-short: ## the quick lane (about a minute on a 2-core machine, a minute and a half on the first run): smaller random runs, no benchmark smoke test, no infra; four packages at a time
	$(GO) test -short -count=1 -p 4 ./...

.PHONY: test-infra
test-infra: ## the CDK stack's template assertions (infra/ is its own module)
	cd infra && $(GO) vet ./... && $(GO) test -count=1 ./...

.PHONY: check-model
check-model: ## the reference model's tests and 2,500 random sequences against it from a fresh seed (QUEEN_MODEL_SEED, QUEEN_MODEL_SEQUENCES)
	$(GO) test -count=1 ./internal/refmodel
	set -o pipefail; QUEEN_MODEL_SEED=$${QUEEN_MODEL_SEED:-$$(date +%s)} QUEEN_MODEL_SEQUENCES=$${QUEEN_MODEL_SEQUENCES:-2500} \
	  $(GO) test -count=1 -timeout 60m -v -run '^TestDifferential$$' ./core/pgstore | grep --line-buffered -v '^=== '

FUZZTIME ?= 30s
FUZZ_TARGETS := core/httpapi:FuzzPush core/httpapi:FuzzPopQuery core/httpapi:FuzzAck core/httpapi:FuzzAckBatch \
  core/httpapi:FuzzTransaction core/httpapi:FuzzConfigure core/httpapi:FuzzSeek \
  core/ingest:FuzzSQSRecord core/ingest:FuzzSNSMessage core/ingest:FuzzEventBridgeDetail core/ingest:FuzzDirect

.PHONY: fuzz
fuzz: ## every request and event decoder's fuzz target for FUZZTIME each (default 30s); crashers land in testdata/fuzz (make test runs them)
	@for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; name=$${t##*:}; echo "== $$pkg $$name"; \
	  $(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) ./$$pkg || exit 1; \
	done

.PHONY: console-screenshots
console-screenshots: ## the README's console pictures, docs/console/*.png, from the browser test (needs chromium)
	QUEEN_CONSOLE_SCREENSHOTS=$(CURDIR)/docs/console $(GO) test -count=1 -run '^TestConsoleInBrowser$$' ./cmd/queen

CHAOS_DURATION ?= 3m

.PHONY: chaos
chaos: ## producers and consumers through queen serve and PgBouncer while the postmaster is killed, PgBouncer restarted and the database stalled, for CHAOS_DURATION (default 3m; CHAOS_SEED replays); fails if anything acknowledged is lost
	$(GO) run ./cmd/queen chaos -duration $(CHAOS_DURATION) $(if $(CHAOS_SEED),-seed $(CHAOS_SEED))

SOAK_DURATION ?= 30m

.PHONY: soak
soak: ## steady mixed traffic at a share of the measured P10 rate with short retention and a long read transaction now and then, for SOAK_DURATION (default 30m; SOAK_SEED replays); results in soak-results/; fails unless sizes plateau, late p99 ≤ 1.5× early, the reaper catches up after each long transaction and nothing acknowledged is lost
	$(GO) run ./cmd/queen soak -duration $(SOAK_DURATION) $(if $(SOAK_SEED),-seed $(SOAK_SEED))

.PHONY: synth
synth: ## CloudFormation template, offline, in infra/cdk.out (uses build/lambda if built, else placeholders)
	infra/synth.sh

.PHONY: bench
bench: ## the benchmark workloads (docs/benchmarks.md); results in bench-results/
	$(GO) run ./cmd/queen bench

.PHONY: lint
lint: ## go vet (here and for macOS laptops), gofmt and staticcheck
	$(GO) vet ./...
	GOOS=darwin $(GO) vet ./cmd/queen
	$(GO) tool staticcheck ./...
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# Lambda bootstraps: static, stripped, linux/arm64 (provided.al2023), without
# the legacy RPC mode.
LAMBDA_DIR   := $(BUILD_DIR)/lambda
LAMBDA_FLAGS := -trimpath -ldflags "-s -w" -tags lambda.norpc

.PHONY: build
build: build-lambda build-local ## Lambda bootstraps (build/lambda/<fn>/bootstrap, linux/arm64) and build/queen

.PHONY: build-lambda
build-lambda: ## only the Lambda bootstraps, with their sizes
	@for fn in $(FUNCTIONS); do \
	  CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build $(LAMBDA_FLAGS) -o $(LAMBDA_DIR)/$$fn/bootstrap ./functions/$$fn || exit 1; \
	  printf '  %-34s %6.2f MB\n' "$(LAMBDA_DIR)/$$fn/bootstrap" "$$(stat -c %s $(LAMBDA_DIR)/$$fn/bootstrap | awk '{print $$1/1000000}')"; \
	done

.PHONY: build-local
build-local: ## only the local queen binary, build/queen (the first build takes about half a minute)
	@echo "building $(BUILD_DIR)/queen (the first build takes about half a minute; later ones a second or so)…"
	$(GO) build -trimpath -o $(BUILD_DIR)/queen ./cmd/queen

.PHONY: run
run: build-local ## the local server on :6632 (embedded PostgreSQL in .queen/pgdata unless DATABASE_URL is set)
	@exec ./$(BUILD_DIR)/queen serve

.PHONY: clean
clean: ## remove build output
	rm -rf $(BUILD_DIR)
