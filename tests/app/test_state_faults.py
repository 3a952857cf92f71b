"""The fault suite of the folder state: an fsync that fails, a torn or corrupt journal line, a journal cut
at every byte of its last event, a real full disk (a tmpfs), a journal emptied or deleted, a refit, two
processes on one directory. After each: every acknowledged answer and feedback is present, spend is the
sum of what was paid (never rolled back), and the state opens without manual repair."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import kgwise.app.journal as journal_mod
from kgwise.app.config import PipelineConfig
from kgwise.app.journal import StateReadOnlyError, frame, unframe
from kgwise.app.pipeline import Pipeline
from kgwise.app.router import RouterAdapter
from kgwise.app.state import StateDir

from .conftest import STUB_CONFIG, FakeEncoder, StubArm, dev_rows, write_config, write_kg, write_questions
from .test_pipeline import question

HERE = Path(__file__).parent


class FailingFsync:
    """Test double of ``os.fsync``: raises ``EIO`` while ``failing``, else calls the real one."""

    def __init__(self) -> None:
        self.failing = False
        self.calls = 0

    def __call__(self, fd: int) -> None:
        self.calls += 1
        if self.failing:
            raise OSError(5, "Input/output error (injected)")
        os.fsync(fd)


def _dir(pipe: Pipeline) -> StateDir:
    """The pipeline's state folder (these tests reach into the folder state)."""
    assert isinstance(pipe.state, StateDir)
    return pipe.state


def _config(root: Path, budget: float = 100.0) -> PipelineConfig:
    write_kg(root)  # no free arm: every answer costs something
    body = STUB_CONFIG.format(cheap=0.1, dear=0.3, budget=budget, seed=0)
    return PipelineConfig.load(write_config(root, body.replace("price = 0\nobserve = true", "price = 0.2")))


def _pipeline(root: Path, state: Path, budget: float = 100.0) -> Pipeline:
    cfg = _config(root, budget)
    runners = {"cheap": StubArm(cfg.arm("cheap"), 0.5), "dear": StubArm(cfg.arm("dear"), 0.9),
               "free": StubArm(cfg.arm("free"), 0.6, open_questions=False)}
    return Pipeline(cfg, state, runners, FakeEncoder())


def _abandon(pipe: Pipeline) -> None:
    """Leave the state as a kill -9 does: no snapshot, descriptors closed, the lock gone."""
    st = _dir(pipe)
    st._journal.close()
    st._spend.close()
    st._lock.release()


def _reopen(root: Path, state: Path) -> StateDir:
    return StateDir(state, _config(root), FakeEncoder.dim)


def test_frames_round_trip_and_catch_every_single_byte_change() -> None:
    body = json.dumps({"seq": 3, "op": "cancel", "decision": "d"})
    line = frame(body)
    assert unframe(line) == json.loads(body) and json.loads(line)["crc"]  # still one JSON line
    for i in range(len(line) - 1):
        broken = line[:i] + bytes([line[i] ^ 0x01]) + line[i + 1:]
        with pytest.raises(ValueError, match=r"corrupt|torn"):
            unframe(broken)
    assert unframe(body.encode() + b"\n") == json.loads(body)  # the previous, unframed format


def test_an_fsync_failure_makes_the_state_read_only_until_a_write_succeeds(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch
                                                                          ) -> None:
    monkeypatch.setattr(journal_mod, "RETRY_AFTER_S", 0)
    pipe = _pipeline(tmp_path, tmp_path / "state")
    fsync = FailingFsync()
    _dir(pipe)._journal._fsync = fsync
    acked = {}
    for i in range(4):
        r = pipe.answer(*question(i))
        acked[r.decision] = r.cost
    pipe.feedback(next(iter(acked)), correct=True)
    fsync.failing = True
    with pytest.raises(StateReadOnlyError, match="Input/output error"):
        pipe.answer(*question(5))  # ran and was recorded, not acknowledged
    stubs = [r for r in pipe.runners.values() if isinstance(r, StubArm)]
    ran = sum(len(r.answered) for r in stubs)
    with pytest.raises(StateReadOnlyError):
        pipe.answer(*question(6))  # refused before anything runs
    with pytest.raises(StateReadOnlyError):
        pipe.feedback(list(acked)[1], correct=False)
    assert sum(len(r.answered) for r in stubs) == ran
    assert pipe.status().read_only is not None
    fsync.failing = False  # the disk is back: the next call writes the kept events, then answers
    r = pipe.answer(*question(7))
    acked[r.decision] = r.cost
    assert pipe.status().read_only is None
    _abandon(pipe)
    with _reopen(tmp_path, tmp_path / "state") as st:
        assert set(acked) - {next(iter(acked))} <= set(st.pending)
        assert next(iter(acked)) in st.settled
        recorded = sum(p.cost for p in st.pending.values()) + acked[next(iter(acked))]
        assert st.router.spent == pytest.approx(recorded)
        assert sum(acked.values()) <= st.router.spent <= sum(acked.values()) + 0.3  # + the one not acked


