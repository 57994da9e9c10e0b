"""``/scim/v2``: the SCIM 2.0 service provider (RFC 7644) an identity provider provisions a
team's members and member groups through, with the team's SCIM token.

SCIM fixes its own wire format, so these views speak it rather than the API's problem+json:
``application/scim+json`` bodies, errors in the SCIM Error schema with ``status`` and
``scimType``. They are plain Django views for that reason (DRF's parsing, negotiation and
exception handling would each have to be turned off). What does not change: the shared
budget of failed authentications (kernel.bearer), a rate limit per token, the body size
limit, no 500 on any input, and a refused request writes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, cast

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.csrf import csrf_exempt
from pydantic import ValidationError
from scim2_models import (
    AuthenticationScheme,
    Bulk,
    ChangePassword,
    Context,
    Error,
    ETag,
    Filter,
    Group,
    InvalidSyntaxException,
    ListResponse,
    Meta,
    NotFoundException,
    Patch,
    PatchOp,
    PayloadTooLargeException,
    Required,
    ResourceType,
    SCIMException,
    SearchRequest,
    ServiceProviderConfig,
    Sort,
    TooManyException,
    UnauthorizedException,
    User,
)

from audit.actors import acting_as
from kernel.bearer import auth_failure_count, auth_failures_over, bearer_credential, client_address
from kernel.ratelimit import rate_limit_hit, rate_parse

from . import scim
from .models import ScimToken
from .tokens import scim_actor, scim_token_authenticate, scim_token_touch

CONTENT_TYPE = "application/scim+json"


def scim_response(body: dict[str, Any] | None, status: int = 200, **headers: str) -> HttpResponse:
    response = HttpResponse(
        b"" if body is None else json.dumps(body).encode(),
        status=status,
        content_type=CONTENT_TYPE if body is not None else None,
    )
    for name, value in headers.items():
        response[name.replace("_", "-")] = value
    return response


def scim_error(error: Error, **headers: str) -> HttpResponse:
    return scim_response(
        error.model_dump(scim_ctx=Context.DEFAULT, exclude_none=True),
        status=int(error.status or 400),
        **headers,
    )


class MethodNotAllowed(SCIMException):
    status = 405
    _default_detail = "This method is not supported on this endpoint."


def _page_max() -> int:
    return int(settings.SCIM_MAX_RESULTS)


@method_decorator(csrf_exempt, name="dispatch")
class ScimView(View):
    """Authenticates the team's SCIM token, then answers in SCIM's format whatever goes
    wrong. ``self.team`` is the token's team, the only team a request sees."""

    token: ScimToken

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        try:
            self.token = self._authenticate(request)
            self.team = self.token.team
            self.base_url = request.build_absolute_uri("/scim/v2").rstrip("/")
            with acting_as(scim_actor(self.token)):
                response = super().dispatch(request, *args, **kwargs)
            scim_token_touch(token=self.token)
            return response
        except SCIMException as error:
            headers = {"WWW_Authenticate": 'Bearer realm="plangate"'} if error.status == 401 else {}
            if isinstance(error, TooManyException) and error.context.get("retry_after"):
                headers["Retry_After"] = str(error.context["retry_after"])
            return scim_error(error.to_error(), **headers)
        except ValidationError as error:
            return scim_error(Error.from_validation_errors(error.errors())[0])
        except RequestDataTooBig:
            return scim_error(
                PayloadTooLargeException(
                    detail=f"The body is over {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes."
                ).to_error()
            )

    def http_method_not_allowed(self, request: HttpRequest, *args: Any, **kwargs: Any):
        raise MethodNotAllowed()

    def _authenticate(self, request: HttpRequest) -> ScimToken:
        address = client_address(request)
        wait = auth_failures_over(address)
        if wait is not None:
            raise TooManyException(detail="Too many failed authentications.", retry_after=wait)
        credential = bearer_credential(request.headers.get("Authorization", ""))
        token = scim_token_authenticate(credential) if credential else None
        if token is None:
            wait = auth_failure_count(address)
            if wait is not None:
                raise TooManyException(detail="Too many failed authentications.", retry_after=wait)
            raise UnauthorizedException(
                detail="Use `Authorization: Bearer <SCIM token>` (manage.py create_scim_token)."
            )
        limited = rate_limit_hit(
            scope="scim_token",
            ident=token.lookup_id,
            rate=rate_parse(settings.PLANGATE_RATE_LIMIT),
        )
        if not limited.allowed:
            raise TooManyException(detail="Rate limit reached.", retry_after=limited.retry_after)
        return token

    def body(self, request: HttpRequest) -> dict[str, Any]:
        def refuse_constant(name: str) -> Any:
            raise ValueError(f"{name} is not JSON")

        try:
            document = json.loads(request.body or b"null", parse_constant=refuse_constant)
        except (ValueError, RecursionError) as error:
            raise InvalidSyntaxException(detail=f"The body is not JSON: {error}") from None
        if not isinstance(document, dict):
            raise InvalidSyntaxException(detail="The body must be a JSON object.")
        return document

    def query(self, request: HttpRequest, model: Any) -> SearchRequest:
        params = {key: request.GET.get(key) for key in request.GET}
        return cast(Any, SearchRequest)[model].model_validate(
            params, scim_ctx=Context.SEARCH_REQUEST
        )


