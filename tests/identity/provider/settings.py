"""A small OpenID Provider for the single sign-on tests: django-oauth-toolkit with OIDC on,
run as its own server process (tests/identity/conftest.py). Its database, RSA key, port
and the relying party's redirect URI come from the environment the test gives it."""

import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
SECRET_KEY = "provider-tests-only"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
ROOT_URLCONF = "tests.identity.provider.urls"
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "oauth2_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [HERE / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["PROVIDER_DB"]}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
LOGIN_URL = "/accounts/login/"
OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": os.environ.get("PROVIDER_RSA_KEY", ""),
    "OIDC_ISS_ENDPOINT": os.environ.get("PROVIDER_ISSUER", ""),
    "PKCE_REQUIRED": False,
    "OAUTH2_VALIDATOR_CLASS": "tests.identity.provider.validator.Validator",
    "SCOPES": {
        "openid": "OpenID Connect",
        "email": "Your e-mail address",
        "profile": "Your name",
        "groups": "Your groups",
    },
}
