"""``kgwise serve``'s routing options, read before the server starts (no server is run here)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from kgwise.cli.main import app as cli
from kgwise.cli.serve import _max_costs
from kgwise.errors import ConfigError


@pytest.fixture(scope="module")
def router_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("serve") / "router.json"
    res = CliRunner().invoke(cli, ["route", "init", "--arm", "gnn:KGM", "--arm", "gpt-4o:LLM",
                                   "--budget", "1", "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out


def test_route_bounds_are_priced_and_given(router_file: Path) -> None:
    bounds = _max_costs(router_file, ["gnn=0"], "1000,100")
    assert bounds == (0.0, pytest.approx((1000 * 2.5 + 100 * 10.0) / 1e6))
    assert _max_costs(router_file, [], None) is None


def test_route_bounds_name_what_is_missing(router_file: Path) -> None:
    with pytest.raises(ConfigError, match=r"--route-max-cost: no bound for gnn"):
        _max_costs(router_file, [], "1000,100")
    with pytest.raises(ConfigError, match="need --router"):
        _max_costs(None, [], "1000,100")
