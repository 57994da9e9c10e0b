"""Settings, every knob read from the environment through one ``environ.Env``.

Laptop defaults are safe: SQLite under ``var/``, an embedded broker, DEBUG off. A start
without ``SECRET_KEY`` fails loudly; ``make run`` writes local secrets to ``var/local.env``
on first start and says so. ``KEY_ENCRYPTION_KEY`` is checked by a system check and by the
signing code, so a wrong key refuses to sign rather than failing at import.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
env = environ.Env()
# Where a laptop's state lives (secrets, SQLite, broker, logs): var/ in the project unless
# PLANGATE_VAR_DIR names another (relative to the project; tests give a folder of their own).
VAR_DIR = BASE_DIR / env.str("PLANGATE_VAR_DIR", default="var")
environ.Env.read_env(env.str("PLANGATE_ENV_FILE", default=str(VAR_DIR / "local.env")))

DEBUG = env.bool("DEBUG", default=False)
SECRET_KEY = env.str("SECRET_KEY", default="")
if not SECRET_KEY:
    raise ImproperlyConfigured(
        "SECRET_KEY is not set. `make run` creates var/local.env with local secrets; "
        "in production set SECRET_KEY in the environment."
    )
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "controlplane.admin.PlangateAdminConfig",  # django.contrib.admin with the Plangate site
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # the API docs' Redoc bundle, served from our static files
    "axes",  # admin login lockout after repeated failures
    "csp",
    "kernel",
    "teams",
    "members",
    "policies",
    "plans",
    "audit",
    "notify",
    "rehearsal",
    "directory",
    "django_otp",
    "django_otp.plugins.otp_totp",
    "django_otp.plugins.otp_static",
    "django_otp_webauthn",
    "identity",
    "adminapi",
]

MIDDLEWARE = [
    # First: it times the whole request, names it (X-Request-ID), counts it for /metrics
    # and logs its one line, whatever any later middleware answers.
    "kernel.observability.RequestObservabilityMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "kernel.middleware.RejectNulMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # request.user.is_verified(): a second factor proved in this session (django-otp), and
    # the console closed to someone MFA binds until they prove one (identity.mfa).
    "django_otp.middleware.OTPMiddleware",
    "identity.mfa.MfaMiddleware",
    # The signed-in admin is the actor of the changes their requests record.
    "audit.doors.ActorMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes requires: it turns a locked-out login into the lockout page.
    "axes.middleware.AxesMiddleware",
]

# The lockout backend first: it refuses a locked-out account or address before any
# password is checked. It needs the request, so `authenticate()` must be given one.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]

# Single sign-on to the console with OpenID Connect (identity/, docs/sso.md): on when
# OIDC_ISSUER is set; the provider's endpoints come from its discovery document. The role
# claim and the operator's map say who may use the console as what. PASSWORD_LOGIN=false
# then turns password sign-in off.
OIDC_ISSUER = env.str("OIDC_ISSUER", default="")
OIDC_RP_CLIENT_ID = env.str("OIDC_CLIENT_ID", default="")
OIDC_RP_CLIENT_SECRET = env.str("OIDC_CLIENT_SECRET", default="")
OIDC_RP_SIGN_ALGO = env.str("OIDC_SIGN_ALGO", default="RS256")
OIDC_RP_SCOPES = env.str("OIDC_SCOPES", default="openid email profile")
OIDC_ROLE_CLAIM = env.str("OIDC_ROLE_CLAIM", default="groups")
OIDC_ROLE_MAP = env.str("OIDC_ROLE_MAP", default="")
OIDC_DISCOVERY_CACHE_SECONDS = env.int("OIDC_DISCOVERY_CACHE_SECONDS", default=3600)
OIDC_AUTHENTICATE_CLASS = "identity.views.SingleSignOnStart"
OIDC_USE_PKCE = True
OIDC_TIMEOUT = 10
LOGIN_REDIRECT_URL = "/admin/"
LOGIN_REDIRECT_URL_FAILURE = "/admin/login/?sso=failed"
PASSWORD_LOGIN = env.bool("PASSWORD_LOGIN", default=True)

# MFA for password sign-in (identity/mfa.py, docs/mfa.md): whom it binds, any of
# superusers, key_operators, staff; empty: nobody. TOTP codes name this issuer in the app.
MFA_REQUIRED_FOR = env.list("MFA_REQUIRED_FOR", default=["superusers", "key_operators"])
OTP_TOTP_ISSUER = env.str("OTP_TOTP_ISSUER", default="Plangate")
# Passkeys (WebAuthn): the relying party is the console's host name; the origins the
# browser may sign for (https, or http on localhost).
OTP_WEBAUTHN_RP_ID = env.str("WEBAUTHN_RP_ID", default="localhost")
OTP_WEBAUTHN_RP_NAME = "Plangate"
OTP_WEBAUTHN_ALLOWED_ORIGINS = env.list(
    "WEBAUTHN_ALLOWED_ORIGINS", default=["http://localhost:8000"]
)
OTP_WEBAUTHN_ALLOW_PASSWORDLESS_LOGIN = False
if OIDC_ISSUER:
    AUTHENTICATION_BACKENDS.append("identity.backends.PlangateOIDCBackend")
    if not PASSWORD_LOGIN:
        AUTHENTICATION_BACKENDS.remove("django.contrib.auth.backends.ModelBackend")

ROOT_URLCONF = "controlplane.urls"
WSGI_APPLICATION = "controlplane.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": env.db_url("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'plangate.sqlite3'}"),
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the web server, the worker and beat read while one of them writes.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
        }
    )
# Persistent connections, SQLite included: closing the last connection to a WAL database
# checkpoints it and removes the WAL file, so a connection per request made every request
# pay for a checkpoint (`make bench` measured it).
DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("DATABASE_CONN_MAX_AGE", default=60))
# A persistent connection can die while its worker is idle (database restart, failover, a
# proxy's idle timeout); without a check the first request that reuses it fails. The check
# costs one `SELECT 1` per request that touches the database, and only on a reused connection.
DATABASES["default"].setdefault(
    "CONN_HEALTH_CHECKS", env.bool("DATABASE_CONN_HEALTH_CHECKS", default=True)
)
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # libpq waits for ever on a server that does not answer (a host down, a partition); with
    # a bound, such a request answers 503 database_unavailable instead of holding its worker
    # until gunicorn kills it.
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault(
        "connect_timeout", env.int("DATABASE_CONNECT_TIMEOUT", default=5)
    )
    # Parameters sent apart from the statement (psycopg's server-side binding) instead of
    # quoted into its text by Python, and a statement run a few times on a connection is
    # prepared once by the server (psycopg's prepare_threshold, 5 by default): less CPU on
    # both sides for the same few statements every API request runs (docs/decisions/0047).
    # DATABASE_SERVER_SIDE_BINDING=false goes back to client-side binding, e.g. behind a
    # pooler in transaction mode that cannot keep a connection's prepared statements.
    if env.bool("DATABASE_SERVER_SIDE_BINDING", default=True):
        DATABASES["default"]["OPTIONS"].setdefault("server_side_binding", True)
# The largest request body read, in bytes; a larger one is refused with 413
# (`payload_too_large`). Django's default, 2.5 MiB, holds a 50-step plan or a full event batch
# many times over (tests/controlplane/test_request_limits.py).
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("PLANGATE_MAX_BODY_BYTES", default=2_621_440)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Rate-limit counters live in this cache when it is Redis (CACHE_URL=redis://...), and in
# the database otherwise, so a limit holds across every worker process either way
# (kernel/ratelimit.py).
CACHES = {"default": env.cache_url("CACHE_URL", default="locmemcache://")}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = env.path("STATIC_ROOT", default=str(VAR_DIR / "static"))
WHITENOISE_USE_FINDERS = True

SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
# HSTS and Secure cookies follow PLANGATE_ISSUER (set below): see "Served over TLS".

# Content-Security-Policy (django-csp 4). Every page, the admin and the API docs included,
# loads only our own files, with no inline script or style: Django's admin needs none, and
# Plangate's templates keep theirs in static files. The one exception is the <style>
# elements Redoc creates on /v1/docs, allowed on that page only (controlplane/urls.py).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "worker-src": ["'self'", "blob:"],  # the docs' search runs in a worker
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

# Admin login lockout (django-axes): after PLANGATE_LOGIN_FAILURE_LIMIT failed sign-ins an
# account, and separately the address they came from, is refused for the cool-off period,
# counted from the last failure, the right password included. The address is the API's
# client address: REMOTE_ADDR, or X-Forwarded-For as written by PLANGATE_NUM_PROXIES proxies.
PLANGATE_LOGIN_FAILURE_LIMIT = env.int("PLANGATE_LOGIN_FAILURE_LIMIT", default=5)
PLANGATE_LOGIN_COOLOFF_MINUTES = env.int("PLANGATE_LOGIN_COOLOFF_MINUTES", default=15)
AXES_FAILURE_LIMIT = PLANGATE_LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(minutes=PLANGATE_LOGIN_COOLOFF_MINUTES)
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]  # either one locks, separately
AXES_LOCKOUT_CALLABLE = "controlplane.admin.login_lockout_response"
AXES_CLIENT_IP_CALLABLE = "controlplane.admin.login_client_ip"
AXES_VERBOSE = False  # Plangate logs each lockout itself, on "plangate.security"

# Admin lists on PostgreSQL count at most this many rows exactly; a longer list shows the
# planner's estimate ("about N"), so a page of a table of millions costs no full count.
PLANGATE_ADMIN_EXACT_COUNT_LIMIT = env.int("PLANGATE_ADMIN_EXACT_COUNT_LIMIT", default=10_000)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["members.authentication.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_THROTTLE_CLASSES": ["members.authentication.ApiKeyRateThrottle"],
    # The limits themselves are PLANGATE_RATE_LIMIT and PLANGATE_AUTH_FAILURE_LIMIT below.
    # Client addresses: REMOTE_ADDR, or X-Forwarded-For as written by this many proxies.
    "NUM_PROXIES": env.int("PLANGATE_NUM_PROXIES", default=0),
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["kernel.parsers.JSONParser"],
    "EXCEPTION_HANDLER": "kernel.problems.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Plangate API",
    "DESCRIPTION": (
        "Agents declare plans and receive Ed25519-signed intent tokens. "
        "Errors are RFC 9457 application/problem+json with a stable `code`."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    # Redoc from drf-spectacular-sidecar's pinned copy in our static files, never a CDN.
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "plans.status_feed_schema.document_status_feed",  # a plain Django view
        "plans.status_list_schema.document_status_list",  # a plain Django view
        "kernel.openapi.problem_responses",  # every refusal is problem+json
    ],
}

# Plangate's own knobs. Code reads them through django.conf.settings at call time.
PLANGATE_ISSUER = env.str("PLANGATE_ISSUER", default="http://localhost:8000")
# Served over TLS: an https issuer turns on HSTS and Secure cookies unless set explicitly.
# Behind a proxy that ends TLS, PLANGATE_TRUST_X_FORWARDED_PROTO makes Django believe its
# X-Forwarded-Proto (only when the proxy always sets it: a client could otherwise).
_SERVED_OVER_TLS = PLANGATE_ISSUER.startswith("https://")
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31536000 if _SERVED_OVER_TLS else 0)
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=_SERVED_OVER_TLS)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=SESSION_COOKIE_SECURE)
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_X_FORWARDED_PROTO", "https")
    if env.bool("PLANGATE_TRUST_X_FORWARDED_PROTO", default=False)
    else None
)
PLANGATE_TOKEN_TTL = env.int("PLANGATE_TOKEN_TTL", default=900)
PLANGATE_TOKEN_MIN_TTL = env.int("PLANGATE_TOKEN_MIN_TTL", default=60)
PLANGATE_TOKEN_MAX_TTL = env.int("PLANGATE_TOKEN_MAX_TTL", default=3600)
PLANGATE_PLAN_MAX_AGE = env.int("PLANGATE_PLAN_MAX_AGE", default=86400)
PLANGATE_CLOCK_SKEW = env.int("PLANGATE_CLOCK_SKEW", default=60)
# How long after its iat a DPoP proof is accepted (plus the skew); its jti is kept as long
# (plans.dpop, docs/decisions/0069).
PLANGATE_DPOP_MAX_AGE = env.int("PLANGATE_DPOP_MAX_AGE", default=60)
PLANGATE_JWKS_MAX_AGE = env.int("PLANGATE_JWKS_MAX_AGE", default=300)
# The name the server signs its tokens under (docs/decisions/0067): Ed25519 signatures are
# named `EdDSA` (RFC 8037) until the common JOSE libraries verify RFC 9864's fully
# specified `Ed25519`; every verifying side accepts both.
SIGNING_ALGORITHMS = ("EdDSA", "Ed25519")
PLANGATE_SIGNING_ALG = env.str("PLANGATE_SIGNING_ALG", default="EdDSA")
if PLANGATE_SIGNING_ALG not in SIGNING_ALGORITHMS:
    raise ImproperlyConfigured(
        f'PLANGATE_SIGNING_ALG must be "EdDSA" or "Ed25519", not {PLANGATE_SIGNING_ALG!r}.'
    )
PLANGATE_API_KEY_TOUCH_INTERVAL = env.int("PLANGATE_API_KEY_TOUCH_INTERVAL", default=300)
# Requests per API key, and failed authentications per client address, per fixed window
# (N/sec, N/min, N/hour, N/day).
PLANGATE_RATE_LIMIT = env.str("PLANGATE_RATE_LIMIT", default="600/min")
# SCIM (/scim/v2, docs/scim.md): where a provisioned user's role is (roles: the primary
# value, else the first; userType; title), and the most resources a list answers at once.
SCIM_ROLE_ATTRIBUTE = env.str("SCIM_ROLE_ATTRIBUTE", default="roles")
SCIM_MAX_RESULTS = env.int("SCIM_MAX_RESULTS", default=200)
PLANGATE_AUTH_FAILURE_LIMIT = env.str("PLANGATE_AUTH_FAILURE_LIMIT", default="30/min")
# Retry-After, in seconds, of a 503 `database_unavailable`.
PLANGATE_DATABASE_RETRY_AFTER = env.int("PLANGATE_DATABASE_RETRY_AFTER", default=5)
KEY_ENCRYPTION_KEY = env.str("KEY_ENCRYPTION_KEY", default="")
KEY_ROTATION_SECONDS = env.int("KEY_ROTATION_SECONDS", default=86400)
# How often beat asks whether a rotation is due (see plans.keys.rotation_period).
KEY_ROTATION_CHECK_SECONDS = env.int("KEY_ROTATION_CHECK_SECONDS", default=300)
PLAN_EXPIRY_SWEEP_SECONDS = env.int("PLAN_EXPIRY_SWEEP_SECONDS", default=300)
# How often requests for approval past their team's window are marked expired (and
# recorded); the token endpoint also expires one it is asked about, whatever this says.
APPROVAL_EXPIRY_SWEEP_SECONDS = env.int("APPROVAL_EXPIRY_SWEEP_SECONDS", default=60)
# How often the worker numbers and chains the audit records appended since (audit.tasks):
# the most a record waits before it is sealed and readable by the records API.
AUDIT_SEAL_SECONDS = env.int("AUDIT_SEAL_SECONDS", default=2)
# The sealed trail shipped to an OpenTelemetry collector as OTLP log records, each its OCSF
# event (audit.otlp_export): off unless the collector's OTLP/HTTP logs URL is set.
AUDIT_OTLP_LOGS_ENDPOINT = env.str("AUDIT_OTLP_LOGS_ENDPOINT", default="")
AUDIT_OTLP_LOGS_HEADERS = env.str("AUDIT_OTLP_LOGS_HEADERS", default="")  # name=value,...
AUDIT_OTLP_LOGS_TIMEOUT = env.float("AUDIT_OTLP_LOGS_TIMEOUT", default=10.0)
AUDIT_OTLP_EXPORT_SECONDS = env.int("AUDIT_OTLP_EXPORT_SECONDS", default=5)
# Retention (plans.retention, docs/decisions/0044): how often the worker removes decisions
# and refused attempts past their team's period, how many rows one batch (one transaction)
# removes, how many batches per team and table one run takes at most, and after how many
# seconds a run starts no new batch (the rest waits for the next run).
RETENTION_SECONDS = env.int("RETENTION_SECONDS", default=3600)
PLANGATE_RETENTION_BATCH_SIZE = env.int("PLANGATE_RETENTION_BATCH_SIZE", default=1000)
PLANGATE_RETENTION_MAX_BATCHES = env.int("PLANGATE_RETENTION_MAX_BATCHES", default=100)
PLANGATE_RETENTION_RUN_SECONDS = env.int("PLANGATE_RETENTION_RUN_SECONDS", default=300)
# A receiver of audit.retention.retention_export (dotted path) that gets each batch of rows
# before it is removed; "" (the default): none, the rows are just removed.
PLANGATE_RETENTION_EXPORT = env.str("PLANGATE_RETENTION_EXPORT", default="")

# E-mail (approvers are notified, notify/). Without EMAIL_URL, e-mails are printed to the
# process's console (`make run` shows them); production sets EMAIL_URL=smtp+tls://...
vars().update(
    {
        name: value
        for name, value in env.email_url("EMAIL_URL", default="consolemail://").items()
        if value not in (None, "")
    }
)
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="plangate@localhost")
# A team's approval webhook: attempts per notification (the first included), each attempt's
# timeout (seconds), and the longest back-off between two attempts (2^n s, capped).
PLANGATE_WEBHOOK_MAX_ATTEMPTS = env.int("PLANGATE_WEBHOOK_MAX_ATTEMPTS", default=5)
PLANGATE_WEBHOOK_TIMEOUT = env.float("PLANGATE_WEBHOOK_TIMEOUT", default=5.0)
PLANGATE_WEBHOOK_MAX_BACKOFF = env.int("PLANGATE_WEBHOOK_MAX_BACKOFF", default=300)
# Alerts (docs/alerts.md): how often beat reads the audit trail for the teams' alert rules.
ALERT_SCAN_SECONDS = env.int("ALERT_SCAN_SECONDS", default=30)
# Slack: the app's signing secret verifies its interaction requests (approve / deny from a
# message); empty, the interactions endpoint refuses every request. Plangate posts only to
# Slack's own hooks host, plus these prefixes (a test's local receiver, a proxy).
SLACK_SIGNING_SECRET = env.str("SLACK_SIGNING_SECRET", default="")
SLACK_EXTRA_URL_PREFIXES: list[str] = env.list("SLACK_EXTRA_URL_PREFIXES", default=[])

# Celery. Without CELERY_BROKER_URL the broker is a folder under var/: worker, beat and
# web server on one machine need no outside service. Every folder kombu's filesystem
# transport uses is named here, since a folder left out defaults to one relative to the
# current directory (``control/`` for the exchange tables); controlplane/celery.py creates
# them when a worker or beat starts.
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="filesystem://")
# Relative to the project, like var/ (an absolute path stays as it is).
PLANGATE_BROKER_DIR = BASE_DIR / env.str("PLANGATE_BROKER_DIR", default=str(VAR_DIR / "broker"))
CELERY_BROKER_TRANSPORT_OPTIONS: dict = (
    {
        "data_folder_in": str(PLANGATE_BROKER_DIR / "messages"),
        "data_folder_out": str(PLANGATE_BROKER_DIR / "messages"),
        "processed_folder": str(PLANGATE_BROKER_DIR / "processed"),
        "control_folder": str(PLANGATE_BROKER_DIR / "control"),
        "store_processed": False,
    }
    if CELERY_BROKER_URL.startswith("filesystem://")
    else {}
)
# kombu's filesystem transport with whole messages (controlplane/broker.py, kombu #1551).
CELERY_BROKER_TRANSPORT = (
    "controlplane.broker:Transport" if CELERY_BROKER_URL.startswith("filesystem://") else None
)
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_TIME_LIMIT = env.int("CELERY_TASK_TIME_LIMIT", default=120)
CELERY_TASK_SOFT_TIME_LIMIT = env.int("CELERY_TASK_SOFT_TIME_LIMIT", default=100)
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
# A separate queue name lets several deployments (or test runs) share one Redis.
CELERY_TASK_DEFAULT_QUEUE = env.str("CELERY_TASK_DEFAULT_QUEUE", default="celery")
# Rotation is checked, not ticked once a period: every check asks whether a rotation is
# due (the rotation skips itself until then), so a tick lost to a broker outage costs one
# check interval. A check that waited longer than that in the queue is superseded by the
# next one, hence the expiry. Sweeps are cheap to skip too.
KEY_ROTATION_CHECK_INTERVAL = max(1, min(KEY_ROTATION_CHECK_SECONDS, KEY_ROTATION_SECONDS))
CELERY_BEAT_SCHEDULE = {
    "rotate-signing-keys": {
        "task": "plans.tasks.rotate_signing_keys",
        "schedule": KEY_ROTATION_CHECK_INTERVAL,
        "options": {"expires": KEY_ROTATION_CHECK_INTERVAL},
    },
    "expire-plans": {
        "task": "plans.tasks.expire_plans",
        "schedule": PLAN_EXPIRY_SWEEP_SECONDS,
        "options": {"expires": max(1, PLAN_EXPIRY_SWEEP_SECONDS)},
    },
    "expire-approvals": {
        "task": "plans.tasks.expire_approvals",
        "schedule": max(1, APPROVAL_EXPIRY_SWEEP_SECONDS),
        "options": {"expires": max(1, APPROVAL_EXPIRY_SWEEP_SECONDS)},
    },
    "seal-audit-records": {
        "task": "audit.tasks.seal_audit_records",
        "schedule": max(1, AUDIT_SEAL_SECONDS),
        "options": {"expires": max(1, AUDIT_SEAL_SECONDS)},
    },
    "scan-alerts": {
        "task": "notify.tasks.scan_alerts",
        "schedule": max(1, ALERT_SCAN_SECONDS),
        "options": {"expires": max(1, ALERT_SCAN_SECONDS)},
    },
    "apply-retention": {
        "task": "plans.retention.apply_retention",
        "schedule": max(1, RETENTION_SECONDS),
        "options": {"expires": max(1, RETENTION_SECONDS)},
    },
}
if AUDIT_OTLP_LOGS_ENDPOINT:
    CELERY_BEAT_SCHEDULE["export-audit-records"] = {
        "task": "audit.tasks.export_audit_records",
        "schedule": max(1, AUDIT_OTLP_EXPORT_SECONDS),
        "options": {"expires": max(1, AUDIT_OTLP_EXPORT_SECONDS)},
    }

LOG_LEVEL = env.str("LOG_LEVEL", default="INFO")
# "plain" (text for people) or "json" (one JSON object per line, for a log collector:
# kernel.log_format). Either way each request writes one line, at INFO, on the logger
# "plangate.request", whose level is REQUEST_LOG_LEVEL (LOG_LEVEL unless set: WARNING turns
# the lines off).
LOG_FORMAT = env.str("LOG_FORMAT", default="plain").lower()
if LOG_FORMAT not in ("plain", "json"):
    raise ImproperlyConfigured(f'LOG_FORMAT must be "plain" or "json", not {LOG_FORMAT!r}.')
REQUEST_LOG_LEVEL = env.str("REQUEST_LOG_LEVEL", default=LOG_LEVEL)
_PLAIN_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": _PLAIN_FORMAT},
        "request": {"()": "kernel.log_format.RequestLineFormatter", "format": _PLAIN_FORMAT},
        "json": {"()": "kernel.log_format.JsonFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "json" if LOG_FORMAT == "json" else "plain",
        },
        "requests": {
            "class": "logging.StreamHandler",
            "formatter": "json" if LOG_FORMAT == "json" else "request",
        },
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        "plangate.request": {
            "handlers": ["requests"],
            "level": REQUEST_LOG_LEVEL,
            "propagate": False,
        },
    },
}

# Prometheus metrics at /metrics (kernel.metrics, controlplane/metrics.py): off unless
# asked, and then only for a scraper sending `Authorization: Bearer <METRICS_TOKEN>`.
# Several processes (gunicorn workers) add up their counts through PROMETHEUS_MULTIPROC_DIR,
# an environment variable read by prometheus_client itself: see the README.
METRICS_ENABLED = env.bool("METRICS_ENABLED", default=False)
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
if METRICS_ENABLED and len(METRICS_TOKEN) < 16:
    raise ImproperlyConfigured(
        "METRICS_ENABLED needs METRICS_TOKEN, at least 16 characters: the token a scraper "
        "sends as `Authorization: Bearer <token>`."
    )
