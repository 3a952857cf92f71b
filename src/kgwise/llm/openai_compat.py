"""``OpenAICompatible``: the OpenAI HTTP API and every server that speaks it (vLLM, Ollama, llama.cpp
server, LiteLLM proxy), over httpx with kgwise's own timeouts and retries.

Choice scoring uses ``/completions`` with ``echo`` and ``logprobs`` (prompt log-probabilities, offered by
llama-cpp-python's server, vLLM and the legacy OpenAI completions models); a server that refuses falls
back to asking for a letter through ``/chat/completions`` (``ChoiceScores.method == "letter"``).
Known server limits: upstream llama.cpp ``llama-server`` returns no prompt log-probabilities
(ggml-org/llama.cpp#27174), so scoring there falls back to letters; llama-cpp-python's server (0.3.36)
shifts echoed log-probabilities by one position when the prompt has no BOS token
(abetlen/llama-cpp-python#1983) — serve such models with ``--kv_overrides
tokenizer.ggml.add_bos_token=bool:true``.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, NoReturn, TypeVar

import httpx

from kgwise.errors import ConfigError
from kgwise.llm.answering import parse_choice
from kgwise.llm.base import (
    ChoiceScores,
    ContextLengthError,
    Generation,
    LLMError,
    Message,
    TransientLLMError,
    UsageError,
    as_messages,
)
from kgwise.llm.prices import PriceTable, default_prices
from kgwise.llm.registry import register_backend
from kgwise.retry import RetryPolicy, RetryStats, call_with_retry, parse_retry_after, send_once
from kgwise.types import Choice, Usage

__all__ = ["HTTPStatusError", "OpenAICompatible", "OpenAIConfig"]

OFFICIAL_BASE_URL = "https://api.openai.com/v1"
_T = TypeVar("_T")
_TOO_LONG = re.compile(r"context|too (long|many tokens)", re.I)
MAX_REPORTED_TOKENS = 10_000_000
"""Tokens one reply may report in a field: above every served model's context window (10⁷), so a larger
count is a broken or lying upstream, not a long prompt."""


@dataclass(frozen=True, slots=True)
class OpenAIConfig:
    """Where and what to call. Unset fields come from ``$OPENAI_BASE_URL``, ``$OPENAI_API_KEY`` and
    ``$KGWISE_LLM_MODEL``. ``logprobs``/``top_logprobs`` ask the chat endpoint for token
    log-probabilities; ``echo_scoring`` ``None`` means "try ``/completions`` echo, fall back on refusal"."""

    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    logprobs: bool = False
    top_logprobs: int = 0
    echo_scoring: bool | None = None
    seed: int | None = None

    def resolved(self) -> tuple[str, str, str | None]:
        model = self.model or os.environ.get("KGWISE_LLM_MODEL")
        if not model:
            raise ConfigError("no model for the OpenAI-compatible backend: use openai:MODEL "
                              "or set KGWISE_LLM_MODEL")
        base = (self.base_url or os.environ.get("OPENAI_BASE_URL") or OFFICIAL_BASE_URL).rstrip("/")
        key = self.api_key or os.environ.get("OPENAI_API_KEY")
        if key is None and base == OFFICIAL_BASE_URL:
            raise ConfigError("OPENAI_API_KEY is not set (needed for api.openai.com; set OPENAI_BASE_URL for "
                              "a local server)")
        return model, base, key


class OpenAICompatible:
    """An ``LLM`` over the OpenAI chat/completions HTTP API; thread-safe, so batches may share one."""

    def __init__(
        self,
        config: OpenAIConfig | None = None,
        *,
        retry: RetryPolicy | None = None,
        prices: PriceTable | None = None,
        client: httpx.Client | None = None,
        seed: int = 0,
    ) -> None:
        self.config = config or OpenAIConfig()
        self.model, self.base_url, key = self.config.resolved()
        self.name = f"openai:{self.model}"
        self.retry = retry or RetryPolicy()
        self.prices = prices if prices is not None else default_prices()
        self.priced = self.prices.lookup(self.model) is not None
        self.stats = RetryStats()
        headers = {"Content-Type": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self._client = client or httpx.Client(headers=headers, timeout=httpx.Timeout(self.retry.timeout_s))
        self._rng = random.Random(seed)
        self._rng_lock = threading.Lock()
        self._echo_ok: bool | None = self.config.echo_scoring
        self.streams_usage: bool | None = None
        """Whether the server reports usage at the end of a stream (``None``: not yet seen); ``False``
        after a stream without it, and later calls with ``on_text`` are then not streamed."""

    # --- transport -------------------------------------------------------------------------------------

    def _post_once(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.base_url}{path}"
        resp = send_once(lambda: self._client.post(url, json=payload, timeout=self.retry.timeout_s), url,
                         self.retry, TransientLLMError)
        if resp.status_code >= 400:
            self._refuse(resp, url)
        try:
            data = resp.json()
        except (json.JSONDecodeError, UnicodeDecodeError, ValueError) as exc:
            raise TransientLLMError(f"malformed: reply of {url} is not JSON: {resp.text[:120]!r}") from exc
        if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
            raise TransientLLMError(f"malformed: reply of {url} has no choices: {str(data)[:200]}")
        return data

    def _refuse(self, resp: httpx.Response, url: str) -> NoReturn:
        """Raise for an error status: transient when the retry policy lists it (with ``Retry-After``), a
        :class:`ContextTooLongError` for a 400/413 about the prompt's length, else
        :class:`HTTPStatusError`."""
        if resp.status_code in self.retry.statuses:
            raise TransientLLMError(f"HTTP {resp.status_code} from {url}: {resp.text[:200]}",
                                    status=resp.status_code, retry_after=parse_retry_after(resp.headers))
        message = f"HTTP {resp.status_code} from {url}: {resp.text[:500]}"
        if resp.status_code in (400, 413) and _TOO_LONG.search(resp.text):
            raise ContextTooLongError(message, resp.status_code)
        raise HTTPStatusError(message, resp.status_code)

    def _post(self, path: str, payload: dict[str, Any]) -> tuple[dict[str, Any], int]:
        return self._retrying(lambda: self._post_once(path, payload))

    def _retrying(self, once: Callable[[], _T]) -> tuple[_T, int]:
        """``once()`` under the retry policy, with its own jitter stream: ``(result, attempts)``."""
        with self._rng_lock:
            rng = random.Random(self._rng.random())
        return call_with_retry(once, self.retry, stats=self.stats, rng=rng)

    def _tokens(self, data: dict[str, Any]) -> tuple[int, int]:
        """The ``(prompt, completion)`` tokens a reply reports; ``LLMError`` when its usage is missing,
        negative, not a whole number or beyond :data:`MAX_REPORTED_TOKENS` (the call's cost cannot be
        known, and a retry would pay again)."""
        u = data.get("usage")
        if not isinstance(u, dict):
            raise UsageError(f"{self.name}: the reply reports no usage, so its cost cannot be known")
        out = []
        for key in ("prompt_tokens", "completion_tokens"):
            n = u.get(key, 0)
            if isinstance(n, float) and n.is_integer():
                n = int(n)
            if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_REPORTED_TOKENS:
                raise UsageError(f"{self.name}: the reply reports usage.{key} = {str(n)[:40]}, not a whole "
                               f"number of tokens from 0 to {MAX_REPORTED_TOKENS:g}")
            out.append(n)
        return out[0], out[1]

    def _usage(self, data: dict[str, Any], latency: float) -> Usage:
        tin, tout = self._tokens(data)
        cost = self.prices.cost(self.model, tin, tout)
        return Usage(tin, tout, 1, latency, cost or 0.0)

    # --- the LLM protocol ------------------------------------------------------------------------------

    honours_settings = True
    """``generate`` takes ``top_p``, ``seed`` and ``on_text`` too (:func:`kgwise.llm.base.tunable`)."""

    def generate(
        self,
        prompt: str | Sequence[Message],
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        stop: Sequence[str] | None = None,
        top_p: float = 1.0,
        seed: int | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> Generation:
        """The server's reply; ``top_p`` and ``seed`` (``None``: the config's) are sent with the request as
        OpenAI's parameters of those names (what the server makes of them is its own). With ``on_text`` the
        request is streamed (:meth:`_stream`): ``on_text`` gets each piece of text as the server sends it;
        from a server that has once streamed without reporting usage (:attr:`streams_usage`) the reply is
        not streamed, and ``on_text`` gets it as one piece once it has arrived."""
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [m.to_dict() for m in as_messages(prompt)],
            "max_tokens": max_tokens,
            "temperature": temperature,
        }
        if stop:
            payload["stop"] = list(stop)
        if top_p != 1.0:
            payload["top_p"] = top_p
        seed = self.config.seed if seed is None else seed
        if seed is not None:
            payload["seed"] = seed
        if self.config.logprobs or self.config.top_logprobs:
            payload["logprobs"] = True
            if self.config.top_logprobs:
                payload["top_logprobs"] = self.config.top_logprobs
        t0 = time.perf_counter()
        if on_text is not None and self.streams_usage is not False:
            return self._stream(payload, on_text, t0)
        data, attempts = self._post("/chat/completions", payload)
        choice = data["choices"][0]
        msg = choice.get("message") or {}
        text = msg.get("content") or ""
        if not isinstance(text, str):
            raise LLMError(f"{self.name}: message content is not text: {str(text)[:200]}")
        lps: list[float] = []
        tops: list[dict[str, float]] = []
        _logprobs(choice, lps, tops)
        if on_text is not None and text:
            on_text(text)
        return Generation(
            text,
            self._usage(data, time.perf_counter() - t0),
            finish_reason=str(choice.get("finish_reason") or ""),
            token_logprobs=tuple(lps),
            top_logprobs=tuple(tops),
            attempts=attempts,
        )

    def _stream(self, payload: dict[str, Any], on_text: Callable[[str], None], t0: float) -> Generation:
        """A streamed ``/chat/completions`` (``stream_options.include_usage``, so the server's last event
        reports the call's usage): each delta's text goes to ``on_text`` as it arrives. The usage is
        priced by the rule of a reply that is not streamed (:meth:`_tokens`: a stream that reports none is
        a :class:`UsageError`, the call's cost unknown; llama-cpp-python's server 0.3.36 ignores
        ``stream_options`` so, and :attr:`streams_usage` turns streaming off for later calls). A failure
        before the first piece of text is retried as any request's; one after it is final (``on_text`` has
        shown text a retry would repeat). An exception from ``on_text`` stops the reading, closes the
        upstream response and propagates as it is."""
        payload = payload | {"stream": True, "stream_options": {"include_usage": True}}
        url = f"{self.base_url}/chat/completions"

        def once() -> Generation:
            pieces: list[str] = []
            lps: list[float] = []
            tops: list[dict[str, float]] = []
            finish = ""
            usage: Any = None
            try:
                with self._client.stream("POST", url, json=payload, timeout=self.retry.timeout_s) as resp:
                    if resp.status_code >= 400:
                        resp.read()
                        self._refuse(resp, url)
                    for data in _events(resp, url):
                        usage = data.get("usage") or usage
                        choice = next((c for c in data.get("choices") or [] if isinstance(c, dict)), None)
                        if choice is None:
                            continue
                        finish = str(choice.get("finish_reason") or finish)
                        _logprobs(choice, lps, tops)
                        piece = (choice.get("delta") or {}).get("content")
                        if piece is not None and not isinstance(piece, str):
                            raise LLMError(f"{self.name}: delta content is not text: {str(piece)[:200]}")
                        if piece:
                            pieces.append(piece)
                            on_text(piece)
            except (httpx.TransportError, TransientLLMError) as exc:  # a timeout is a TransportError too
                if not isinstance(exc, TransientLLMError):
                    what = "timeout" if isinstance(exc, httpx.TimeoutException) else "connection"
                    exc = TransientLLMError(f"{what}: {url}: {type(exc).__name__}: {exc}")
                if pieces:
                    raise LLMError(f"{self.name}: the stream broke after its first text: {exc}") from exc
                raise exc from None
            self.streams_usage = usage is not None
            if usage is None:
                raise UsageError(f"{self.name}: the stream of {url} reports no usage (the server ignores "
                                 "stream_options.include_usage), so its cost cannot be known; later replies "
                                 "of this server are not streamed")
            return Generation("".join(pieces), self._usage({"usage": usage}, time.perf_counter() - t0),
                              finish_reason=finish, token_logprobs=tuple(lps), top_logprobs=tuple(tops))

        gen, attempts = self._retrying(once)
        return replace(gen, attempts=attempts)

    def score_choices(self, context: str, choices: Sequence[str]) -> ChoiceScores:
        if not choices:
            raise ValueError("score_choices needs at least one choice")
        if self._echo_ok is not False:
            try:
                scores = self._score_echo(context, choices)
                self._echo_ok = True
                return scores
            except _NoEchoError:
                if self._echo_ok is True:
                    raise LLMError(f"{self.name}: /completions stopped returning prompt "
                                   "log-probabilities") from None
                self._echo_ok = False
        return self._score_letter(context, choices)

    def _score_echo(self, context: str, choices: Sequence[str]) -> ChoiceScores:
        t0 = time.perf_counter()
        sums: list[float] = []
        means: list[float] = []
        counts: list[int] = []
        usage = Usage()
        for cont in choices:
            full = context + cont
            payload = {"model": self.model, "prompt": full, "max_tokens": 1, "temperature": 0.0,
                       "echo": True, "logprobs": 1}
            try:
                data, _ = self._post("/completions", payload)
            except HTTPStatusError as exc:
                if 400 <= exc.status < 500:
                    raise _NoEchoError() from exc
                raise
            lp = data["choices"][0].get("logprobs") or {}
            tokens, token_lps, offsets = lp.get("tokens"), lp.get("token_logprobs"), lp.get("text_offset")
            if not tokens or not token_lps or not offsets or min(offsets) >= len(full):
                raise _NoEchoError()  # no prompt tokens came back: the server ignored ``echo``
            picked: list[float] = []
            for tok, tlp, off in zip(tokens, token_lps, offsets, strict=False):
                if off >= len(full):
                    break  # the generated token after the echoed prompt
                if off + len(tok) > len(context) and off < len(full):
                    if tlp is None:
                        raise LLMError(f"{self.name}: no log-probability for the first token of {cont!r}")
                    picked.append(float(tlp))
            if not picked:
                raise LLMError(f"{self.name}: could not locate the tokens of choice {cont!r} in the echo")
            sums.append(sum(picked))
            means.append(sum(picked) / len(picked))
            counts.append(len(picked))
            usage = usage + Usage(*self._tokens(data), 1)
        cost = self.prices.cost(self.model, usage.input_tokens, usage.output_tokens) or 0.0
        usage = Usage(usage.input_tokens, usage.output_tokens, usage.calls, time.perf_counter() - t0, cost)
        return ChoiceScores(tuple(sums), tuple(means), usage, tuple(counts), method="logprob")

    def _score_letter(self, context: str, choices: Sequence[str]) -> ChoiceScores:
        labels = [chr(ord("A") + i) for i in range(len(choices))]
        opts = [Choice(lab, text.strip()) for lab, text in zip(labels, choices, strict=True)]
        prompt = "\n".join([context.strip(), "Options:", *(f"{c.label}. {c.text}" for c in opts),
                            "Reply with the letter of the correct option only."])
        gen = self.generate(prompt, max_tokens=8, temperature=0.0)
        idx = parse_choice(gen.text, opts)
        scores = [-math.inf] * len(choices)
        if gen.top_logprobs:
            for tok, lp in gen.top_logprobs[0].items():
                t = tok.strip().strip("()[].:*").upper()
                if t in labels:
                    k = labels.index(t)
                    scores[k] = max(scores[k], lp)
        if all(s == -math.inf for s in scores):
            if idx is None:
                raise LLMError(f"{self.name}: letter fallback could not parse a choice from {gen.text!r}")
            scores[idx] = 0.0
        ones = tuple(1 for _ in choices)
        return ChoiceScores(tuple(scores), tuple(scores), gen.usage, ones, method="letter")


def _logprobs(choice: dict[str, Any], lps: list[float], tops: list[dict[str, float]]) -> None:
    """Append a reply's (or a streamed chunk's) token log-probabilities to ``lps`` and its top
    alternatives to ``tops``."""
    for item in (choice.get("logprobs") or {}).get("content") or []:
        lps.append(float(item.get("logprob", -math.inf)))
        tops.append({str(t["token"]): float(t["logprob"]) for t in item.get("top_logprobs") or []})


def _events(resp: httpx.Response, url: str) -> Iterator[dict[str, Any]]:
    """The JSON objects of a server-sent event stream's ``data:`` lines, up to ``data: [DONE]`` (or the
    stream's end); a line that is not a JSON object is a malformed reply (:class:`TransientLLMError`), an
    ``{"error": …}`` event an :class:`LLMError` naming it."""
    for line in resp.iter_lines():
        if not line.startswith("data:"):
            continue  # blank separators, comments, ``event:``/``id:`` fields
        body = line[5:].strip()
        if body == "[DONE]":
            return
        try:
            data = json.loads(body)
        except ValueError as exc:
            raise TransientLLMError(f"malformed: an event of {url} is not JSON: {body[:120]!r}") from exc
        if not isinstance(data, dict):
            raise TransientLLMError(f"malformed: an event of {url} is not an object: {body[:120]!r}")
        if "error" in data:
            raise LLMError(f"the stream of {url} sent an error: {str(data['error'])[:300]}")
        yield data


class HTTPStatusError(LLMError):
    """A non-retryable HTTP error status (e.g. 400 bad request, 401 unauthorised, 404 not found)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class ContextTooLongError(HTTPStatusError, ContextLengthError):
    """An upstream's 400/413 saying the prompt exceeds the model's context."""


class _NoEchoError(Exception):
    """The server does not return prompt log-probabilities on ``/completions``."""


def _openai(model: str) -> OpenAICompatible:
    """``openai:MODEL``; a bare ``openai`` takes ``$KGWISE_LLM_MODEL``."""
    return OpenAICompatible(OpenAIConfig(model=model or None))


register_backend("openai", _openai, usage="openai:MODEL")
