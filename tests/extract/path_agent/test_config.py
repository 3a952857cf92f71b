"""P_RL's config: checks, and reading it without PyTorch."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kgwise.errors import ConfigError
from kgwise.extract.path_agent import PathAgentConfig


def test_config_validates() -> None:
    with pytest.raises(ConfigError):
        PathAgentConfig(max_steps=0)
    with pytest.raises(ConfigError):
        PathAgentConfig(max_actions=10, prefilter=5)
    assert PathAgentConfig().lambda_reach == PathAgentConfig().lambda_context == 1.0



def test_reading_the_config_and_importing_extract_and_inject_need_no_torch() -> None:
    code = ("import sys; sys.modules['torch'] = None\n"
            "import kgwise.extract, kgwise.inject\n"
            "from kgwise.extract.path_agent import PathAgentConfig, NodeEmbeddings\n"
            "assert PathAgentConfig().max_steps == 3\n"
            "try:\n"
            "    from kgwise.extract.path_agent import PathAgent\n"
            "except ImportError:\n"
            "    print('agent needs torch')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "agent needs torch"