def _answered_state(root: Path, n: int = 4) -> tuple[Path, dict[str, float]]:
    pipe = _pipeline(root, root / "state")
    acked = {}
    for i in range(n):
        r = pipe.answer(*question(i))
        acked[r.decision] = r.cost
    pipe.feedback(next(iter(acked)), correct=True)
    _abandon(pipe)
    return root / "state", acked


def test_a_journal_cut_at_every_byte_of_its_last_event_opens(tmp_path: Path) -> None:
    state, acked = _answered_state(tmp_path)
    data = (state / "journal.jsonl").read_bytes()
    start = data.rstrip(b"\n").rfind(b"\n") + 1  # the last event: the feedback on the first decision
    for cut in range(start, len(data)):
        copy = tmp_path / "cut"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(state, copy)
        (copy / "journal.jsonl").write_bytes(data[:cut])
        (copy / "spend").unlink()  # the journal alone
        with _reopen(tmp_path, copy) as st:
            assert set(acked) <= set(st.pending)  # the feedback was cut: its decision waits again
            assert len(st.set_aside) == (cut > start)
            assert st.router.spent == pytest.approx(sum(acked.values()))
        assert (copy / "journal.jsonl").stat().st_size in (0, start)  # the torn tail is cut off
        with _reopen(tmp_path, copy) as again:
            assert not again.set_aside and set(acked) <= set(again.pending)
    print(f"cut at each of the {len(data) - start} bytes of the last event: opened every time")


def test_a_corrupt_line_is_set_aside_and_replay_goes_on(tmp_path: Path) -> None:
    state, acked = _answered_state(tmp_path)
    lines = (state / "journal.jsonl").read_bytes().splitlines(keepends=True)
    i = next(k for k, line in enumerate(lines) if b'"op": "select"' in line and k > 2)
    lines[i] = lines[i].replace(b'"select"', b'"selekt"')
    (state / "journal.jsonl").write_bytes(b"".join(lines))
    with _reopen(tmp_path, state) as st:
        assert st.set_aside and "checksum does not match" in st.warnings[0]
        kept = list((state / "set-aside").iterdir())
        assert len(kept) == 1 and b"selekt" in kept[0].read_bytes()
        assert st.router.spent == pytest.approx(sum(acked.values()))  # the spend mark keeps what was paid
        answered = set(st.pending) | set(st.settled)
    with _reopen(tmp_path, state) as again:  # the snapshot replaced the journal: nothing to set aside
        assert not again.set_aside and set(again.pending) | set(again.settled) == answered


def test_a_journal_of_the_previous_unframed_format_opens(tmp_path: Path) -> None:
    state, acked = _answered_state(tmp_path)
    lines = (state / "journal.jsonl").read_bytes().splitlines()
    old = [json.dumps({k: v for k, v in json.loads(line).items() if k != "crc"}).encode() for line in lines]
    (state / "journal.jsonl").write_bytes(b"\n".join(old) + b"\n")
    with _reopen(tmp_path, state) as st:
        assert not st.set_aside and set(acked) <= set(st.pending) | set(st.settled)
        assert st.router.spent == pytest.approx(sum(acked.values()))


@pytest.mark.parametrize("lose", ["journal", "journal and snapshot"])
def test_losing_the_journal_does_not_roll_spend_back(tmp_path: Path, lose: str) -> None:
    state, acked = _answered_state(tmp_path)
    if lose == "journal and snapshot":
        with _reopen(tmp_path, state):
            pass  # a snapshot now holds the spend
        (state / "state.json").unlink()
    (state / "journal.jsonl").write_bytes(b"")
    with _reopen(tmp_path, state) as st:
        assert st.router.spent == pytest.approx(sum(acked.values()))
        assert lose == "journal and snapshot" or any("spend kept" in w for w in st.warnings)


