"""Settings for the test run: fixed throwaway secrets, then the real settings module.

DATABASE_URL and CELERY_BROKER_URL pass through from the environment, so CI runs the same
suite on PostgreSQL and Redis.
"""

import os

os.environ.setdefault("SECRET_KEY", "test-secret-key-not-for-production-0123456789abcdef")
# A fixed Fernet key for tests only.
os.environ.setdefault("KEY_ENCRYPTION_KEY", "dGVzdC1rZXktZW5jcnlwdGlvbi1rZXktMzJieXRlcyE=")
os.environ.setdefault("PLANGATE_ISSUER", "https://plangate.test")
os.environ["PLANGATE_ENV_FILE"] = os.devnull

from controlplane.settings import *  # noqa: F403
from controlplane.settings import ALLOWED_HOSTS

ALLOWED_HOSTS = [*ALLOWED_HOSTS, "testserver"]
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# Local memory, so rate-limit counters are in the (rolled back) test database; tests of the
# Redis store override CACHES themselves.
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
STATIC_ROOT = None  # whitenoise serves through finders in tests
# The console's tests sign in as superusers with a password; the MFA tests
# (tests/browser/test_mfa.py, tests/identity) turn MFA on themselves.
MFA_REQUIRED_FOR = []
