# Queen Serverless. `make help` lists the targets.

SHELL      := /bin/bash
GO         ?= go
BUILD_DIR  := build
FUNCTIONS  := push pop ack dlq admin reaper migrate
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20

.DEFAULT_GOAL := help

.PHONY: help
help: ## show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36mmake %-12s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: test
test: lint test-go ## run every test (starts its own Postgres unless DATABASE_URL is set)

.PHONY: test-go
test-go: ## Go tests of core, functions and cmd against real Postgres
	$(GO) test -count=1 ./...

.PHONY: lint
lint: ## go vet and gofmt
	$(GO) vet ./...
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

.PHONY: build
build: ## the local queen binary in build/
	$(GO) build -trimpath -o $(BUILD_DIR)/queen ./cmd/queen

.PHONY: clean
clean: ## remove build output
	rm -rf $(BUILD_DIR)
