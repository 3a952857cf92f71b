"""Hyper-parameter files: every config table round-trips through TOML, and bad files are named."""

from __future__ import annotations

import tomllib
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from kgwise.cli.main import app
from kgwise.errors import DataError
from kgwise.route.coke import CokeConfig
from kgwise.settings import SECTIONS, configured, default, defaults_toml, read_section, section_class, to_toml


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "kgwise.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_defaults_file_reads_back_as_the_defaults(tmp_path: Path) -> None:
    path = write(tmp_path, defaults_toml())
    assert set(tomllib.loads(path.read_text())) == set(SECTIONS)
    for name in SECTIONS:
        assert read_section(path, name) == default(name)
    assert default("uag").evaluator_scores == ("absolute", "relative", "items", "items-relative")
    assert default("path_agent") != section_class("path_agent")()
    assert default("coke") == section_class("coke")()


@settings(max_examples=50, deadline=None)
@given(lam=st.floats(0, 1e6), delta=st.floats(1e-6, 0.999), gamma=st.none() | st.floats(0, 10),
       use_cluster=st.booleans(), precision=st.sampled_from(["float32", "float64"]))
def test_a_config_round_trips(lam: float, delta: float, gamma: float | None, use_cluster: bool,
                              precision: str) -> None:
    import tempfile

    cfg = CokeConfig(lam=lam, delta=delta, gamma_override=gamma, use_cluster=use_cluster, precision=precision)
    with tempfile.TemporaryDirectory() as tmp:
        assert read_section(write(Path(tmp), to_toml("coke", cfg)), "coke") == cfg


def test_missing_keys_keep_the_base_and_options_win(tmp_path: Path) -> None:
    from kgwise.conformal.uag import UAGConfig

    path = write(tmp_path, "[coke]\ndelta = 0.2\n\n[uag]\nsteps = [0.1, 0.1, 0.05]\n\n"
                           "[uag.ltt]\nfwer = 'holm'\n")
    assert configured("coke", path) == CokeConfig(delta=0.2)
    assert configured("coke", path, lam=3.0, gamma_override=None) == CokeConfig(lam=3.0, delta=0.2)
    base = CokeConfig(regret_prior=0.0)
    assert configured("coke", path, base) == replace(base, delta=0.2)
    uag = configured("uag", path, UAGConfig(alpha=0.3))
    assert uag.alpha == 0.3 and uag.steps == (0.1, 0.1, 0.05) and uag.ltt.fwer == "holm"
    assert uag.ltt.delta == 0.05
    assert configured("path_agent", path) == default("path_agent")  # no such table: the command's defaults


@pytest.mark.parametrize("text, message", [
    ("[coke]\nlamb = 1\n", "unknown key(s) coke.lamb; [coke] has lam, delta, ridge, "),
    ("[uag.ltt]\ndelt = 0.1\n", "unknown key(s) uag.ltt.delt"),
    ("[cok]\n", "unknown table(s) [cok]; the tables are coke, "),
    ("[coke]\nlam = '2'\nuse_cluster = 1\n", "coke.lam: Input should be a valid number; coke.use_cluster: "
                                             "Input should be a valid boolean"),
    ("[coke]\nlam = -1\n", "coke: lambda must be a finite number ≥ 0, got -1.0"),
    ("[uag.ltt]\nfwer = 'sometimes'\n", "uag.ltt.fwer: Input should be 'bonferroni', 'holm', "),
    ("[coke\n", "not valid TOML: Expected ']'"),
    ("coke = 3\n", "coke must be a table ([coke]), not a value"),
])
def test_a_bad_file_is_named_with_what_is_wrong(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    section = "uag" if "uag" in text else "coke"
    with pytest.raises(DataError) as err:
        read_section(path, section)
    assert f"{path}: " in str(err.value) and message in str(err.value)


def test_config_show_prints_a_file_the_commands_read(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["eval", "config", "show", "coke", "kgm_train"])
    assert result.exit_code == 0, result.output
    assert set(tomllib.loads(result.output)) == {"coke", "kgm_train"}
    result = CliRunner().invoke(app, ["eval", "config", "show", "cokee"])
    assert result.exit_code == 2 and "unknown config table [cokee]" in result.output


def test_kgm_train_refuses_sizes_the_data_sets_before_any_work(tmp_path: Path) -> None:
    path = write(tmp_path, "[kgm_model]\nnum_relations = 7\n")
    result = CliRunner().invoke(app, ["kg", "model", "train", "--dataset", "obqa", "--out",
                                      str(tmp_path / "m.pt"), "--config", str(path)])
    assert result.exit_code == 2 and "num_relations is set by the KG" in " ".join(result.output.split())
