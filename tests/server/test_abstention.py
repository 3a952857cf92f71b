"""Abstention through the HTTP door: a served pipeline with ``[answer_sets] abstain`` (the stub-armed
pipeline of ``tests/app``: a test double of the arms only) answers "not sure" with its set in the message,
carries the promise in the ``kgwise`` field, and ``/v1/status`` shows per arm the share answered and the
accuracy among answered, live from feedback (the web page: ``test_abstention_page``)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
from tests.app.conftest import dev_rows, write_questions
from tests.app.test_pipeline import make, question

from kgwise.app.config import AnswerSetConfig
from kgwise.app.fit import fit
from kgwise.server.pipeline_adapter import ServedPipeline


def abstaining(tmp_path: Path) -> ServedPipeline:
    """The stub-armed pipeline at α = 0.3 with abstention, fitted on 160 dev questions: the free arm
    certifies no threshold, the dear one (right on .9) answers its confident answers."""
    pipe = make(tmp_path, cheap=0.1, dear=0.3, budget=1000.0)
    pipe.config = replace(pipe.config, answer_sets=AnswerSetConfig(alpha=0.3, abstain=True))
    fit(pipe, write_questions(tmp_path, dev_rows(20)), max_spend=1000.0, echo=lambda _: None)
    return ServedPipeline(pipe)


def test_not_sure_carries_its_set_and_status_counts_answers_live(tmp_path: Path, serve_pipelines: Any
                                                                 ) -> None:
    with serve_pipelines({"kgwise": abstaining(tmp_path)}) as url, httpx.Client(base_url=url) as http:
        seen = {True: 0, False: 0}
        for i in range(12):
            text, choices = question(i)
            body = http.post("/v1/chat/completions", json={
                # the router sends these to the free arm, which certifies nothing; the forced arm 'dear'
                # (right on .9 of the dev questions) answers its confident ones
                "model": "kgwise" if i % 2 else "kgwise/dear",
                "messages": [{"role": "user", "content": text}], "kgwise": {"choices": choices}}).json()
            extra, content = body["kgwise"], body["choices"][0]["message"]["content"]
            ab = extra["abstention"]
            seen[ab["abstained"]] += 1
            if ab["abstained"]:
                assert content.startswith("not sure: one of ") and ab["promise"].startswith("not sure: ")
                members = extra["answer_set"]["members"]
                assert all(f"{m}) " in content for m in members)
            else:
                assert content == f"{extra['choice']}) {extra['answer']}"
                assert ab["promise"].startswith("accuracy ≥")
            assert http.post("/v1/feedback", json={"model": "kgwise", "decision_id": extra["decision_id"],
                                                   "correct": True}).status_code == 200
        arms = http.get("/v1/status").json()["pipelines"][0]["arms"]
    assert seen[True] and seen[False], seen  # both kinds of answer were checked
    counts = [a["abstention"] for a in arms]
    assert sum(c["asked"] for c in counts) == 12 and sum(c["answered"] for c in counts) == seen[False]
    for c in counts:
        if c["asked"]:
            assert c["share_answered"] == c["answered"] / c["asked"]
            assert c["graded"] == c["answered"] and (c["accuracy_answered"] == 1.0 or not c["graded"])