def test_a_refit_and_a_budget_change_keep_the_spend(tmp_path: Path) -> None:
    state, acked = _answered_state(tmp_path)
    cfg = _config(tmp_path, budget=50.0)
    cfg2 = PipelineConfig.load(write_config(tmp_path, cfg.path.read_text().replace(
        'name = "cheap"', 'name = "cheaper"'), "other.toml"))
    with pytest.raises(Exception, match=r"kgwise fit --config .*other\.toml --state"):
        StateDir(state, cfg2, FakeEncoder.dim)
    with StateDir(state, cfg2, FakeEncoder.dim, refit=True) as st:  # closed unfitted: nothing changes
        assert st.mismatch is not None
    with StateDir(state, cfg2, FakeEncoder.dim, refit=True) as st:  # as `kgwise fit` does
        st.replace_router(RouterAdapter.new(cfg2, FakeEncoder.dim), "question")
        assert st.router.names[0] == "cheaper" and st.router.spent == pytest.approx(sum(acked.values()))
    with StateDir(state, cfg2, FakeEncoder.dim) as st:
        assert st.router.spent == pytest.approx(sum(acked.values())) and st.router.budget == 50.0


def test_the_refit_an_error_advises_runs_and_keeps_the_spend(tmp_path: Path) -> None:
    """The advice of a state made for other arms — `kgwise fit --config C --state S --questions DEV` —
    run as that command runs it (``refit=True``, test-double arms instead of the config's models)."""
    from kgwise.app.fit import fit

    state, acked = _answered_state(tmp_path)
    cfg = _config(tmp_path)
    cfg2 = PipelineConfig.load(write_config(tmp_path, cfg.path.read_text().replace(
        'name = "cheap"', 'name = "cheaper"'), "other.toml"))
    runners = {"cheaper": StubArm(cfg2.arm("cheaper"), 0.5), "dear": StubArm(cfg2.arm("dear"), 0.9),
               "free": StubArm(cfg2.arm("free"), 0.6, open_questions=False)}
    with pytest.raises(Exception, match="kgwise fit --config") as refused:
        Pipeline(cfg2, state, runners, FakeEncoder())
    assert "--questions DEV.jsonl" in str(refused.value)
    dev = write_questions(tmp_path, dev_rows(2))
    with Pipeline(cfg2, state, runners, FakeEncoder(), refit=True) as pipe:
        with pytest.raises(Exception, match=r"kgwise fit --force"):
            fit(pipe, dev, max_spend=100.0, echo=lambda _: None)  # decisions still wait for feedback
        fit(pipe, dev, max_spend=100.0, echo=lambda _: None, force=True)  # as that advice says
        assert pipe.state.router.names[0] == "cheaper"
        assert pipe.state.router.spent == pytest.approx(sum(acked.values()))
        pipe.answer(*question(0))  # the refitted state answers
    with Pipeline(cfg2, state, runners, FakeEncoder()) as again:
        assert again.state.router.spent > sum(acked.values())


DISK_FULL_WORKER = textwrap.dedent("""
    import json, os, signal, sys
    sys.path.insert(0, sys.argv[3])
    import importlib
    t = importlib.import_module("tests.app.test_state_faults")
    from kgwise.app.journal import StateReadOnlyError
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a file-size limit: EFBIG instead of a signal
    if sys.argv[4] != "0":
        import resource
        resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[4]), int(sys.argv[4])))
    pipe = t._pipeline(t.Path(sys.argv[1]), t.Path(sys.argv[2]))
    acked, refused = {}, 0
    for i in range(400):
        try:
            r = pipe.answer(*t.question(i))
            acked[r.decision] = r.cost
            if i % 3 == 0:
                pipe.feedback(r.decision, correct=True)
        except StateReadOnlyError:
            refused += 1
            if refused >= 10:
                break
    print(json.dumps({"acked": acked, "refused": refused}))
    sys.stdout.flush()
    os._exit(0)  # as a kill: no snapshot, nothing closed
""")


