"""The runnable refund agents of examples/python, each in one command, as a new user runs them."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO

EXAMPLES = sorted((REPO / "examples" / "python").glob("refund_*.py"))


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda path: path.stem)
def test_the_example_agent_refunds_once(example: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "IDEM_URL", "IDEM_API_KEY")}
    env.setdefault("IDEM_BIN", str(REPO / "target" / "release" / "idem"))
    done = subprocess.run([sys.executable, str(example)], env=env, capture_output=True, text=True,
                          timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert "no new action taken" in done.stdout
    assert done.stdout.rstrip().endswith("refunds at the provider: 1"), done.stdout


def test_there_is_an_example_per_framework() -> None:
    assert [path.stem for path in EXAMPLES] == [
        "refund_langgraph", "refund_openai_agents", "refund_pydantic_ai"]
