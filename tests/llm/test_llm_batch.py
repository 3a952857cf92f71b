"""The resumable batch runner on plain functions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgwise.errors import ConfigError, DataError, KgwiseError
from kgwise.files import TornLineWarning
from kgwise.llm.batch import read_done, run_batch


def test_resume_skips_done_and_retries_failed(tmp_path: Path) -> None:
    out = tmp_path / "b.jsonl"
    calls: list[int] = []

    def flaky(x: int) -> int:
        calls.append(x)
        if x % 5 == 0 and calls.count(x) == 1:
            raise KgwiseError(f"first try of {x} fails")
        return x * x

    r1 = run_batch(((str(i), i) for i in range(20)), flaky, out, concurrency=3, progress=False)
    assert set(r1.failed) == {"0", "5", "10", "15"}
    assert len(r1.results) == 16
    r2 = run_batch(((str(i), i) for i in range(20)), flaky, out, concurrency=3, progress=False)
    assert r2.resumed == 16 and r2.ran == 4 and not r2.failed
    assert r2.results == {str(i): i * i for i in range(20)}
    assert sorted(calls) == sorted([*range(20), 0, 5, 10, 15])
    done, failed = read_done(out)
    assert len(done) == 20 and not failed


def test_half_written_last_line_is_repaired(tmp_path: Path) -> None:
    out = tmp_path / "b.jsonl"
    header = json.dumps({"fingerprint": ""}) + "\n"
    out.write_text(header + json.dumps({"key": "a", "value": {"ok": True, "result": 1}}) + "\n"
                   + '{"key": "b", "value": {"ok": tr')
    with pytest.warns(TornLineWarning):
        r = run_batch([("a", 0), ("b", 0)], lambda x: 2, out, progress=False)
    assert r.resumed == 1 and r.ran == 1 and r.results == {"a": 1, "b": 2}
    assert [json.loads(x)["key"] for x in out.read_text().splitlines()[1:]] == ["a", "b"]


def test_a_batch_of_other_settings_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "b.jsonl"
    run_batch([("a", 1)], lambda x: x, out, progress=False, fingerprint="model-a")
    with pytest.raises(ConfigError, match="other settings"):
        run_batch([("a", 1)], lambda x: x, out, progress=False, fingerprint="model-b")
    assert read_done(out, "model-a") == ({"a": 1}, {})


def test_bad_records_and_keys(tmp_path: Path) -> None:
    out = tmp_path / "b.jsonl"
    out.write_text('{"nokey": 1}\n')
    with pytest.raises(DataError, match=r"b\.jsonl:1"):
        read_done(out)
    out.write_text('{"fingerprint": ""}\n{"key": "a", "value": 3}\n')
    with pytest.raises(DataError, match=r"b\.jsonl: not a batch record: key 'a'"):
        read_done(out)
    with pytest.raises(ValueError, match="duplicate"):
        run_batch([("a", 1), ("a", 2)], lambda x: x, tmp_path / "c.jsonl", progress=False)


def test_unexpected_exception_stops_the_batch(tmp_path: Path) -> None:
    def boom(x: int) -> int:
        raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        run_batch([("a", 1)], boom, tmp_path / "d.jsonl", concurrency=2, progress=False)