def _disk_full_run(tmp_path: Path, state: Path, fsize: int) -> dict[str, object]:
    worker = tmp_path / "worker.py"
    worker.write_text(DISK_FULL_WORKER, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(HERE.parents[1] / "src")}
    args = [str(worker), str(tmp_path), str(state), str(HERE.parents[1]), str(fsize)]
    out = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _check_after_disk_full(tmp_path: Path, state: Path, result: dict[str, object]) -> None:
    acked = result["acked"]
    assert isinstance(acked, dict) and acked and result["refused"] == 10
    with _reopen(tmp_path, state) as st:  # opens without repair, space back or not
        assert set(acked) <= set(st.pending) | set(st.settled)
        assert st.router.spent == pytest.approx(sum(acked.values()))
        print(f"{state}: {len(acked)} acknowledged before the disk filled, 10 refused after; reopened with "
              f"{len(st.pending) + len(st.settled)} decisions, spend {st.router.spent:.4g} = acknowledged "
              f"{sum(acked.values()):.4g}, {len(st.set_aside)} line(s) set aside")


@pytest.mark.parametrize("disk", ["tmpfs", "file-size limit"])
def test_a_full_disk_loses_no_acknowledged_answer(tmp_path: Path, disk: str) -> None:
    """A real full disk: the state on a 96 kB tmpfs (needs root and ``mount``), or a file-size limit
    (RLIMIT_FSIZE, 64 kB) on the worker process; the worker answers until the state refuses 10 times,
    then exits as a kill does."""
    mount = tmp_path / "small"
    mount.mkdir()
    if disk == "tmpfs":
        mount_cmd = ["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", str(mount)]
        if os.geteuid() != 0 or subprocess.run(mount_cmd, capture_output=True).returncode != 0:
            pytest.skip("mounting a tmpfs needs root and mount(8); the file-size limit case still runs")
        try:
            result = _disk_full_run(tmp_path, mount / "state", 0)
            shutil.copytree(mount / "state", tmp_path / "state")  # space comes back elsewhere
            _check_after_disk_full(tmp_path, mount / "state", result)  # opens on the full disk too
        finally:
            subprocess.run(["umount", str(mount)], check=True)
        _check_after_disk_full(tmp_path, tmp_path / "state", result)
    else:
        result = _disk_full_run(tmp_path, mount / "state", 64_000)
        _check_after_disk_full(tmp_path, mount / "state", result)


HOLDER = textwrap.dedent("""
    import sys, importlib
    sys.path.insert(0, sys.argv[3])
    t = importlib.import_module("tests.app.test_state_faults")
    st = t._reopen(t.Path(sys.argv[1]), t.Path(sys.argv[2]))
    print("ready", flush=True)
    sys.stdin.readline()
    st.close()
""")


def test_the_lock_is_on_the_directory_itself(tmp_path: Path) -> None:
    """Two processes: while one holds the state, the other is refused — whatever files are deleted."""
    state, _ = _answered_state(tmp_path)
    holder = tmp_path / "holder.py"
    holder.write_text(HOLDER, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(HERE.parents[1] / "src")}
    child = subprocess.Popen([sys.executable, str(holder), str(tmp_path), str(state), str(HERE.parents[1])],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        for path in state.iterdir():  # no lock file to delete: none stands for the lock
            if path.is_file() and path.name in {"lock", "journal.lock", "state.lock"}:
                path.unlink()
        with pytest.raises(Exception, match="in use by another kgwise process"):
            _reopen(tmp_path, state)
    finally:
        assert child.stdin is not None
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.wait(60) == 0
    with _reopen(tmp_path, state) as st:  # released with its process
        assert st.read_only is None


def test_a_replaced_state_directory_turns_its_owner_read_only(tmp_path: Path) -> None:
    pipe = _pipeline(tmp_path, tmp_path / "state")
    pipe.answer(*question(0))
    (tmp_path / "state").rename(tmp_path / "moved")
    (tmp_path / "state").mkdir()  # another state where the first one was: the owner must not write it
    with pytest.raises(StateReadOnlyError, match="replaced by another one"):
        pipe.answer(*question(1))
    assert not list((tmp_path / "state").iterdir())
    _abandon(pipe)


def test_a_calibration_of_another_version_is_named_not_read(tmp_path: Path) -> None:
    from kgwise.app.calibration import CALIBRATION_KIND, HeldOutCalibration
    from kgwise.errors import DataError

    path = tmp_path / "calibration.json"
    path.write_text(json.dumps({"kind": CALIBRATION_KIND, "version": 99}), encoding="utf-8")
    with pytest.raises(DataError, match=r"calibration\.json: calibration version 99 is not one this kgwise"):
        HeldOutCalibration.load(path)