class _Resources(ScimView):
    """A collection (GET lists and filters, POST creates) of ``model`` resources."""

    model: Any
    rows: Callable[..., Any]
    render: Callable[..., Any]
    create: Callable[..., Any]

    def get(self, request: HttpRequest) -> HttpResponse:
        return _listing_response(self, type(self), self.query(request, self.model))

    def post(self, request: HttpRequest) -> HttpResponse:
        resource = self.model.model_validate(
            self.body(request), scim_ctx=Context.RESOURCE_CREATION_REQUEST
        )
        with transaction.atomic():
            row = type(self).create(self.team, resource)
        created = type(self).render(row, self.base_url)
        return scim_response(
            created.model_dump(scim_ctx=Context.RESOURCE_CREATION_RESPONSE),
            status=201,
            Location=created.meta.location,
        )


def _listing_response(view: ScimView, listing: Any, search: SearchRequest) -> HttpResponse:
    """One page of ``listing``'s resources that ``search`` asks for. The filter is matched
    on the resources as served (scim2-models), so every attribute can be filtered on."""
    rows = listing.rows(view.team)
    if search.filter is None:
        # No filter: count and slice in the database, render one page.
        start = max(search.start_index or 1, 1)
        count = min(max(search.count if search.count is not None else _page_max(), 0), _page_max())
        page = [listing.render(row, view.base_url) for row in rows[start - 1 : start - 1 + count]]
        return _page_response(page, search, listing.model, total=rows.count(), start=start)
    narrowed = scim.rows_narrowed(rows, search.filter.ast)
    resources = [listing.render(row, view.base_url) for row in narrowed]
    resources = [item for item in resources if search.filter.match(item)]
    return _page_response(resources, search, listing.model)


def _page_response(
    resources: list[Any],
    search: SearchRequest,
    model: Any,
    *,
    total: int | None = None,
    start: int | None = None,
) -> HttpResponse:
    """A ListResponse: one page of ``resources``, or ``resources`` as the page already cut
    at ``start`` from ``total`` rows."""
    if total is None:
        start = max(search.start_index or 1, 1)
        count = min(max(search.count if search.count is not None else _page_max(), 0), _page_max())
        page = resources[start - 1 : start - 1 + count]
        total = len(resources)
    else:
        page = resources
    answer = cast(Any, ListResponse)[model](
        total_results=total,
        start_index=start,
        items_per_page=len(page),
        resources=page,
    )
    return scim_response(
        answer.model_dump(scim_ctx=Context.SEARCH_RESPONSE, response_parameters=search)
    )


class _Search(ScimView):
    """``POST .../.search`` (RFC 7644 3.4.3): the query of a GET, as a SearchRequest body."""

    listing: type[_Resources]

    def post(self, request: HttpRequest) -> HttpResponse:
        listing = self.listing
        search = cast(Any, SearchRequest)[listing.model].model_validate(
            self.body(request), scim_ctx=Context.SEARCH_REQUEST
        )
        return _listing_response(self, listing, search)


