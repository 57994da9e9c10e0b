from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView

from . import api

handler400 = "controlplane.problems.handler400"
handler403 = "controlplane.problems.handler403"
handler404 = "controlplane.problems.handler404"
handler500 = "controlplane.problems.handler500"

urlpatterns = [
    path("healthz", api.healthz, name="healthz"),
    path("readyz", api.readyz, name="readyz"),
    path("v1/schema", SpectacularAPIView.as_view(), name="schema"),
    # Redoc from our static files (SPECTACULAR_SETTINGS["REDOC_DIST"] = "SIDECAR"), in a page
    # with no inline script or style and no web font from another origin.
    path(
        "v1/docs",
        SpectacularRedocView.as_view(url_name="schema", template_name="plangate/api_docs.html"),
        name="docs",
    ),
    path("v1/", include("plans.urls")),
    path("admin/", admin.site.urls),
]
