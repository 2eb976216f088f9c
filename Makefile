# The two commands that matter: `make run` and `make test` (see README.md).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run worker test install lint format typecheck bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

## Set everything up and serve the demo on http://127.0.0.1:8000 (SQLite, offline demo provider).
run: install
	env -u DATABASE_URL $(BIN)/python manage.py migrate --noinput
	env -u DATABASE_URL $(BIN)/python manage.py setup_demo
	env -u DATABASE_URL $(BIN)/python manage.py runserver 127.0.0.1:8000

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
