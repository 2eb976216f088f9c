"""Memory of uploading an attachment (``POST /api/attachments/``): the peak against the file's size.

Usage, from the repository root::

    .venv/bin/python bench/attachment_upload.py [--database sqlite|postgres|both] [--megabytes 20]

On a throwaway database (``bench/databases.py``) and a temporary
``MEDIA_ROOT``, a file of ``--megabytes`` MB (a PDF: a valid header, then
filler) is posted as multipart through Django's whole request stack
(``ClientHandler``, no network) with the request body already in memory as
a socket would hand it over. Measured while the request is handled:

- the peak of Python memory allocated (``tracemalloc``), above what was held
  before: the body parsed (Django spools a file over
  ``FILE_UPLOAD_MAX_MEMORY_SIZE`` to a temporary file), hashed and sniffed
  in chunks, and moved to the storage;
- the growth of the process's peak resident size (``ru_maxrss``), which also
  counts what C code allocates.

PASS when the tracemalloc peak is below 2 x the file's size (the file never
sits in memory twice). It asserts nothing: the exit code is 0 whatever the
figures (see docs/performance.md). The same bytes posted again (a dedup hit)
are measured too.
"""

from __future__ import annotations

import argparse
import io
import os
import resource
import sys
import tempfile
import time
import tracemalloc
from typing import Any

# bench/ is sys.path[0] when run as a script
from databases import add_database_options, describe_machine, run_bench

TARGET = 2.0
"""The largest acceptable peak, in multiples of the file's size."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_database_options(parser)
    parser.add_argument("--megabytes", type=int, default=20, help="file size in MB (20)")
    args = parser.parse_args(argv)
    if args.megabytes < 1:
        parser.error("--megabytes must be a positive integer")
    passed = ["--megabytes", str(args.megabytes)]
    return run_bench(
        __file__, args, passed, label="upload", work=lambda where: bench(where, args.megabytes)
    )


def bench(where: str, megabytes: int) -> None:
    media = tempfile.mkdtemp(prefix="bench-media-")
    os.environ["MEDIA_ROOT"] = media
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection

    settings.MEDIA_ROOT = media
    call_command("migrate", verbosity=0, interactive=False)
    user = get_user_model().objects.create_user(username="uploader")
    size = megabytes * 1024 * 1024
    data = b"%PDF-1.4\n" + b"0" * (size - 9)
    settings.CONVERSATIONS = {"MAX_ATTACHMENT_BYTES": size + 1}
    post(user, b"%PDF-1.4\nwarm up")  # first-use costs (imports, URLconf) are not the upload's
    first = post(user, data)
    again = post(user, data)
    title = "PostgreSQL" if connection.vendor == "postgresql" else "SQLite"
    print(f"== {title}: {where}")
    for line in describe_machine(connection.vendor):
        print(f"   {line}")
    print(
        f"   file: {size / 1e6:.1f} MB (a PDF); FILE_UPLOAD_MAX_MEMORY_SIZE "
        f"{settings.FILE_UPLOAD_MAX_MEMORY_SIZE / 1e6:.1f} MB"
    )
    print()
    header = (
        f"{'upload':>12}  {'status':>6}  {'peak MB':>8}  {'x file':>6}  {'RSS +MB':>8}  {'s':>5}"
    )
    print(header)
    print("-" * len(header))
    for label, (status, peak, rss, seconds) in (("new", first), ("same bytes", again)):
        print(
            f"{label:>12}  {status:>6}  {peak / 1e6:>8.2f}  {peak / size:>6.2f}  "
            f"{rss / 1e6:>8.2f}  {seconds:>5.2f}"
        )
    print()
    worst = max(first[1], again[1]) / size
    result = "PASS" if worst < TARGET else "MISS"
    print(f"   peak = {worst:.2f} x the file's size (target: < {TARGET} x): {result}")
    print()


def post(user: Any, data: bytes) -> tuple[int, int, int, float]:
    """Status, tracemalloc peak, peak-RSS growth (bytes) and seconds of one upload of ``data``."""
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.test import Client
    from django.test.client import BOUNDARY, MULTIPART_CONTENT, ClientHandler, encode_multipart

    client = Client()
    client.force_login(user)
    cookie = "; ".join(f"{key}={morsel.value}" for key, morsel in client.cookies.items())
    body = encode_multipart(BOUNDARY, {"file": SimpleUploadedFile("report.pdf", data)})
    del data
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/api/attachments/",
        "SCRIPT_NAME": "",
        "QUERY_STRING": "",
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "CONTENT_TYPE": MULTIPART_CONTENT,
        "CONTENT_LENGTH": str(len(body)),
        "HTTP_COOKIE": cookie,
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(body),  # shares the body's buffer: the socket's bytes
        "wsgi.errors": sys.stderr,
        "wsgi.multiprocess": False,
        "wsgi.multithread": False,
        "wsgi.run_once": False,
    }
    handler = ClientHandler(enforce_csrf_checks=False)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    tracemalloc.start()
    tracemalloc.reset_peak()
    before, _ = tracemalloc.get_traced_memory()
    started = time.perf_counter()
    response = handler(environ)
    seconds = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if response.status_code not in (200, 201):
        raise RuntimeError(
            f"the upload answered {response.status_code}: {response.content[:200]!r}"
        )
    return response.status_code, peak - before, rss_after - rss_before, seconds


if __name__ == "__main__":
    sys.exit(main())
