"""Browser tests: assertions wait as long as actions do.

Playwright's assertions retry for 5 s by default, while these tests give
actions 15 s (``TIMEOUT_MS``); on a busy machine a page that follows a run can
need more than 5 s to show its next state, so assertions get the same patience.
Nothing here measures speed: a faster page passes the same way.
"""

from playwright.sync_api import expect

expect.set_options(timeout=15_000)
