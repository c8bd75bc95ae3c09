# idem — the two commands: `make run` and `make test`. Both install what they lack.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := run

# Tools live in cargo's bin folder and in .ci/tools (npm); cargo-leptos finds them on PATH.
export PATH := $(HOME)/.cargo/bin:$(CURDIR)/.ci/tools/node_modules/.bin:$(PATH)
export IDEM_TEST_POSTGRES_URL ?= postgres://postgres@127.0.0.1:5432/postgres

.PHONY: run build test tools test-tools check test-rust test-e2e test-python test-typescript contract fuzz bench bench-peers docs docs-images clean-data

## run: build the release and serve the demo on 127.0.0.1:3000 from its own SQLite file
## ./idem-demo.db (sandbox provider, tools, demo people and a simulated agent; passwords
## printed on stdout). Real data lives elsewhere (`idem serve`, ./idem.db by default).
run: build
	./target/release/idem serve --demo --bind 127.0.0.1:3000 --database-url sqlite://idem-demo.db

## build: release server at target/release/idem and the UI in target/site
build: tools
	cargo leptos build --release

tools:
	./.ci/install-tools build

test-tools:
	./.ci/install-tools test

## test: formatting, lints, Rust tests on SQLite and PostgreSQL, browser tests
test: test-tools check test-rust build test-e2e test-python test-typescript

check:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	cargo clippy --lib --no-default-features --features hydrate --target wasm32-unknown-unknown -- -D warnings

# Without PostgreSQL the PostgreSQL half of the suite is skipped, loudly; under CI it fails.
test-rust:
	@if ./.ci/ensure-postgres; then \
	  cargo test --workspace; \
	elif [ "$${CI:-}" = "true" ]; then \
	  echo "FAIL: PostgreSQL is required under CI=true" >&2; exit 1; \
	else \
	  echo "!!! PostgreSQL unavailable: SKIPPING every PostgreSQL test; SQLite only !!!" >&2; \
	  cargo test --workspace -- --skip postgres; \
	fi

test-e2e:
	cd end2end && npx playwright test

## test-python: the Python client (clients/python) against target/release/idem
test-python:
	./.ci/test-python

## test-typescript: the TypeScript client (clients/typescript) against target/release/idem
test-typescript:
	./.ci/test-typescript

## contract: schemathesis against a live release server, as an agent and as an admin,
## from /v1/openapi.json (not part of `make test`: a few minutes, and it explores at random;
## CONTRACT_MAX_EXAMPLES sets how many cases per operation, default 50)
contract: build
	./.ci/contract

# Fuzzing (not part of `make test`): each target for FUZZ_SECONDS, on stable Rust
# (RUSTC_BOOTSTRAP lets cargo-fuzz pass its -Z flags). New inputs it finds are kept in
# tests/fuzz/corpus/; a crash stops it and leaves the input in tests/fuzz/artifacts/.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := canonical_json claim_body

## fuzz: run every cargo-fuzz target for FUZZ_SECONDS (default 60) each
fuzz:
	@command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz
	@for target in $(FUZZ_TARGETS); do \
	  mkdir -p tests/fuzz/corpus/$$target; \
	  echo "fuzzing $$target for $(FUZZ_SECONDS) s"; \
	  RUSTC_BOOTSTRAP=1 cargo fuzz run --fuzz-dir tests/fuzz --sanitizer none $$target \
	    tests/fuzz/corpus/$$target tests/fuzz/seeds/$$target \
	    -- -max_total_time=$(FUZZ_SECONDS) -max_len=8192 || exit 1; \
	done

# Benchmarks (not part of `make test`): idem over HTTP next to its floors (store, pgbench,
# axum), the dashboard with 1 M operations stored, memory and the bundle's size, on SQLite
# and PostgreSQL, in one run; the tables go to bench/results/latest.md and latest.json.
# The release build (server and bundle, as `make build`) comes first: the bundle is measured.
# BENCH_ARGS passes options, e.g. a quick run:
# BENCH_ARGS="--seconds 2 --runs 1 --dashboard-operations 100000".
BENCH_ARGS ?=

## bench: throughput, latency, dashboard and sizes against issue #7's targets (about 20 minutes)
bench: build
	@./.ci/ensure-postgres || echo "!!! PostgreSQL unavailable: the bench will skip its PostgreSQL rows !!!" >&2
	cargo run --release -p idem-bench -- --out bench/results $(BENCH_ARGS)

# The peer comparison (not part of `make test`): Restate, from npm, called with idempotency
# keys next to idem in one run, each by the bench's own client and by wrk (Debian's, an
# external load generator); the tables go to bench/results/peers.md and peers.json.
# PEERS_ARGS passes options, e.g. PEERS_ARGS="--seconds 3 --concurrency 1,16,32,64".
PEERS_ARGS ?= --concurrency 1,16,32,64
RESTATE_DIR := bench/peers/restate

## bench-peers: measure Restate's idempotent calls next to idem's (about 12 minutes; needs Node.js)
# `build` as for `make bench`: a plain `cargo build --release` has other compiler flags than
# cargo-leptos's (type-erased views) and would rebuild every dependency, twice over.
bench-peers: build $(RESTATE_DIR)/node_modules/.package-lock.json
	./.ci/install-tools bench
	@./.ci/ensure-postgres || echo "!!! PostgreSQL unavailable: the bench will skip idem's PostgreSQL rows !!!" >&2
	cargo run --release -p idem-bench -- --peers --restate-dir $(RESTATE_DIR) --out bench/results $(PEERS_ARGS)

# restate-server and the SDK, installed exactly as locked, only when node_modules is missing
# or older than the lock. Install scripts are skipped: none is needed, one is telemetry.
$(RESTATE_DIR)/node_modules/.package-lock.json: $(RESTATE_DIR)/package.json $(RESTATE_DIR)/package-lock.json
	@command -v npm >/dev/null || { echo "bench-peers needs Node.js and npm" >&2; exit 1; }
	cd $(RESTATE_DIR) && npm ci --ignore-scripts --no-audit --no-fund
	touch $@

# The book (not part of `make test`): docs/ is plain Markdown that also reads on a forge;
# mdBook builds it into target/book. Pinned, and without its `serve`/`watch` features, which
# only a live preview needs and which double the build on two cores.
MDBOOK_VERSION := 0.5.4

## docs: build the documentation in docs/ as a book into target/book (installs mdBook once)
docs:
	@if [ "$$(mdbook --version 2>/dev/null)" != "mdbook v$(MDBOOK_VERSION)" ]; then \
	  cargo install mdbook --version $(MDBOOK_VERSION) --locked --no-default-features --features search; \
	fi
	mdbook build docs

## docs-images: retake the screenshots in docs/images/ with the browser tests (needs `make build`)
docs-images: test-tools build
	cd end2end && UPDATE_DOCS_IMAGES=1 npx playwright test tests/docs-images.spec.ts

clean-data:
	rm -f idem.db idem.db-wal idem.db-shm idem.db-serve.lock
	rm -f idem-demo.db idem-demo.db-wal idem-demo.db-shm idem-demo.db-serve.lock
