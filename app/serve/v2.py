"""What `seglens-cli serve` answers looks like on the wire, where KServe's own answers are not the protocol's:
every error as `{"error": "<one line>"}` (a route or method KServe lacks, a body its schema refuses:
400, not FastAPI's 422 list), no `model_version: null` or `parameters: null` in an infer answer, the advertised
repository extension's `v2/repository/index`, and a cap on a request's declared body. Starlette and FastAPI
only, never kserve (pyproject's `kserve-only-in-serve`): app.serve.server wires these onto KServe's app.
"""

from __future__ import annotations

from typing import Any

JSON_LENGTH_HEADER = "inference-header-content-length"


def v2_body(body: Any, headers: dict[str, str]) -> tuple[Any, dict[str, str]]:
    """An infer answer as the protocol writes it: no `model_version: null` (absent, or a string) and no
    `parameters: null` on an output (absent, or an object). A JSON answer becomes bytes (KServe's pydantic model
    would write its nulls back), sent as application/json; a binary one gets its JSON header rewritten, its
    length header with it. A cloud event (its own content type) is left as it is."""
    import orjson

    if "content-type" in headers:
        return body, headers
    if isinstance(body, dict):
        return orjson.dumps(_without_nulls(body)), {**headers, "Content-Type": "application/json"}
    length = headers.get(JSON_LENGTH_HEADER)
    if isinstance(body, bytes) and length is not None and length.isdigit():
        head = orjson.dumps(_without_nulls(orjson.loads(body[:int(length)])))
        return b"".join((head, memoryview(body)[int(length):])), {**headers, JSON_LENGTH_HEADER: str(len(head))}
    return body, headers


def _without_nulls(answer: Any) -> Any:
    if not isinstance(answer, dict):
        return answer
    clean = {key: value for key, value in answer.items() if value is not None}
    if isinstance(clean.get("outputs"), list):
        clean["outputs"] = [{k: v for k, v in item.items() if v is not None} if isinstance(item, dict) else item
                            for item in clean["outputs"]]
    return clean


def add_v2_routes(app: Any, extension: Any) -> None:
    """What KServe's REST app lacks of the protocol: `POST v2/repository/index` (the repository extension is
    advertised in `v2`), and every error as `{"error": "<one line>"}` — a route it does not have (404), a method
    (405), a request body its schema refuses (400, where FastAPI said 422 with a list of `detail`s)."""
    from fastapi.exceptions import RequestValidationError
    from starlette.exceptions import HTTPException
    from starlette.responses import JSONResponse

    async def index() -> list[dict[str, str]]:
        found: list[dict[str, str]] = await extension.index()
        return found

    async def http_error(_request: Any, exc: HTTPException) -> JSONResponse:
        return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code, headers=exc.headers)

    async def invalid_request(_request: Any, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"error": refused_request_line(exc.errors())}, status_code=400)

    app.add_api_route("/v2/repository/index", index, methods=["POST"])
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(RequestValidationError, invalid_request)


def body_limit(max_bytes: int) -> type:
    """A pure ASGI middleware: a request declaring a body over `max_bytes` is answered 413 before a byte of it is
    read, a chunked one (no length to check) 411 — KServe reads every body whole into memory, so without it one
    client could make the server hold gigabytes (gRPC has the same limit on its messages). The HTTP parser reads
    exactly the declared length, so a body cannot run past it."""
    from starlette.responses import JSONResponse

    class BodyLimit:
        def __init__(self, app: Any) -> None:
            self.app = app

        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http" or scope.get("method") in ("GET", "HEAD", "OPTIONS"):
                await self.app(scope, receive, send)
                return
            headers = dict(scope.get("headers") or ())
            length = headers.get(b"content-length", b"").decode("latin-1").strip()
            problem = None
            if b"transfer-encoding" in headers:
                problem = (411, "a request body needs a Content-Length (a byte count), not a chunked one")
            elif length and not length.isdigit():
                problem = (400, f"the Content-Length {length[:20]!r} is not a byte count")
            elif length and int(length) > max_bytes:
                problem = (413, f"the request declares {int(length)} bytes; the limit is {max_bytes}")
            if problem is not None:
                await JSONResponse({"error": problem[1]}, status_code=problem[0],
                                   headers={"Connection": "close"})(scope, receive, send)
                return
            await self.app(scope, receive, send)

    return BodyLimit


def refused_request_line(errors: Any) -> str:
    """FastAPI's validation errors as one line: where in the request and what ('inputs.0.name: Field required').
    Its alternative reading of the body as raw bytes (the binary extension's) is left out: a JSON body was sent."""
    parts = []
    for error in errors if isinstance(errors, list | tuple) else ():
        where = [str(p) for p in error.get("loc", ()) if p not in ("body", "InferenceRequest")]
        if where == ["bytes"]:
            continue
        parts.append(f"{'.'.join(where) or 'the body'}: {error.get('msg', 'invalid')}")
    return "invalid request: " + ("; ".join(parts[:5]) or "not the protocol's JSON")
