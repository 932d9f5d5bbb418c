"""Who may call `seglens-cli serve`: one bearer token, checked in constant time on REST and gRPC alike, and the
rule that a server reachable beyond this machine has one.

`v2/health/live` and `v2/health/ready` stay open on both (an orchestrator's liveness and readiness probes carry
no token, and they say nothing about the models); everything else — model metadata and readiness, infer, the
repository — asks for `Authorization: Bearer <token>`. A server reachable beyond this machine needs a token of
at least MIN_PUBLIC_TOKEN characters (a 1-character token is guessed at once). The token is never logged and
never echoed in a refusal.
"""

from __future__ import annotations

import hmac
import ipaddress
import socket
from dataclasses import dataclass, field
from typing import Any

from app.errors import SegLensError

OPEN_REST_PATHS = frozenset({"/v2/health/live", "/v2/health/ready"})
OPEN_GRPC_METHODS = frozenset({"/inference.GRPCInferenceService/ServerLive",
                               "/inference.GRPCInferenceService/ServerReady"})
MIN_PUBLIC_TOKEN = 16  # characters: a server other machines reach is guessed at by them
UNAUTHORIZED = "unauthorized: this server wants 'Authorization: Bearer <token>'"


@dataclass(frozen=True)
class Auth:
    """The expected bearer token, or None for an open server (loopback only, or --no-auth)."""

    token: str | None = field(default=None, repr=False)

    @property
    def required(self) -> bool:
        return self.token is not None

    def allows(self, header: str | None) -> bool:
        """Whether an Authorization header value carries the token (constant time in the token's bytes)."""
        if self.token is None:
            return True
        expected = f"Bearer {self.token}".encode()
        return hmac.compare_digest((header or "").strip().encode("utf-8", "surrogateescape"), expected)


def is_loopback(host: str) -> bool:
    """Whether `host` binds this machine only: 127.0.0.0/8, ::1, or a name resolving to loopback only."""
    text = host.strip().strip("[]")
    try:
        return ipaddress.ip_address(text).is_loopback
    except ValueError:
        pass
    try:
        addresses = {str(info[4][0]) for info in socket.getaddrinfo(text, None)}
    except (OSError, UnicodeError):
        return False  # cannot tell: treat as reachable
    return bool(addresses) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses)


def check_exposure(host: str, auth: Auth, *, no_auth: bool, tls: bool = True) -> str | None:
    """Refuse an open server beyond loopback, or one whose token is shorter than MIN_PUBLIC_TOKEN there
    (SegLensError, one line); returns a warning line for --no-auth there, and for a token served without TLS
    there (`tls` False: every client sends it in clear text, and SegLens's own refuse to unless told)."""
    if is_loopback(host):
        return None
    if auth.token is not None and len(auth.token) < MIN_PUBLIC_TOKEN:
        raise SegLensError(f"serve on {host} would be reachable from other machines with a token of "
                           f"{len(auth.token)} characters: give one of at least {MIN_PUBLIC_TOKEN} (a random one: "
                           "python -c 'import secrets; print(secrets.token_urlsafe(32))'), or bind 127.0.0.1")
    if auth.required:
        return None if tls else (f"warning: serving on {host} without TLS: clients send the token in clear text, "
                                 "readable on the way (seglens clients refuse unless --allow-insecure); give "
                                 "--tls-cert and --tls-key")
    if not no_auth:
        raise SegLensError(f"serve on {host} would be reachable from other machines without a token: set one "
                           "(--token-env VAR, default SEGLENS_SERVE_TOKEN) or bind 127.0.0.1; --no-auth serves "
                           "it open anyway")
    return f"warning: serving on {host} with no token (--no-auth): anyone who reaches this port can run the models"


def rest_middleware(auth: Auth) -> type:
    """A Starlette middleware class refusing requests without the token (401, one-line JSON error)."""
    from starlette.middleware.base import BaseHTTPMiddleware
    from starlette.responses import JSONResponse

    class BearerAuth(BaseHTTPMiddleware):
        async def dispatch(self, request: Any, call_next: Any) -> Any:
            if request.url.path in OPEN_REST_PATHS or auth.allows(request.headers.get("authorization")):
                return await call_next(request)
            return JSONResponse({"error": UNAUTHORIZED}, status_code=401,
                                headers={"WWW-Authenticate": "Bearer"})

    return BearerAuth


def grpc_interceptor(auth: Auth) -> Any:
    """A grpc.aio server interceptor answering UNAUTHENTICATED without the token (metadata key `authorization`)."""
    import grpc

    class GrpcBearerAuth(grpc.aio.ServerInterceptor):  # type: ignore[misc]
        async def intercept_service(self, continuation: Any, details: Any) -> Any:
            if details.method in OPEN_GRPC_METHODS:
                return await continuation(details)
            metadata = dict(details.invocation_metadata or ())
            if auth.allows(metadata.get("authorization")):
                return await continuation(details)

            async def deny(request: Any, context: Any) -> None:
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, UNAUTHORIZED)

            return grpc.unary_unary_rpc_method_handler(deny)

    return GrpcBearerAuth()