class _Resource(ScimView):
    """One resource: GET, PUT, PATCH, DELETE."""

    model: Any
    find: Callable[..., Any]
    render: Callable[..., Any]
    replace: Callable[..., Any]
    patch_with: Callable[..., Any]
    remove: Callable[..., Any]

    def _found(self, resource_id: str) -> Any:
        return type(self).find(self.team, resource_id)

    def get(self, request: HttpRequest, resource_id: str) -> HttpResponse:
        search = self.query(request, self.model)
        resource = type(self).render(self._found(resource_id), self.base_url)
        return scim_response(
            resource.model_dump(
                scim_ctx=Context.RESOURCE_QUERY_RESPONSE, response_parameters=search
            )
        )

    def put(self, request: HttpRequest, resource_id: str) -> HttpResponse:
        body = self.body(request)
        with transaction.atomic():
            row = self._found(resource_id)
            original = type(self).render(row, self.base_url)
            resource = self.model.model_validate(
                body, scim_ctx=Context.RESOURCE_REPLACEMENT_REQUEST
            )
            resource.replace(original)
            row = type(self).replace(row, resource)
        return scim_response(
            type(self)
            .render(row, self.base_url)
            .model_dump(scim_ctx=Context.RESOURCE_REPLACEMENT_RESPONSE)
        )

    def patch(self, request: HttpRequest, resource_id: str) -> HttpResponse:
        body = self.body(request)
        operations = cast(Any, PatchOp)[self.model].model_validate(
            body, scim_ctx=Context.RESOURCE_PATCH_REQUEST
        )
        with transaction.atomic():
            row = type(self).patch_with(self._found(resource_id), operations, self.base_url)
        return scim_response(
            type(self)
            .render(row, self.base_url)
            .model_dump(scim_ctx=Context.RESOURCE_PATCH_RESPONSE)
        )

    def delete(self, request: HttpRequest, resource_id: str) -> HttpResponse:
        with transaction.atomic():
            type(self).remove(self._found(resource_id))
        return scim_response(None, status=204)


def _user_create(team: Any, user: User) -> Any:
    return scim.scim_user_create(team=team, user=user)


class UsersView(_Resources):
    model = User
    rows = staticmethod(scim.scim_members)
    render = staticmethod(scim.user_resource)
    create = staticmethod(_user_create)


class UserView(_Resource):
    model = User
    find = staticmethod(scim.scim_member)
    render = staticmethod(scim.user_resource)
    replace = staticmethod(lambda member, user: scim.scim_user_replace(member=member, user=user))
    patch_with = staticmethod(
        lambda member, patch, base_url: scim.scim_user_patch(
            member=member, patch=patch, base_url=base_url
        )
    )
    remove = staticmethod(lambda member: scim.scim_user_delete(member=member))


class GroupsView(_Resources):
    model = Group
    rows = staticmethod(scim.scim_groups)
    render = staticmethod(scim.group_resource)
    create = staticmethod(lambda team, group: scim.scim_group_create(team=team, group=group))


class RootSearchView(ScimView):
    """``POST /scim/v2/.search``: users and groups both, users first."""

    def post(self, request: HttpRequest) -> HttpResponse:
        search = SearchRequest[User | Group].model_validate(
            self.body(request), scim_ctx=Context.SEARCH_REQUEST
        )
        resources: list[Any] = [
            *(scim.user_resource(row, self.base_url) for row in scim.scim_members(self.team)),
            *(scim.group_resource(row, self.base_url) for row in scim.scim_groups(self.team)),
        ]
        if search.filter is not None:
            resources = [item for item in resources if search.filter.match(item)]
        return _page_response(resources, search, User | Group)


class UsersSearchView(_Search):
    listing = UsersView


class GroupView(_Resource):
    model = Group
    find = staticmethod(scim.scim_group)
    render = staticmethod(scim.group_resource)
    replace = staticmethod(lambda row, group: scim.scim_group_replace(row=row, group=group))
    patch_with = staticmethod(
        lambda row, patch, base_url: scim.scim_group_patch(row=row, patch=patch, base_url=base_url)
    )
    remove = staticmethod(lambda row: scim.scim_group_delete(row=row))


