# Two commands: `make run` and `make test`. Each sets itself up on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
READY := $(VENV)/.ready

.PHONY: run test check bench lint format setup clean docs check-next-django

$(READY): requirements.txt requirements-dev.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Plangate needs Python 3.11 or newer")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements-dev.txt
	@touch $@

setup: $(READY)

run: $(READY)
	$(BIN)/python scripts/run_local.py

test: $(READY)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The loop while editing: no servers, browsers, PostgreSQL, Redis or virtualenvs (`slow`), a
# smaller Hypothesis profile, stop at the first failure. The fuzzers are not even collected:
# importing schemathesis and loading the schema costs seconds. `make test` and CI still run
# everything.
QUICK_MARKERS := not slow and not browser and not worker and not postgres and not redis
check: $(READY)
	HYPOTHESIS_PROFILE=dev $(BIN)/python -m pytest -m "$(QUICK_MARKERS)" -x -q \
		-p no:cacheprovider --ignore=tests/api_fuzz $(PYTEST_ARGS)

# The next Django: the quick suite under Django 6.1 (requirements-next.txt) in .venv-next, so
# an upgrade is known to work before it is made; the install stays on 5.2 LTS. Django 6 needs
# Python 3.12 or newer: PYTHON_NEXT names one, else the first that runs of python3.13 and
# python3.12 on PATH, then pyenv's 3.12 and 3.13.
PYTHON_NEXT ?= $(shell for candidate in python3.13 python3.12 \
	$(wildcard $(HOME)/.pyenv/versions/3.1[23]*/bin/python); do \
	"$$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null \
	&& { command -v "$$candidate"; break; }; done)
VENV_NEXT := .venv-next
READY_NEXT := $(VENV_NEXT)/.ready

$(READY_NEXT): requirements.txt requirements-dev.txt requirements-next.txt
	@test -n "$(PYTHON_NEXT)" || { echo "check-next-django: Django 6 needs Python 3.12 or" \
		"newer; none runs as python3.13, python3.12 or under ~/.pyenv/versions." \
		"Install one, or name it: make check-next-django PYTHON_NEXT=/path/to/python3.12" >&2; \
		exit 1; }
	$(PYTHON_NEXT) -m venv $(VENV_NEXT)
	$(VENV_NEXT)/bin/python -m pip install -q --upgrade pip
	$(VENV_NEXT)/bin/python -m pip install -q -r requirements-dev.txt
	$(VENV_NEXT)/bin/python -m pip install -q -r requirements-next.txt
	@touch $@

check-next-django: $(READY_NEXT)
	HYPOTHESIS_PROFILE=dev $(VENV_NEXT)/bin/python -m pytest -m "$(QUICK_MARKERS)" -q \
		-p no:cacheprovider --ignore=tests/api_fuzz $(PYTEST_ARGS)

bench: $(READY)
	$(BIN)/python bench/run.py $(BENCH_ARGS)

# mypy checks the guard strictly and the Django apps in its default mode, with the
# django-stubs and DRF plugins (settings in pyproject.toml); lint-imports holds the apps to
# their layers and the guard to no Django (pyproject.toml [tool.importlinter]).
lint: $(READY)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy guard teams members policies plans audit kernel notify rehearsal directory identity adminapi controlplane
	$(BIN)/lint-imports

# The documentation site (mkdocs.yml) into site/; --strict: a broken link or a moved example
# fails the build. NO_MKDOCS_2_WARNING silences the theme's banner about its successor.
docs: $(READY)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

format: $(READY)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) $(VENV_NEXT) var site .pytest_cache .ruff_cache .mypy_cache .hypothesis
