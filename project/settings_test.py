"""Settings of the test suite: the host project's settings with a fast password hasher.

Hashing a password with Django's default (PBKDF2) costs a noticeable fraction
of a second per call; tests create users and log them in all the time, and
none of them is about the strength of a hash.
"""

from project.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
