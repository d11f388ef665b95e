"""Shared fixtures: paths to the real data in ../shared/data."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "icore", deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=60
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "icore"))

REPO = Path(__file__).resolve().parents[1]


def _shared_data() -> Path:
    env = os.environ.get("ICORE_SHARED_DATA")
    if env:
        return Path(env)
    return REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The ../shared/data folder (Mahimahi traces, Who&When traces)."""
    path = _shared_data()
    if not path.is_dir():
        pytest.skip(f"shared data not found at {path} (set ICORE_SHARED_DATA)")
    return path


# --- small synthetic Who&When-shaped runs (written here, not copied from the dataset) ---

TEAM = (
    "Initial plan:\n\nWe are working to address the following user request:\n\nWhat is 6*7?\n\n"
    "To answer this request we have assembled the following team:\n\n"
    "Assistant: A helpful and general-purpose AI assistant with Python skills.\n"
    "ComputerTerminal: A computer terminal that runs Python scripts.\n"
    "FileSurfer: An agent that can handle local files.\n"
    "WebSurfer: A helpful assistant with access to a web browser to search the web.\n\n\n"
    "Here is an initial fact sheet to consider:\n1. nothing\n"
)


def ledger(progress: Any = True, loop: Any = False, satisfied: Any = False,
           nxt: str = "WebSurfer", instr: str = "Search the web for the answer.") -> str:
    """A Magentic-One ledger message."""
    body = {
        "is_request_satisfied": {"reason": "r", "answer": satisfied},
        "is_in_loop": {"reason": "r", "answer": loop},
        "is_progress_being_made": {"reason": "r", "answer": progress},
        "next_speaker": {"reason": "r", "answer": nxt},
        "instruction_or_question": {"reason": "r", "answer": instr},
    }
    return "Updated Ledger:\n" + json.dumps(body, indent=2)


PAGE = ("I typed '6*7' into 'search'.\n\nHere is a screenshot of "
        "[6*7 - Search](https://www.bing.com/search?q=6*7).\nThe page shows 42.")


def magentic_run(**over: Any) -> dict[str, Any]:
    """A small failing Magentic-One run: the WebSurfer repeats itself, a stall, a replan."""
    hist = [
        {"role": "human", "content": "What is 6*7?"},
        {"role": "Orchestrator (thought)", "content": TEAM},
        {"role": "Orchestrator (thought)", "content": ledger()},
        {"role": "Orchestrator (-> WebSurfer)", "content": "Search the web for 6*7."},
        {"role": "WebSurfer", "content": PAGE},
        {"role": "Orchestrator (thought)", "content": ledger()},
        {"role": "Orchestrator (-> WebSurfer)", "content": "Search the web again for 6*7."},
        {"role": "Websurfer", "content": PAGE},
        {"role": "Orchestrator (thought)", "content": ledger(progress=True, loop="false")},
        {"role": "Orchestrator (thought)", "content": "Stalled.... Replanning..."},
        {"role": "Orchestrator (thought)", "content": TEAM.replace("Initial plan:", "New plan:")},
        {"role": "Orchestrator (termination condition)",
         "content": "No agent selected.\nFINAL ANSWER: 41\nSCENARIO.PY COMPLETE !#!#"},
    ]
    data: dict[str, Any] = {
        "history": hist, "question": "What is 6*7?", "ground_truth": "42",
        "is_corrected": "False", "question_ID": "q1", "mistake_agent": "Websurfer",
        "mistake_step": "7", "mistake_reason": "repeated the search", "mistake_type": "x",
        "labels": ["a"],
    }
    data.update(over)
    return data


def captain_run(**over: Any) -> dict[str, Any]:
    """A small failing CaptainAgent run: code fails, then an unsupported verification."""
    hist = [
        {"role": "assistant", "name": "Math_Expert",
         "content": "You are given a task.\n# General Task\nWhat is 6*7?\n## Plan for solving "
                    "the task\n1. compute\n2. verify"},
        {"role": "user", "name": "Python_Expert",
         "content": "```python\nprint(6*7\n```"},
        {"role": "user", "name": "Computer_terminal",
         "content": "exitcode: 1 (execution failed)\nCode output: SyntaxError"},
        {"role": "user", "name": "Verification_Expert",
         "content": "I have verified the result: the answer is 41. TERMINATE"},
    ]
    data: dict[str, Any] = {
        "is_correct": "false", "question": "What is 6*7?", "question_ID": "q2",
        "level": "1", "ground_truth": "42", "history": hist,
        "mistake_agent": "python_expert", "mistake_step": 1, "mistake_reason": "bad code",
        "system_prompt": {
            "Math_Expert": "An expert in mathematics and reasoning.",
            "Python_Expert": "Writes python code for the Computer_terminal to execute.",
            "Verification_Expert": "Verifies results carefully.",
        },
    }
    data.update(over)
    return data


@pytest.fixture
def magentic() -> dict[str, Any]:
    """A synthetic Magentic-One run (dict)."""
    return magentic_run()


@pytest.fixture
def captain() -> dict[str, Any]:
    """A synthetic CaptainAgent run (dict)."""
    return captain_run()


@pytest.fixture
def make_magentic() -> Callable[..., dict[str, Any]]:
    """Factory: a Magentic-One run with top-level keys overridden."""
    return magentic_run


@pytest.fixture
def make_captain() -> Callable[..., dict[str, Any]]:
    """Factory: a CaptainAgent run with top-level keys overridden."""
    return captain_run


@pytest.fixture
def write_json(tmp_path: Path) -> Callable[[Any, str], Path]:
    """Write a JSON document (or raw text) to a file in tmp_path."""

    def write(data: Any, name: str = "run.json") -> Path:
        p = tmp_path / name
        p.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
        return p

    return write
