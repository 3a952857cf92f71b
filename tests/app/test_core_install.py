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
        import kgwise.app, kgwise.app.evidence
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

    load_ddb(data_dir / "ddb").save(tmp_path / "ddb.npz")
    (tmp_path / "kgwise.toml").write_text('[kg]\ngraph = "ddb.npz"\n\n[[arms]]\nname = "knowgpt"\n'
                                          'kind = "inject"\nspec = "smollm2-135m"\nprice = 0\n\n'
                                          '[router]\nbudget_calls = 10\n', encoding="utf-8")
    res = _run("""
        import json, sys
        from kgwise.app import Pipeline
        with Pipeline.from_config(sys.argv[1]) as pipe:
            r = pipe.answer("A man has crushing chest pain radiating to the left arm. Which drug should be "
                            "given first?", ["aspirin", "insulin", "levothyroxine", "omeprazole"])
        print(json.dumps(r.to_dict()))
    """, str(tmp_path / "kgwise.toml"))
    assert res.returncode == 0, res.stderr
    body = json.loads(res.stdout.strip().splitlines()[-1])
    assert body["knowledge"]["combo"] == "P_sub+F_s" and body["answer"] in ("aspirin", "insulin",
                                                                              "levothyroxine", "omeprazole")
    assert sum(body["probabilities"].values()) == pytest.approx(1.0, abs=1e-6) and body["knowledge"]["text"]
    cli = _run("""
        import sys
        from typer.testing import CliRunner
        from kgwise.cli.main import app
        res = CliRunner().invoke(app, ["ask", "Which drug treats hypertensive disease?", "--choices",
                                       "Lisinopril|Insulin", "--config", sys.argv[1]])
        print(res.output)
        sys.exit(res.exit_code)
    """, str(tmp_path / "kgwise.toml"))
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert "answer:" in cli.stdout and "knowledge (P_sub+F_s" in cli.stdout
