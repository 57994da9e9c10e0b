from csp.constants import NONCE
from csp.decorators import csp_update
from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView

from . import home, metrics, probes

# Redoc from our static files (SPECTACULAR_SETTINGS["REDOC_DIST"] = "SIDECAR"), in a page with
# no inline script and no web font from another origin. Redoc's styled-components add
# <style> elements: those made while it renders carry this response's nonce (docs.js hands
# it over); the two its bundle adds as it loads, before it can be told a nonce, are allowed
# by their hashes, which belong to the pinned drf-spectacular-sidecar (a browser test fails
# when an upgrade changes them).
REDOC_STYLE_HASHES = [
    "'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU='",  # an empty <style>
    "'sha256-QMIg+bpjm3JdElJ388KYke01izlUW0UoNOeKjpMxdgc='",
]
api_docs = csp_update({"style-src": [NONCE, *REDOC_STYLE_HASHES]})(
    SpectacularRedocView.as_view(url_name="schema", template_name="plangate/api_docs.html")
)

handler400 = "kernel.problems.handler400"
handler403 = "kernel.problems.handler403"
handler404 = "kernel.problems.handler404"
handler500 = "kernel.problems.handler500"

urlpatterns = [
    path("", home.home, name="home"),
    path("healthz", probes.healthz, name="healthz"),
    path("readyz", probes.readyz, name="readyz"),
    path("metrics", metrics.metrics, name="metrics"),
    path("v1/schema", SpectacularAPIView.as_view(), name="schema"),
    path("v1/docs", api_docs, name="docs"),
    path("v1/audit/", include("audit.urls")),
    path("v1/admin/", include("adminapi.urls")),
    path("scim/v2/", include("directory.urls")),
    path("v1/", include("notify.urls")),
    path("v1/", include("plans.urls")),
    path("oidc/", include("mozilla_django_oidc.urls")),
    path("webauthn/", include("django_otp_webauthn.urls", namespace="otp_webauthn")),
    path("admin/", admin.site.urls),
]
