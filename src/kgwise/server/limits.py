"""What a request may hold, and how a refused one is answered: field types with size caps that refuse
lone surrogates and non-finite numbers, and error handlers that can serialise any request (a 4xx naming
the field, never the offending value, never a 500)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import AfterValidator, Field, StringConstraints

from kgwise.app.journal import StateReadOnlyError
from kgwise.errors import KgwiseError

__all__ = ["MAX_ID", "MAX_QUESTION", "Choice", "Ident", "Money", "QuestionText", "Unit", "field_error",
           "install_handlers", "safe_text"]

MAX_QUESTION = 8_000  # characters of a question
MAX_CHOICE = 1_000  # characters of an answer choice
MAX_ID = 128  # characters of an id, an arm name, a combination

_log = logging.getLogger("kgwise.server")


def _utf8(text: str) -> str:
    """Refuse text that UTF-8 cannot hold (a lone surrogate such as ``"\\ud800"``, which JSON can escape)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"holds a lone surrogate at character {exc.start} (not valid Unicode)") from None
    return text


QuestionText = Annotated[str, StringConstraints(min_length=1, max_length=MAX_QUESTION), AfterValidator(_utf8)]
Choice = Annotated[str, StringConstraints(max_length=MAX_CHOICE), AfterValidator(_utf8)]
Ident = Annotated[str, StringConstraints(max_length=MAX_ID), AfterValidator(_utf8)]
Money = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
Unit = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]


def safe_text(value: object, limit: int = 300) -> str:
    """``value`` as short, valid UTF-8 text for an error message (lone surrogates escaped, cut at
    ``limit`` characters)."""
    text = str(value)
    if len(text) > limit:
        text = text[:limit] + "…"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _where(loc: Sequence[Any]) -> str:
    parts = [safe_text(p, 64) for p in loc if p != "body"]
    return ".".join(parts) or "body"


def field_error(error: Mapping[str, Any]) -> tuple[str, str]:
    """The field a validation error is about and its message: ``body`` for a body that is not JSON (whose
    location pydantic gives as the character offset, which no client would read as a field) or not an
    object."""
    msg = safe_text(error.get("msg", "invalid"))
    loc = tuple(error.get("loc", ()))
    if error.get("type") == "json_invalid":
        at = f" at character {loc[-1]}" if len(loc) > 1 else ""
        return "body", f"not valid JSON{at} ({msg})"
    if loc in ((), ("body",)):
        return "body", f"expected a JSON object ({msg})" if "dictionary" in msg else msg
    return _where(loc), msg


def install_handlers(app: FastAPI) -> None:
    """4xx answers for refused requests: 422 for a body that does not validate (each error's ``field``
    and ``msg``; the value is not echoed), 422 for kgwise's own errors, 400 for a body nested too deeply
    to parse."""

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{"field": f, "msg": m, "type": safe_text(e.get("type", "value_error"), 64)}
                  for e in exc.errors()[:20] for f, m in [field_error(e)]]
        summary = "; ".join(f"{e['field']}: {e['msg']}" for e in errors)
        return JSONResponse(status_code=422, content={"detail": errors, "message": safe_text(summary, 1000)})

    @app.exception_handler(KgwiseError)
    async def unprocessable(_: Request, exc: KgwiseError) -> JSONResponse:
        """kgwise's own errors are about the request (unknown entity, bad combination, cost): 422; a state
        that cannot be written is the server's: 503 with ``Retry-After`` (nothing was acknowledged)."""
        if isinstance(exc, StateReadOnlyError):
            return JSONResponse(status_code=503, content={"detail": safe_text(exc, 1000)},
                                headers={"Retry-After": str(max(1, int(exc.retry_after_s)))})
        return JSONResponse(status_code=422, content={"detail": safe_text(exc, 1000)})

    @app.exception_handler(RecursionError)
    async def too_deep(_: Request, exc: RecursionError) -> JSONResponse:
        return JSONResponse(status_code=400, content={"detail": "body: JSON nested too deeply"})
