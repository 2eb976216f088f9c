"""Settings of the test suite: the host project's settings with a fast password hasher.

Hashing a password with Django's default (PBKDF2) costs a noticeable fraction
of a second per call; tests create users and log them in all the time, and
none of them is about the strength of a hash.
"""

from project.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# Attachments the tests store land in a directory of this process, never in the project's.
MEDIA_ROOT = __import__("tempfile").mkdtemp(prefix="conversations-test-media-")

# SQLite: the test database is a file rather than Django's shared in-memory
# database. Live-server tests run the tool loop in background threads beside
# the server's own; in a shared in-memory database a second connection that
# touches a table another one is writing fails at once ("database table is
# locked"), whereas a file database under the project's settings (WAL,
# BEGIN IMMEDIATE) makes it wait its turn, as in production.
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    import os
    import tempfile

    DATABASES["default"]["TEST"] = {  # noqa: F405
        "NAME": os.path.join(tempfile.gettempdir(), f"conversations-test-{os.getpid()}.sqlite3")
    }
