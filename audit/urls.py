from django.urls import path

from . import api

urlpatterns = [
    path("records", api.AuditRecordListView.as_view(), name="audit-records"),
]
