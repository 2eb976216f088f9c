"""The host project's database settings from the environment: the connection pool."""

from __future__ import annotations

import os

import pytest
from django.core.exceptions import ImproperlyConfigured

from project.settings import _database_from_url

URL = "postgres://app:secret@db.example:5433/app"
VARIABLES = (
    "DATABASE_POOL",
    "DATABASE_POOL_MIN_SIZE",
    "DATABASE_POOL_MAX_SIZE",
    "DATABASE_POOL_TIMEOUT",
    "DATABASE_CONN_MAX_AGE",
)


@pytest.fixture
def env(monkeypatch):
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_postgresql_is_pooled_by_default(env):
    database = _database_from_url(URL)
    assert database["OPTIONS"] == {"pool": {"min_size": 2, "max_size": 20, "timeout": 10.0}}
    assert database["CONN_MAX_AGE"] == 0
    assert database["CONN_HEALTH_CHECKS"] is True


def test_the_pool_is_sized_from_the_environment(env):
    env.setenv("DATABASE_POOL_MIN_SIZE", "0")
    env.setenv("DATABASE_POOL_MAX_SIZE", "8")
    env.setenv("DATABASE_POOL_TIMEOUT", "2.5")
    pool = _database_from_url(URL)["OPTIONS"]["pool"]
    assert pool == {"min_size": 0, "max_size": 8, "timeout": 2.5}


def test_without_the_pool_connections_may_persist(env):
    env.setenv("DATABASE_POOL", "off")
    env.setenv("DATABASE_CONN_MAX_AGE", "60")
    database = _database_from_url(URL)
    assert database["OPTIONS"] == {}
    assert database["CONN_MAX_AGE"] == 60


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DATABASE_POOL", "maybe"),
        ("DATABASE_POOL_MIN_SIZE", "two"),
        ("DATABASE_POOL_MIN_SIZE", "-1"),
        ("DATABASE_POOL_MAX_SIZE", "1.5"),
        ("DATABASE_POOL_MAX_SIZE", "0"),
        ("DATABASE_POOL_TIMEOUT", "soon"),
        ("DATABASE_POOL_TIMEOUT", "0"),
        ("DATABASE_POOL_TIMEOUT", "nan"),
        ("DATABASE_POOL_TIMEOUT", "inf"),
        # Django refuses persistent connections with a pool: the variable is named.
        ("DATABASE_CONN_MAX_AGE", "60"),
    ],
)
def test_a_bad_value_names_its_variable(env, name, value):
    env.setenv(name, value)
    with pytest.raises(ImproperlyConfigured, match=name):
        _database_from_url(URL)


def test_a_minimum_above_the_maximum_names_both(env):
    env.setenv("DATABASE_POOL_MIN_SIZE", "30")
    with pytest.raises(
        ImproperlyConfigured, match=r"DATABASE_POOL_MIN_SIZE.*DATABASE_POOL_MAX_SIZE"
    ):
        _database_from_url(URL)


def test_a_bad_conn_max_age_without_the_pool_is_named_too(env):
    env.setenv("DATABASE_POOL", "off")
    env.setenv("DATABASE_CONN_MAX_AGE", "forever")
    with pytest.raises(ImproperlyConfigured, match="DATABASE_CONN_MAX_AGE"):
        _database_from_url(URL)


def test_sqlite_has_no_pool(env):
    assert "OPTIONS" not in _database_from_url("sqlite:///tmp/x.sqlite3")


@pytest.mark.postgres
@pytest.mark.django_db
def test_the_suite_itself_runs_pooled_on_the_test_database():
    from django.db import connection

    if os.environ.get("DATABASE_POOL", "on") == "off":
        pytest.skip("DATABASE_POOL=off")
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_database()")
        (name,) = cursor.fetchone()
    assert name == connection.settings_dict["NAME"] and name.startswith("test_")
    assert connection.pool is not None
    assert connection.connection._pool is connection.pool  # lent by the pool
