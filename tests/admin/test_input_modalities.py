"""The language model's form takes what the model reads beside text, and nothing else."""

from __future__ import annotations

import pytest

from conversations.admin.forms import LanguageModelForm

pytestmark = pytest.mark.django_db


def form(provider, modalities: str) -> LanguageModelForm:
    return LanguageModelForm(
        data={
            "provider": provider.pk,
            "model_id": "vision-model",
            "input_modalities": modalities,
            "is_active": "on",
        }
    )


@pytest.mark.parametrize(("typed", "stored"), [('["image", "pdf"]', ["image", "pdf"]), ("", [])])
def test_images_and_pdfs_or_nothing_are_accepted(provider, typed, stored):
    given = form(provider, typed)
    assert given.is_valid(), given.errors
    assert given.save().input_modalities == stored


@pytest.mark.parametrize("typed", ['["audio"]', '"image"', '["image", "image"]'])
def test_anything_else_is_refused_naming_the_field(provider, typed):
    given = form(provider, typed)
    assert not given.is_valid()
    assert "input_modalities" in given.errors
