# medkg: `make demo` and `make test` do all the set-up they need on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export VENV

.PHONY: install demo test test-fast lint bench neo4j-start neo4j-stop serve clean

$(BIN)/medkg: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[test]"
	@touch $@

install: $(BIN)/medkg

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

neo4j-start:
	PYTHON=$(BIN)/python .ci/neo4j.sh start

neo4j-stop:
	.ci/neo4j.sh stop

serve: install
	$(BIN)/medkg serve

clean:
	.ci/neo4j.sh stop || true
	rm -rf $(VENV) .neo4j .ci/neo4j/target *.egg-info
