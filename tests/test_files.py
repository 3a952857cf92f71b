"""Atomic writes keep the old file on failure and leave no temporary behind; JSON faults name the file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kgwise.errors import ConfigError, DataError
from kgwise.files import (
    ResumeLog,
    TornLineWarning,
    atomic_path,
    file_stamp,
    read_json,
    savez_atomic,
    short_hash,
    source_fingerprint,
    write_text_atomic,
)


def test_atomic_write_replaces_or_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "state.json"
    write_text_atomic(target, "old")
    assert target.read_text() == "old"
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("crash while writing")
    assert target.read_text() == "old"
    assert sorted(p.name for p in target.parent.iterdir()) == ["state.json"]
    write_text_atomic(target, "new")
    assert target.read_text() == "new"


def test_savez_atomic_keeps_the_name(tmp_path: Path) -> None:
    path = savez_atomic(tmp_path / "a.npz", {"x": np.arange(3)})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npz"]
    with np.load(path) as z:
        assert z["x"].tolist() == [0, 1, 2]


def test_read_json_names_file_and_line(tmp_path: Path) -> None:
    good = tmp_path / "g.json"
    good.write_text('{"a": 1}')
    assert read_json(good) == {"a": 1}
    bad = tmp_path / "b.json"
    bad.write_text('{\n"a": }')
    with pytest.raises(DataError, match=r"b\.json:2"):
        read_json(bad)
    latin = tmp_path / "l.json"
    latin.write_bytes(b'{"a": "\xe9"}')
    with pytest.raises(DataError, match="UTF-8"):
        read_json(latin)


def test_source_fingerprint_follows_the_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "fppkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "core.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    first = source_fingerprint("fppkg")
    assert source_fingerprint("fppkg") == first
    assert source_fingerprint("fppkg.core") != first  # the module alone
    (pkg / "core.py").write_text("X = 2\n")
    assert source_fingerprint("fppkg") != first
    with pytest.raises(ValueError, match="no module named"):
        source_fingerprint("fppkg_missing")


def test_resume_log_refuses_or_restarts_on_other_settings(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    log = ResumeLog(path, "settings-a")
    log.put("split-0", {"ecr": 0.9})
    log.put("split-1", 1)
    log.put("split-0", {"ecr": 0.8})  # a later line of a key replaces the earlier one
    again = ResumeLog(path, "settings-a")
    assert again.get("split-0") == {"ecr": 0.8} and len(again) == 2 and "split-1" in again
    assert again.items() == [("split-0", {"ecr": 0.8}), ("split-1", 1)]
    with pytest.raises(ConfigError, match=r"runs\.jsonl holds results of other settings.*'settings-a'"):
        ResumeLog(path, "settings-b")
    assert ResumeLog(path, "settings-a").get("split-1") == 1  # the refusal left the file alone
    fresh = ResumeLog(path, "settings-b", on_other="restart")  # e.g. the code changed: recompute
    assert fresh.restarted and len(fresh) == 0 and ResumeLog(path, "settings-a", on_other="restart").restarted
    memory = ResumeLog(None, "x")
    memory.put("k", [1, 2])
    assert memory.get("k") == [1, 2] and memory.get("other") is None and memory.get("o", 3) == 3


def test_resume_log_drops_a_torn_last_line_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    log = ResumeLog(path, "fp")
    log.put("a", 1)
    log.put("b", 2)
    whole = path.read_text(encoding="utf-8")
    path.write_text(whole + '{"key": "c", "val', encoding="utf-8")  # killed while writing c
    with pytest.warns(TornLineWarning, match=r"runs\.jsonl:4: dropped 1 line"):
        resumed = ResumeLog(path, "fp")
    assert resumed.torn == 1 and resumed.items() == [("a", 1), ("b", 2)]
    assert path.read_text(encoding="utf-8") == whole  # cut back, so the next line starts clean
    resumed.put("c", 3)
    assert ResumeLog(path, "fp").items() == [("a", 1), ("b", 2), ("c", 3)]
    # a whole last record that only lacks its newline is kept
    path.write_text(whole.rstrip("\n"), encoding="utf-8")
    kept = ResumeLog(path, "fp")
    assert kept.torn == 0 and kept.get("b") == 2
    kept.put("d", 4)
    assert ResumeLog(path, "fp").items() == [("a", 1), ("b", 2), ("d", 4)]


def test_resume_log_names_file_and_line_of_a_bad_record(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    path.write_text('{"fingerprint": "fp"}\n{"key": "a"}\n{"key": "b", "value": 1}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"runs\.jsonl:2.*no 'value'"):
        ResumeLog(path, "fp")
    path.write_text('{"fingerprint": "fp"}\nnot json\n{"key": "b", "value": 1}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"runs\.jsonl:2"):
        ResumeLog(path, "fp")
    path.write_text('{"key": "b", "value": 1}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"runs\.jsonl:1.*not a resume log"):
        ResumeLog(path, "fp")


def test_resume_log_puts_from_threads(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    path = tmp_path / "runs.jsonl"
    log = ResumeLog(path, "fp", fsync=True)
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda i: log.put(str(i), i), range(200)))
    assert dict(ResumeLog(path, "fp").items()) == {str(i): i for i in range(200)}


def test_short_hash_is_stable_and_order_free() -> None:
    assert short_hash({"a": 1, "b": (2, 3)}) == short_hash({"b": [2, 3], "a": 1})
    assert len(short_hash({"a": 1})) == 12 and short_hash({"a": 1}) != short_hash({"a": 2})


def test_file_stamp_follows_a_file_a_directory_and_a_pattern(tmp_path: Path) -> None:
    shard = tmp_path / "data" / "test-0.parquet"
    shard.parent.mkdir()
    shard.write_text("a")
    before = [file_stamp(p) for p in (shard, shard.parent, tmp_path / "data" / "test-*.parquet")]
    assert [s[1] for s in before] == [1, 1, 1]
    shard.write_text("ab")  # edited in place: the directory's own mtime may not move
    after = [file_stamp(p) for p in (shard, shard.parent, tmp_path / "data" / "test-*.parquet")]
    assert all(a != b for a, b in zip(after, before, strict=True)) and [s[1] for s in after] == [2, 2, 2]
    with pytest.raises(DataError, match="file not found"):
        file_stamp(tmp_path / "data" / "train-*.parquet")


def test_atomic_writes_go_through_a_symlink(tmp_path: Path) -> None:
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    write_text_atomic(link, "new")
    assert link.is_symlink() and target.read_text() == "new"


def test_distinct_outputs_refuses_inputs_and_owned_files(tmp_path: Path) -> None:
    from kgwise.errors import ConfigError
    from kgwise.files import distinct_outputs, is_owned, owner_lock

    graph = tmp_path / "g.npz"
    graph.write_text("x")
    alias = tmp_path / "alias.npz"
    alias.symlink_to(graph)
    with pytest.raises(ConfigError, match=r"--json .* is also GRAPH"):
        distinct_outputs({"--json": alias}, {"GRAPH": graph})
    with pytest.raises(ConfigError, match=r"--json .* is also --out"):
        distinct_outputs({"--out": tmp_path / "a", "--json": tmp_path / "sub" / ".." / "a"}, {})
    state = tmp_path / "router.json"
    state.write_text("{}")
    distinct_outputs({"--json": state}, {})  # nobody owns it
    lock = owner_lock(tmp_path / "." / "router.json")  # the lock of the resolved path
    lock.acquire()
    try:
        import subprocess
        import sys

        code = ("import sys; from kgwise.files import distinct_outputs; from pathlib import Path; "
                "distinct_outputs({'--json': Path(sys.argv[1])}, {})")
        res = subprocess.run([sys.executable, "-c", code, str(state)], capture_output=True, text=True)
        assert res.returncode != 0 and "in use by another process" in res.stderr
        res = subprocess.run([sys.executable, "-c", "import sys; from kgwise.files import is_owned; "
                              "print(is_owned(sys.argv[1]))", str(state)], capture_output=True, text=True)
        assert res.stdout.strip() == "True"
    finally:
        lock.release()
    assert not is_owned(state)


def test_concurrent_atomic_writers_of_one_file_do_not_collide(tmp_path: Path) -> None:
    """Two threads saving the same .npz at once (two runs sharing an embedding cache): each write is whole."""
    import threading

    import numpy as np

    from kgwise.files import savez_atomic

    target = tmp_path / "cache.npz"
    errors: list[BaseException] = []

    def write(value: int) -> None:
        try:
            for _ in range(20):
                savez_atomic(target, {"x": np.full(1000, value)})
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(v,)) for v in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert set(np.load(target)["x"].tolist()) in ({1}, {2})
    assert [p.name for p in tmp_path.iterdir()] == ["cache.npz"]
