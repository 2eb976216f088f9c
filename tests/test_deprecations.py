"""Django's deprecation warnings fail the suite, so code Django 6 drops cannot creep in."""

import warnings

import pytest
from django.utils import deprecation

# By alias rather than by version: RemovedInDjango60Warning and
# RemovedInDjango61Warning under 5.2, the next pair under 6.x.
DJANGO_DEPRECATIONS = [
    deprecation.RemovedInNextVersionWarning,
    deprecation.RemovedAfterNextVersionWarning,
]


@pytest.mark.parametrize("category", DJANGO_DEPRECATIONS, ids=lambda c: c.__name__)
def test_a_deprecation_warning_raised_inside_django_is_an_error(category):
    # Attributed to a Django module, as Django's own warnings are, so that a
    # filter ignoring warnings by module ("ignore:::django.*") would show here too.
    with pytest.raises(category):
        warnings.warn_explicit(
            "a feature Django removes",
            category,
            filename=deprecation.__file__,
            lineno=1,
            module="django.utils.deprecation",
        )
