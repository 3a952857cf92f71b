"""The core install (``pip install -e .``, no extras) imports ``kgwise.app`` and answers with a local model:
checked in a subprocess in which torch, sentence-transformers, transformers, scikit-learn, matplotlib,
networkx and fastapi cannot be imported (they belong to the ``ml``, ``eval`` and ``server`` extras)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

EXTRAS_ONLY = ("torch", "sentence_transformers", "transformers", "sklearn", "matplotlib", "networkx",
               "fastapi")

_BLOCK = textwrap.dedent(f"""
    import importlib.abc, sys
    class Blocked(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name.split(".")[0] in {EXTRAS_ONLY!r}:
                raise ImportError(f"{{name}} is not part of the core install")
    sys.meta_path.insert(0, Blocked())
""")


def _run(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-c", _BLOCK + textwrap.dedent(code), *args], env=env,
                          capture_output=True, text=True, timeout=600, check=False)


def test_app_and_cli_import_without_the_extras() -> None:
    res = _run(f"""
        import sys
        import kgwise.cli.main  # first: its settings loader must not run when kgwise.app registers defaults
        import kgwise.app, kgwise.app.knowgpt, kgwise.app.answer_sets
        print(sorted(m for m in sys.modules if m.split(".")[0] in {EXTRAS_ONLY!r}))
    """)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"


def test_the_blocker_blocks() -> None:
    """The check above could not pass by accident: an extra's import fails in that subprocess."""
    res = _run("import networkx")
    assert res.returncode != 0 and "not part of the core install" in res.stderr


@pytest.mark.slow
def test_app_answers_a_ddb_question_with_the_local_model_without_the_extras(data_dir: Path, tmp_path: Path
                                                                           ) -> None:
    from kgwise.kg.loaders import load_ddb

    kg = load_ddb(data_dir / "ddb").save(tmp_path / "ddb.npz")
    res = _run("""
        import json, sys
        from kgwise.app import KnowGPTApp
        from kgwise.types import make_question
        q = make_question("A man has crushing chest pain radiating to the left arm. Which drug should be "
                          "given first?", ["aspirin", "insulin", "levothyroxine", "omeprazole"])
        r = KnowGPTApp.build(sys.argv[1], "smollm2-135m").answer(q)
        print(json.dumps(r.to_dict()))
    """, str(kg))
    assert res.returncode == 0, res.stderr
    body = json.loads(res.stdout.strip().splitlines()[-1])
    assert body["combo"] == "P_sub+F_s" and body["choice_text"] in ("aspirin", "insulin", "levothyroxine",
                                                                     "omeprazole")
    assert sum(body["probabilities"].values()) == pytest.approx(1.0, abs=1e-6) and body["knowledge"]
    cli = _run("""
        import sys
        from typer.testing import CliRunner
        from kgwise.cli.main import app
        res = CliRunner().invoke(app, ["answer", "Which drug treats hypertension?", "--choices",
                                       "Lisinopril|Insulin", "--kg", sys.argv[1]])
        print(res.output)
        sys.exit(res.exit_code)
    """, str(kg))
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert "answer:" in cli.stdout and "combination: P_sub+F_s" in cli.stdout
