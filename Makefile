# The two commands that matter: `make run` and `make test` (see README.md).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Where `make run` serves the demo: `PORT=8001 make run`.
HOST ?= 127.0.0.1
PORT ?= 8000
# pytest-xdist workers per pass of `make test`: auto is one per CPU core. Each
# worker has its own test database (test_<name>_gw0, ...). loadfile runs all of
# a module on one worker, so a module fixture (the install test's wheel and
# virtualenv) is built once; in file order, so the longest modules (fuzzing,
# browser, install) start early instead of ending the pass on one worker.
TEST_WORKERS ?= auto
XDIST := -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
# What django-upgrade checks: every tracked Python file of these trees.
UPGRADE_FILES := 'conversations/*.py' 'project/*.py' 'tests/*.py' 'bench/*.py'
# The demo needs only the package and its runtime dependencies; tests and
# checks need the dev toolchain on top (pytest, ruff, mypy, playwright, ...).
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev
# The chat page's JS toolchain (ESLint, the unit tests' jsdom, the vendored
# libraries' sources), pinned in frontend/package-lock.json. Users need none of it.
FRONTEND := frontend
NODE_STAMP := $(FRONTEND)/node_modules/.installed-lock

.PHONY: run worker test install check lint format typecheck bench clean lint-js test-js vendor

$(RUN_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(DEV_STAMP): $(RUN_STAMP)
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@

# `npm ci` installs exactly the lock file (checking each package's integrity hash), once per change of it.
$(NODE_STAMP): $(FRONTEND)/package-lock.json
	cd $(FRONTEND) && npm ci --no-audit --no-fund
	touch $@

## ESLint over the chat page's modules, and the vendored files checked against node_modules and their sha256.
lint-js: $(NODE_STAMP)
	$(FRONTEND)/node_modules/.bin/eslint -c $(FRONTEND)/eslint.config.js conversations/static/conversations $(FRONTEND)
	cd $(FRONTEND) && node vendor.mjs --check

## The unit tests of the chat page's pure modules (node --test).
test-js: $(NODE_STAMP)
	cd $(FRONTEND) && node --test test/

## Copy the pinned libraries from npm into static/ (and axe-core into tests/) and record their sha256.
vendor: $(NODE_STAMP)
	cd $(FRONTEND) && node vendor.mjs

## The dev toolchain in .venv (what `make test` and `make check` need).
install: $(DEV_STAMP)

## Set up and serve the demo on http://$(HOST):$(PORT) (SQLite, offline demo provider).
run: $(RUN_STAMP)
	env -u DATABASE_URL $(BIN)/python manage.py migrate --noinput
	env -u DATABASE_URL $(BIN)/python manage.py setup_demo --url "http://$(HOST):$(PORT)"
	env -u DATABASE_URL $(BIN)/python manage.py runserver "$(HOST):$(PORT)"

## A Celery worker for the demo: run `CONVERSATIONS_EXECUTOR=celery make run` beside it (needs Redis).
worker: install
	env -u DATABASE_URL $(BIN)/celery -A project worker --pool=solo -l info

## Run the whole suite on SQLite, then again on PostgreSQL when DATABASE_URL is set,
## each pass spread over TEST_WORKERS processes (`TEST_WORKERS=0 make test`: one).
test: install test-js
	env -u DATABASE_URL $(BIN)/python -m pytest $(XDIST) --cov --cov-report= $(PYTEST_ARGS)
	$(BIN)/python -m coverage report --include='conversations/domain/*' --show-missing --fail-under=100
	$(BIN)/python -m coverage report --skip-covered --skip-empty
	@if [ -n "$$DATABASE_URL" ]; then \
		echo "== again on PostgreSQL ($${DATABASE_URL%%@*}@...)"; \
		$(BIN)/python -m pytest $(XDIST) $(PYTEST_ARGS); \
	fi

## Every static check: Django 6 idioms, lint, format, types, migrations in sync, system checks.
# django-upgrade --check only reports (it rewrites nothing) and fails when a
# file still needs a change for Django 6.0; `make format` applies the changes.
check: install lint-js
	git ls-files -z -- $(UPGRADE_FILES) | xargs -0 $(BIN)/django-upgrade --target-version 6.0 --check
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	env -u DATABASE_URL $(BIN)/python manage.py makemigrations --check --dry-run
	env -u DATABASE_URL $(BIN)/python manage.py check --fail-level WARNING

lint: install lint-js
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	git ls-files -z -- $(UPGRADE_FILES) | xargs -0 $(BIN)/django-upgrade --target-version 6.0 --exit-zero-even-if-changed
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

typecheck: install
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .coverage htmlcov dist build *.egg-info
