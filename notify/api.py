"""``POST /v1/slack/interactions``: Slack's request when someone presses Approve or Deny
in an approval request posted to a team's Slack (notify.slack). A plain Django view: the
signature covers the raw body, read before anything parses it. It is Slack's endpoint,
not the agents' API, so the OpenAPI schema leaves it out."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from kernel.problems import PROBLEM_CONTENT_TYPE, Code, DomainError, problem_body

from .slack import (
    not_an_interaction,
    slack_answer_queue,
    slack_interaction_handle,
    slack_request_verify,
)


def _problem(request: HttpRequest, error: DomainError) -> JsonResponse:
    body = problem_body(error.code, error.detail, errors=error.errors, instance=request.path)
    response = JsonResponse(body, status=error.status, content_type=PROBLEM_CONTENT_TYPE)
    for name, value in error.headers.items():
        response[name] = value
    return response


@csrf_exempt  # Slack's own signature is the check (a form post from no browser session)
def slack_interactions(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        error = DomainError(Code.METHOD_NOT_ALLOWED, "Slack posts here.", headers={"Allow": "POST"})
        return _problem(request, error)
    body = request.body
    try:
        # Slack sends UTF-8 form bodies; anything else is no interaction (and the verifier
        # reads the body as text).
        body.decode("utf-8")
    except UnicodeDecodeError:
        return _problem(request, not_an_interaction())
    try:
        slack_request_verify(
            body=body,
            timestamp=request.headers.get("X-Slack-Request-Timestamp", ""),
            signature=request.headers.get("X-Slack-Signature", ""),
        )
        answer = slack_interaction_handle(body=body)
    except DomainError as error:
        return _problem(request, error)
    slack_answer_queue(answer)
    # Slack reads the answer from response_url; the same message here tells a reader too.
    return JsonResponse(answer.message)
