# pretrain: the two commands a newcomer runs are `make demo` and `make test`.
# Each creates .venv when it is missing and installs what it needs.
# TORCH pins the CPU wheel; override for a GPU machine: make install TORCH="torch==2.13.0 --index-url ..."
PYTHON ?= python3
VENV   ?= .venv
TORCH  ?= torch==2.13.0
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed-core
PEERS_VENV ?= .venv-peers
PEERS   = $(PEERS_VENV)/.installed
PYTEST_ARGS ?=
# The two venvs and the browser install side by side (`make test` from nothing): each waits on
# downloads, unpacking and apt as much as on a core. Nothing here depends on another's install.
# Not with `clean` among the goals: `make clean test` must remove before it installs.
ifeq ($(filter clean,$(MAKECMDGOALS)),)
MAKEFLAGS += -j3
endif

.PHONY: install peers browser test lint demo bench clean help

help:
	@echo "make demo   - crawl -> curate -> tokens -> plan -> train -> sample -> report, on shipped data"
	@echo "              (OUT=dir: where, default demo-out; DATA='a b': your inputs added to the crawl)"
	@echo "make test   - install into $(VENV) and run ruff + the test suite (no GPU needed)"
	@echo "make bench  - benchmarks against peers (datatrove, datasketch, fastText, HF tokenizers, nanoGPT)"
	@echo "make install - only create $(VENV) and install; then: source $(BIN)/activate (or run $(BIN)/pretrain)"
	@echo "make lint   - ruff"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(TORCH)
	$(BIN)/pip install -q -e '.[train,dev,bench,ray,eval]'
	touch $@

install: $(STAMP)

# Peer libraries used as oracles by parity tests and benchmarks, in their own venv so their pins
# (datatrove needs spaCy and its own fastText build) never change ours. Tests skip without it.
$(PEERS):
	test -d $(PEERS_VENV) || $(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/pip install -q 'datatrove[processing]' spacy nltk lxml_html_clean warcio fire faust-cchardet python-magic orjson zstandard pyarrow \
	  && $(PEERS_VENV)/bin/pip install -q --no-deps llm-analysis==0.2.2 \
	  && touch $@ || echo "peers: datatrove could not be installed; parity tests will skip"

peers: $(PEERS)

# Debian's Chromium renders `pretrain report` pages in the tests (headless); skipped if unavailable.
browser:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) \
	  || echo "browser: chromium could not be installed; the report rendering test will skip"

lint: $(STAMP)
	$(BIN)/ruff check src tests bench

test: $(STAMP) $(PEERS) browser
	$(BIN)/ruff check src tests bench
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

demo: $(STAMP)
	$(BIN)/python -m pretrain demo $(if $(OUT),-o $(OUT),) $(foreach d,$(DATA),--data $(d))

bench: $(STAMP) $(PEERS)
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) $(PEERS_VENV) demo-out .pytest_cache
