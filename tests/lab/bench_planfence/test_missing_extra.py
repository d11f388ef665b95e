"""The lab's statistics without numpy/scipy/matplotlib: a one-line install hint.

Moved from tests/integrations/test_common.py (issue 26: library tests never name the lab).
"""

from __future__ import annotations

import subprocess
import sys

BLOCK = """
import sys, importlib.abc
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split('.')[0] in {"numpy", "scipy", "matplotlib"}:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Block())
"""


def test_a_bench_statistic_without_the_extra_names_it() -> None:
    code = BLOCK + """
from icore.errors import MissingExtra
from icore_lab.bench.planfence._replay_stats import binomial_upper
try:
    binomial_upper(1, 10)
except MissingExtra as e:
    print(str(e))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 1 and "\n" not in lines[0]
    assert lines[0].split("pip install ")[1].split()[0] == "'icore[bench]'"
