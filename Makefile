# Two commands: `make run` and `make test`. Each sets itself up on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
READY := $(VENV)/.ready

.PHONY: run test check bench lint format setup clean docs

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

bench: $(READY)
	$(BIN)/python bench/run.py $(BENCH_ARGS)

# mypy checks the guard strictly and the Django apps in its default mode, with the
# django-stubs and DRF plugins (settings in pyproject.toml); lint-imports holds the apps to
# their layers and the guard to no Django (pyproject.toml [tool.importlinter]).
lint: $(READY)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy guard teams members policies plans audit kernel notify rehearsal controlplane
	$(BIN)/lint-imports

# The documentation site (mkdocs.yml) into site/; --strict: a broken link or a moved example
# fails the build. NO_MKDOCS_2_WARNING silences the theme's banner about its successor.
docs: $(READY)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

format: $(READY)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) var site .pytest_cache .ruff_cache .mypy_cache .hypothesis
