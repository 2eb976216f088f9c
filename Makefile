# The two commands that matter: `make run` and `make test` (see README.md).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Where `make run` serves the demo: `PORT=8001 make run`.
HOST ?= 127.0.0.1
PORT ?= 8000
# The demo needs only the package and its runtime dependencies; tests and
# checks need the dev toolchain on top (pytest, ruff, mypy, playwright, ...).
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: run worker test install check lint format typecheck bench clean

$(RUN_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(DEV_STAMP): $(RUN_STAMP)
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@

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

## Run the whole suite on SQLite, then again on PostgreSQL when DATABASE_URL is set.
test: install
	env -u DATABASE_URL $(BIN)/python -m pytest --cov --cov-report= $(PYTEST_ARGS)
	$(BIN)/python -m coverage report --include='conversations/domain/*' --show-missing --fail-under=100
	$(BIN)/python -m coverage report --skip-covered --skip-empty
	@if [ -n "$$DATABASE_URL" ]; then \
		echo "== again on PostgreSQL ($${DATABASE_URL%%@*}@...)"; \
		$(BIN)/python -m pytest $(PYTEST_ARGS); \
	fi

## Every static check: lint, format, types, migrations in sync, system checks without warnings.
check: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	env -u DATABASE_URL $(BIN)/python manage.py makemigrations --check --dry-run
	env -u DATABASE_URL $(BIN)/python manage.py check --fail-level WARNING

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

typecheck: install
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .coverage htmlcov dist build *.egg-info
