"""A PDF's text for a model that cannot read PDFs: bounded by pages, characters, size and time.

Hostile files are generated here: ten thousand pages, a page whose content
inflates to 200 MB, garbage. The bounds are asserted by what was read (pages,
characters) and by the memory the extraction allocated (``tracemalloc``),
never by wall-clock time: the time bound is driven by a clock the test holds.
"""

from __future__ import annotations

import itertools
import tracemalloc

from conversations.services.attachments import extract_pdf_text

from ..files import pdf, pdf_bomb

BOUNDS = {"max_pages": 50, "max_chars": 100_000, "timeout": 10.0}


def test_the_text_of_every_page_is_read_in_order():
    result = extract_pdf_text(pdf("first page", "second page"), **BOUNDS)
    assert result.text == "first page\n\nsecond page"
    assert (result.pages_read, result.pages_total, result.stopped) == (2, 2, "")


def test_a_ten_thousand_page_pdf_is_read_only_up_to_the_page_bound():
    document = pdf(*(f"page {n}" for n in range(1, 10_001)))
    result = extract_pdf_text(document, **BOUNDS)
    assert result.pages_total == 10_000
    assert result.pages_read == 50 and result.stopped == "pages"
    assert result.text.splitlines()[-1] == "page 50"


def test_the_text_is_cut_at_the_character_bound():
    result = extract_pdf_text(pdf("a" * 80, "b" * 80), **{**BOUNDS, "max_chars": 100})
    assert result.stopped == "characters"
    assert len(result.text) == 100  # the blank line between pages counts


def test_a_decompression_bomb_page_is_skipped_without_inflating_it():
    bomb = pdf_bomb()
    assert len(bomb) < 1024 * 1024  # 200 MB of content in well under 1 MB
    tracemalloc.start()
    try:
        result = extract_pdf_text(bomb, **BOUNDS)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.skipped == 1 and result.text == ""
    assert peak < 16 * 1024 * 1024, f"extraction allocated {peak} bytes at its peak"


def test_the_time_bound_stops_between_pages_by_the_clock_given():
    ticks = itertools.count()  # one second per look at the clock
    result = extract_pdf_text(
        pdf(*(f"page {n}" for n in range(20))),
        **{**BOUNDS, "timeout": 5.0},
        clock=lambda: float(next(ticks)),
    )
    assert result.stopped == "time"
    assert 0 < result.pages_read < 20


def test_garbage_gives_no_text_and_no_error():
    for data in (b"%PDF-1.4\n garbage", b"", b"\x00" * 100):
        result = extract_pdf_text(data, **BOUNDS)
        assert (result.text, result.pages_total, result.stopped) == ("", 0, "error")