class GroupsSearchView(_Search):
    listing = GroupsView


# --- discovery ----------------------------------------------------------------------------


def service_provider_config(base_url: str) -> ServiceProviderConfig:
    return ServiceProviderConfig(
        documentation_uri=None,
        patch=Patch(supported=True),
        bulk=Bulk(supported=False, max_operations=0, max_payload_size=0),
        filter=Filter(supported=True, max_results=_page_max()),
        change_password=ChangePassword(supported=False),
        sort=Sort(supported=False),
        etag=ETag(supported=False),
        authentication_schemes=[
            AuthenticationScheme(
                type=AuthenticationScheme.Type.oauthbearertoken,
                name="Bearer token",
                description="The team's SCIM token: manage.py create_scim_token --team SLUG",
                primary=True,
            )
        ],
        meta=Meta(
            resource_type="ServiceProviderConfig", location=f"{base_url}/ServiceProviderConfig"
        ),
    )


class ServiceProviderConfigView(ScimView):
    def get(self, request: HttpRequest) -> HttpResponse:
        config = service_provider_config(self.base_url)
        return scim_response(config.model_dump(scim_ctx=Context.RESOURCE_QUERY_RESPONSE))


def _resource_types(base_url: str) -> list[ResourceType]:
    types = []
    for model in (User, Group):
        resource_type = ResourceType.from_resource(model)
        resource_type.meta = Meta(
            resource_type="ResourceType", location=f"{base_url}/ResourceTypes/{resource_type.id}"
        )
        types.append(resource_type)
    return types


def user_schema() -> Any:
    """The core User schema as this provider serves it: ``userName`` is the member's
    e-mail (or ``emails`` holds one), and ``active`` is required, since a member is active
    or disabled and never neither."""
    schema = User.to_schema()
    for attribute in schema.attributes or []:
        if attribute.name == "active":
            attribute.required = Required.true
        elif attribute.name == "userName":
            attribute.description = (
                "The person's e-mail address, which Plangate knows its members by (or give "
                "one in emails). Unique in the team."
            )
    return schema


def _schemas(base_url: str) -> list[Any]:
    schemas = []
    for model in (User, Group):
        schema = user_schema() if model is User else model.to_schema()
        schema.meta = Meta(resource_type="Schema", location=f"{base_url}/Schemas/{schema.id}")
        schemas.append(schema)
    return schemas


def _listed(items: list[Any]) -> dict[str, Any]:
    return {
        "schemas": ["urn:ietf:params:scim:api:messages:2.0:ListResponse"],
        "totalResults": len(items),
        "startIndex": 1,
        "itemsPerPage": len(items),
        "Resources": [item.model_dump(scim_ctx=Context.RESOURCE_QUERY_RESPONSE) for item in items],
    }


class ResourceTypesView(ScimView):
    def get(self, request: HttpRequest, name: str | None = None) -> HttpResponse:
        types = _resource_types(self.base_url)
        if name is None:
            return scim_response(_listed(types))
        for resource_type in types:
            if resource_type.id == name:
                return scim_response(
                    resource_type.model_dump(scim_ctx=Context.RESOURCE_QUERY_RESPONSE)
                )
        raise NotFoundException(detail=f"No resource type {name}.")


class SchemasView(ScimView):
    def get(self, request: HttpRequest, urn: str | None = None) -> HttpResponse:
        schemas = _schemas(self.base_url)
        if urn is None:
            return scim_response(_listed(schemas))
        for schema in schemas:
            if schema.id == urn:
                return scim_response(schema.model_dump(scim_ctx=Context.RESOURCE_QUERY_RESPONSE))
        raise NotFoundException(detail=f"No schema {urn}.")


class NotFoundView(ScimView):
    """Any other path under /scim/v2: SCIM's 404, once the token is known."""

    def _any(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        raise NotFoundException(detail=f"No SCIM endpoint {request.path}.")

    get = post = put = patch = delete = _any
