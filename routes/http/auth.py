"""Optional API-key auth (``GENAI_API_KEY``) and CORS (``GENAI_CORS_ORIGINS``).

Auth is an ASGI middleware rather than a route dependency so that it also covers routes mounted
later by others (``/metrics``) and cannot be forgotten on a new router. Open without a key:
``/healthz`` (and its aliases ``/health``, ``/v1/health``), ``/readyz`` (probes) and the API
description (``/docs``, ``/redoc``, ``/openapi.json``: it holds no data, and Swagger's
"Authorize" button needs it), and the web playground's own files (routes/web.py: the page asks
for the key and sends it on its API calls). ``/metrics`` and the render routes are open only
when ``GENAI_METRICS_OPEN`` / ``GENAI_RENDER_OPEN`` say so (the gateway's endpoint picker sends
no key).

A request let in carries its key's owner (:func:`request_owner`: a hash of the key, never the
key), so that what a key stores (Responses) and what it runs (the in-flight requests a caller
may list and cancel) are that key's alone; the cores see it as ``backends.core.owner``. It also
carries its key's role: an admin key (``GENAI_ADMIN_API_KEY``) is the only kind the /admin
routes take, and does all a user key (``GENAI_API_KEY``) does. On an open path a valid key is
still read (an open route may give a keyed caller more: a path in /health, a fetched image on
a render route); a missing or wrong one is no error there.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from backends.core.owner import reset_owner, set_owner
from config.settings import ServerSettings, split_csv
from routes.web import page_paths
from schemas.errors import error_body

log = logging.getLogger("genai.auth")

OPEN_PATHS = frozenset(
    {"/healthz", "/health", "/v1/health", "/readyz", "/docs", "/docs/oauth2-redirect", "/redoc"}
)
OPENAPI_PATH = "/openapi.json"
OWNER = "key_owner"  # where ApiKeyMiddleware leaves a request's owner, in its state
ROLE = "key_role"  # and its key's role: "admin" or "user"
# Opened by settings, for the inference gateway's endpoint picker, which sends no key.
METRICS_PATH = "/metrics"
RENDER_PATHS = frozenset({"/v1/chat/completions/render", "/v1/completions/render"})


def bearer_token(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def matching_key(given: str, keys: list[str]) -> str | None:
    """The key ``given`` is, compared in constant time with every key (no early exit on the
    first match); None for none."""
    found = None
    for key in keys:
        if hmac.compare_digest(given.encode(), key.encode()):
            found = key
    return found


def key_owner(key: str) -> str:
    """Whose a stored thing is: the key's SHA-256 (what a store may keep; the key it may not)."""
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def request_owner(request: Request) -> str | None:
    """The owner of the key that let ``request`` in; None when no key is asked for (or none
    was sent to an open path)."""
    owner: str | None = getattr(request.state, OWNER, None)
    return owner


def keys_set(settings: ServerSettings) -> bool:
    return bool(settings.api_keys or settings.admin_keys)


def is_admin(request: Request, settings: ServerSettings) -> bool:
    """Whether ``request`` came with an admin key; without keys every caller is one (the
    admin routes are then on or off as a whole: GENAI_ADMIN)."""
    return not keys_set(settings) or getattr(request.state, ROLE, None) == "admin"


def anonymous(request: Request, settings: ServerSettings) -> bool:
    """Whether ``request`` reached a route opened to callers without a key (the render routes,
    /metrics, the probes) and sent none: keys are set, and none let it in."""
    return keys_set(settings) and request_owner(request) is None


class ApiKeyMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        keys: list[str],
        open_paths: frozenset[str],
        admin_keys: list[str] | None = None,
    ) -> None:
        self.app = app
        self.admin_keys = list(admin_keys or [])
        self.keys = [*keys, *self.admin_keys]
        self.open_paths = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        # Anthropic's clients send the key as `x-api-key`; either header will do.
        bearer = bearer_token(headers.get("authorization"))
        given = [t for t in (bearer, headers.get("x-api-key", "").strip()) if t]
        key = next((k for k in (matching_key(t, self.keys) for t in given) if k), None)
        if key is not None or scope["path"] in self.open_paths:
            owner = None
            if key is not None:
                owner = key_owner(key)
                admin = matching_key(key, self.admin_keys) is not None
                state = scope.setdefault("state", {})
                state[OWNER], state[ROLE] = owner, "admin" if admin else "user"
            token = set_owner(owner)
            try:
                await self.app(scope, receive, send)
            finally:
                reset_owner(token)
            return
        message = (
            "Missing API key: send `Authorization: Bearer <key>` (or `x-api-key: <key>`)."
            if not given
            else "Invalid API key."
        )
        body = error_body(message, "authentication_error", code="invalid_api_key")
        response = JSONResponse(body, 401, headers={"WWW-Authenticate": "Bearer"})
        await response(scope, receive, send)


def _document_bearer_auth(app: FastAPI, open_paths: frozenset[str]) -> Callable[[], dict[str, Any]]:
    original = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = original()
        components = schema.setdefault("components", {})
        components.setdefault("securitySchemes", {})["apiKey"] = {
            "type": "http",
            "scheme": "bearer",
            "description": "One of the keys in GENAI_API_KEY (or GENAI_ADMIN_API_KEY).",
        }
        unauthorized = {
            "description": "Missing or invalid API key",
            "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}
            },
        }
        for path, operations in schema.get("paths", {}).items():
            if path in open_paths:
                continue
            for operation in operations.values():
                operation["security"] = [{"apiKey": []}]
                operation.setdefault("responses", {}).setdefault("401", unauthorized)
        app.openapi_schema = schema
        return schema

    return openapi


def picker_paths(settings: ServerSettings) -> frozenset[str]:
    """What GENAI_METRICS_OPEN and GENAI_RENDER_OPEN open."""
    metrics = {METRICS_PATH} if settings.metrics_open else set()
    return frozenset(metrics | (RENDER_PATHS if settings.render_open else set()))


def install_auth_and_cors(app: FastAPI, settings: ServerSettings) -> None:
    keys = settings.api_keys
    if keys_set(settings):
        # The playground's own files (listed from its folder) are open; its API calls are not.
        page = page_paths() if settings.web_ui else frozenset()
        open_paths = OPEN_PATHS | {OPENAPI_PATH} | page | picker_paths(settings)
        app.add_middleware(
            ApiKeyMiddleware, keys=keys, open_paths=open_paths, admin_keys=settings.admin_keys
        )
        if settings.admin_enabled and not settings.admin_keys:
            log.info(
                "the /admin routes take an admin key and none is set: every key gets 403 there; "
                "set GENAI_ADMIN_API_KEY to use them"
            )
        app.openapi = _document_bearer_auth(app, open_paths)  # type: ignore[method-assign]
    origins = split_csv(settings.cors_origins)
    if origins:
        # Added last, so outermost: preflight requests are answered before auth runs.
        app.add_middleware(
            CORSMiddleware,
            allow_origins=origins,
            allow_methods=["*"],
            allow_headers=["*"],
            allow_credentials="*" not in origins,
            expose_headers=["X-Request-ID"],  # readable by the page's scripts
        )
