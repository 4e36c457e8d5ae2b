# Two entry points (see README): `make serve` and `make test`.
# Everything a fresh machine needs is installed here: a Python venv with the
# project's pinned deps (pyproject.toml), Pyodide from npm (package-lock.json),
# and Debian's Chromium for the browser tests.

PY := .venv/bin/python
PORT ?= 8000
# pytest-xdist workers for `make test`. Four on the 2-core machine (1,119 s vs 1,283 s with three, one run each, 2026-12-02): the browser
# tests spend part of their time waiting on Chromium, which a third worker fills
# (measured faster than two under the same load). `make test TEST_WORKERS=0` runs serially.
TEST_WORKERS ?= 4

.PHONY: serve test build bench clean

# `make serve RECIPES=../shared/upstream-recipes` (or a clone of vllm-project/recipes) serves
# another recipes directory: its problems are listed and the good recipes built (--keep-going).
RECIPES ?=

serve: .venv/.installed node_modules/.installed
	$(PY) build.py $(if $(RECIPES),--recipes $(RECIPES) --keep-going --out .cache/site-recipes,--strict) --serve --port $(PORT)

build: .venv/.installed node_modules/.installed
	$(PY) build.py --strict

test: .venv/.test-installed node_modules/.installed chromium
	$(PY) -m ruff check composer build.py bench.py tests
	$(PY) -m mypy composer
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist worksteal

bench: .venv/.test-installed node_modules/.installed chromium
	$(PY) -m bench --browser

# `make serve` and `make build` need only the build's packages; `make test` and
# `make bench` add the test tools (pytest, Playwright, ruff, mypy …) on top.
.venv/.installed: pyproject.toml
	python3 -m venv .venv
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[build]'
	touch $@

.venv/.test-installed: .venv/.installed pyproject.toml
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $@

# Debian's Chromium: Playwright's own browser download cannot work here.
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	  else sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; fi; }

clean:
	rm -rf dist .venv node_modules .cache
