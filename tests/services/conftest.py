"""Fixtures for service tests."""

from __future__ import annotations

import pytest

from conversations.services import create_conversation


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create(username="alice")


@pytest.fixture
def conversation(user):
    return create_conversation(owner=user, title="Weather")
