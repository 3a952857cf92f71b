"""Malformed requests, generated field by field for every endpoint, against a real pipeline served by a real
uvicorn on 127.0.0.1: ChatGPT's recorded WebQSP answers as an arm kgwise runs, an external arm the caller
runs (``/v1/route*``), the real question encoder and a graph. Each request is refused with a 4xx that
names what is wrong (the field, ``body`` or the method), never a 5xx, never echoing a huge value; the state
(every byte of the state folder, the spend, the pending decisions) is the same afterwards.

The cases: per JSON endpoint, its valid body with each field in turn missing, of each wrong type, too
long or too large, NaN / ±Infinity / 1e999, and an unknown field; per endpoint, bodies that are not JSON
(truncated, empty, invalid UTF-8, deeply nested), not an object, sent with another content type, or over
the body cap; and wrong methods and unknown ids on the GET endpoints (models, status, the page).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from kgwise.server import ServerSettings, create_app

BODY_CAP = 64_000
MISSING = object()


@dataclass(frozen=True)
class Case:
    """One request: ``body`` raw bytes (None: none); ``names``: what the 4xx must name (lower case)."""

    method: str
    path: str
    body: bytes | None
    names: str
    content_type: str = "application/json"

    def label(self) -> str:
        return f"{self.method} {self.path} {self.body[:80]!r} → {self.names}" if self.body else \
            f"{self.method} {self.path} → {self.names}"


def _set(body: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    """A deep copy of ``body`` with the field at ``dotted`` (``a.0.b``) set to ``value`` (removed for
    MISSING)."""
    out = json.loads(json.dumps(body))
    *parents, last = dotted.split(".")
    node: Any = out
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node.setdefault(p, {})
    if value is MISSING:
        del node[last]
    else:
        node[last] = value
    return out


TEXT_WRONG: list[Any] = [None, 5, 1.5, True, [], {}, ["a"]]  # a string field given anything else
BOOL_WRONG: list[Any] = ["maybe", 2, [], {}, 1.5]  # pydantic reads "true", 1, 0 as booleans: not wrong
NUMBER_WRONG: list[Any] = ["x", None, [], {}, -1, float("nan"), float("inf"), float("-inf"), 1e999]
HUGE_TEXT = "x" * 20_000  # beyond every field's cap, within the body cap


def _endpoints(decision: str, routed: str, question: str) -> dict[str, tuple[dict[str, Any], list[str],
                                                                              dict[str, list[Any]]]]:
    """Per JSON endpoint: a valid body, its required fields, and per field the wrong values to send."""
    chat = {"model": "kgwise", "messages": [{"role": "user", "content": question}]}
    choices_wrong = ["ab", 5, [], ["only one"], [None, "b"], [1, 2], [str(i) for i in range(27)], {}]
    return {
        "/v1/chat/completions": (chat, ["model", "messages"], {
            "model": [*TEXT_WRONG, "", "m" * 201, "kgwise/no-such-arm", "other"],
            "messages": ["hi", 5, {}, None, [], [None], [{"role": "user"}] * 257],
            "messages.0.role": [None, 5, "king", ""], "messages.0.content": [5, {}, [{"type": "image"}],
                                                                             "x" * 8001, [1]],
            "stream": BOOL_WRONG, "n": ["x", None, 0, -1, 2, 1.5], "kgwise": ["x", 5, []],
            "kgwise.choices": choices_wrong, "kgwise.explain": BOOL_WRONG,
            "stream_options": ["x", 5], "stream_options.include_usage": BOOL_WRONG,
            "tools": [[{"type": "function"}]], "logit_bias": [{"1": 5}]}),
        "/v1/completions": ({"model": "kgwise", "prompt": question}, ["model", "prompt"], {
            "model": [*TEXT_WRONG, ""], "prompt": [None, 5, {}, [], ["a", "b"], [5], "x" * 8001, ""],
            "n": ["x", 0, 3], "stream": BOOL_WRONG[:3], "kgwise.choices": choices_wrong[:4],
            "echo": [True]}),
        "/v1/evidence": ({"question": question, "choices": ["a", "b"]}, ["question"], {
            "question": [*TEXT_WRONG, "", HUGE_TEXT, "\ud800"], "choices": choices_wrong,
            "model": [5, "", "other", "m" * 201], "bogus": [1]}),
        "/v1/feedback": ({"decision_id": decision, "correct": True}, ["decision_id"], {
            "decision_id": [*TEXT_WRONG, "", "d" * 201, "no-such-decision", "\udfff"],
            "correct": BOOL_WRONG, "gold": [5, [], "", HUGE_TEXT], "model": [5, [], "other"],
            "bogus": [1]}),
        "/v1/route": ({"question": question, "costs": {"mine": 0.01}}, ["question"], {
            "question": [*TEXT_WRONG, "", HUGE_TEXT, "\ud800"], "costs": ["cheap", [0.1], {}, 5],
            "costs.mine": NUMBER_WRONG, "costs.nobody": [0.1], "model": [5, "other"], "bogus": [1]}),
        "/v1/route/feedback": ({"decision": routed, "reward": 1, "cost": 0.0},
                               ["decision", "reward", "cost"], {
            "decision": [*TEXT_WRONG, "", "d" * 65, "no-such-decision", "\ud800"],
            "reward": [*NUMBER_WRONG, 2, -0.1], "cost": NUMBER_WRONG,
            "observed": ["mine", [], 5], "observed.mine": ["x", 2, None, float("nan")], "bogus": [1]}),
        "/v1/route/cancel": ({"decision": routed}, ["decision"], {
            "decision": [*TEXT_WRONG, "", "d" * 65, "no-such-decision"], "bogus": [1]}),
    }


def _cases(decision: str, routed: str, question: str) -> list[Case]:
    cases: list[Case] = []
    for path, (valid, required, wrong) in _endpoints(decision, routed, question).items():
        for name in required:
            cases.append(Case("POST", path, json.dumps(_set(valid, name, MISSING)).encode(), name))
        for dotted, values in wrong.items():
            field = next(part for part in reversed(dotted.split(".")) if not part.isdigit()).lower()
            for value in values:
                # json.dumps writes NaN, Infinity and lone surrogates (as escapes), as a hostile client does
                cases.append(Case("POST", path, json.dumps(_set(valid, dotted, value)).encode(), field))
        raw = json.dumps(valid).encode()
        for body in (b"{", b"", b"[", raw[:-1], b"nul", b'{"' + b"\xff\xfe" + b'": 1}',
                     raw.replace(b'"', b"'"), b"[" * 5000 + b"]" * 5000):
            cases.append(Case("POST", path, body, "body"))
        for body in (b"[]", b'"text"', b"5", b"null", json.dumps([valid]).encode()):
            cases.append(Case("POST", path, body, "body"))
        for ctype in ("text/plain", "application/x-www-form-urlencoded"):
            cases.append(Case("POST", path, b"question=x&model=kgwise", "body", ctype))
        cases.append(Case("POST", path, json.dumps({**valid, "pad": "x" * BODY_CAP}).encode(), "body"))
        cases.append(Case("GET", path, None, "method"))
    for path in ("/health", "/v1/models", "/v1/models/kgwise", "/v1/status", "/v1/route/status", "/"):
        cases.append(Case("POST", path, b"{}", "method"))
        cases.append(Case("PUT", path, b"{}", "method"))
    for path in ("/v1/models/no-such-model", "/v1/models/kgwise/no-such-arm", "/v1/models/%ff%fe",
                 "/v1/models/" + "m" * 3000):
        cases.append(Case("GET", path, None, "model"))
    for path in ("/v1/nothing", "/static/../../etc/passwd", "/static/%2e%2e/%2e%2e/etc/passwd",
                 "/static/no-such-file.js", "/v1/status/extra"):
        cases.append(Case("GET", path, None, "not found"))
    return cases


@pytest.fixture
def served(tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch,
           make_replay_external: Any) -> Iterator[tuple[Any, str]]:
    """A real pipeline (a recorded-answers arm and an external arm, the real encoder, a small graph) and
    a question it has a recorded answer for."""
    monkeypatch.setenv("KGWISE_CACHE", str(tmp_path / "cache"))
    from kgwise.datasets import load

    pipe = make_replay_external(tmp_path)
    try:
        yield pipe, load("webqsp", "test", data_dir)[0].text
    finally:
        pipe.close()


def _state_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_every_endpoint_refuses_malformed_requests_with_a_4xx_naming_the_field(
        served: tuple[Any, str], tmp_path: Path, serve_pipelines: Any) -> None:
    from kgwise.server.pipeline_adapter import pipeline_hub

    pipe, question = served
    app = create_app(ServerSettings(max_body_bytes=BODY_CAP), pipelines=pipeline_hub({"kgwise": pipe}))
    with serve_pipelines({}, app) as url, httpx.Client(base_url=url, timeout=60) as client:
        # a real answer and a real external decision, so feedback, settle and cancel meet live ones
        chat = client.post("/v1/chat/completions", json={"model": "kgwise", "messages": [
            {"role": "user", "content": question}]})
        assert chat.status_code == 200, chat.text
        routed = client.post("/v1/route", json={"question": question, "costs": {"mine": 0.01}})
        assert routed.status_code == 200, routed.text
        cases = _cases(chat.json()["kgwise"]["decision_id"], routed.json()["decision"], question)
        state = tmp_path / "state"
        before = _state_bytes(state), client.get("/v1/status").json()["pipelines"][0]
        failures, by_status = [], dict[int, int]()
        for case in cases:
            headers = {"content-type": case.content_type}
            res = client.request(case.method, case.path, content=case.body, headers=headers)
            by_status[res.status_code] = by_status.get(res.status_code, 0) + 1
            text = res.text.lower()
            if not 400 <= res.status_code < 500:
                failures.append(f"{case.label()}: {res.status_code} {res.text[:200]}")
            elif case.names not in text.replace("_", " ") and case.names not in text:
                failures.append(f"{case.label()}: {res.status_code} does not name it: {res.text[:200]}")
            elif len(res.content) > 5_000:  # a huge value is never echoed back
                failures.append(f"{case.label()}: {len(res.content)} bytes answered")
        after = _state_bytes(state), client.get("/v1/status").json()["pipelines"][0]
    endpoints = {c.path for c in cases}
    print(f"{len(cases)} malformed requests over {len(endpoints)} paths: statuses "
          f"{sorted(by_status.items())}")
    assert len(cases) >= 150
    assert not failures, "\n".join(failures) + f"\n({len(failures)} of {len(cases)})"
    assert after[0] == before[0]  # not a byte of the state folder changed
    assert (after[1]["spent"], after[1]["pending"]) == (before[1]["spent"], before[1]["pending"])
