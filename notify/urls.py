from django.urls import path

from . import api

urlpatterns = [
    path("slack/interactions", api.slack_interactions, name="slack-interactions"),
]
