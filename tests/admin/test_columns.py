"""The narrow list columns: compact counts, and whole values kept in each cell's title."""

from __future__ import annotations

import pytest

from conversations.admin.columns import compact_count, titled


@pytest.mark.parametrize(
    ("count", "shown"),
    [
        (0, "0"),
        (9_999, "9999"),
        (10_000, "10k"),
        (375_258, "375k"),
        (999_499, "999k"),
        (999_500, "1.0M"),
        (12_345_678, "12.3M"),
        (99_950_000, "100M"),
        (987_654_321, "988M"),
    ],
)
def test_a_count_is_shown_in_at_most_five_characters(count, shown):
    assert compact_count(count) == shown
    assert len(shown) <= 5


def test_a_titled_value_keeps_its_whole_text_escaped_in_the_title():
    assert titled("375k", "375258 (1 in / 2 out)") == (
        '<span title="375258 (1 in / 2 out)">375k</span>'
    )
    assert titled("<b>") == '<span title="&lt;b&gt;">&lt;b&gt;</span>'
