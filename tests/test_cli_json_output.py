"""``--json PATH`` of ``icore bench net`` / ``icore bench state``: a FIFO with no reader
is refused up front instead of blocking forever; pipes with a reader still work."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from icore.cli import app
from icore.cli.inputs import OutputFile, output_file


@pytest.mark.timeout(30)
@pytest.mark.parametrize("command", [["bench", "net", "--quick"],
                                     ["bench", "state", "--quick"],
                                     ["bench", "integrations", "--calls", "2", "--rounds",
                                      "1"]])
def test_json_to_a_fifo_without_reader_is_refused(tmp_path: Path,
                                                  command: list[str]) -> None:
    """Exit 2 with ``error:`` naming the FIFO, before the benchmark runs."""
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    res = CliRunner().invoke(app, [*command, "--json", str(fifo)], env={"COLUMNS": "200"})
    assert res.exit_code == 2, res.output
    assert "error:" in res.output and str(fifo) in res.output
    assert "FIFO with no reader" in res.output


@pytest.mark.timeout(30)
def test_output_file_writes_a_fifo_that_has_a_reader(tmp_path: Path) -> None:
    """A FIFO with a reader is held open and written in full (more than a pipe buffer,
    so the write must block until the reader drains it), then closed: EOF."""
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    rfd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    got = bytearray()

    def drain() -> None:
        os.set_blocking(rfd, True)
        while chunk := os.read(rfd, 65536):
            got.extend(chunk)

    text = "x" * 300_000
    with output_file(fifo, what="--json output") as out:
        assert isinstance(out, OutputFile)
        reader = threading.Thread(target=drain)
        reader.start()
        out.write(text)
    reader.join(10)
    os.close(rfd)
    assert not reader.is_alive()
    assert got.decode() == text


def test_output_file_plain_paths_are_written_at_the_end(tmp_path: Path) -> None:
    """A missing or regular path is not touched until ``write``; None passes through."""
    path = tmp_path / "out.json"
    with output_file(path, what="--json output") as out:
        assert out is not None
        assert not path.exists()
        out.write("{}")
    assert path.read_text() == "{}"
    with output_file(None, what="--json output") as none:
        assert none is None


@pytest.mark.timeout(120)
def test_bench_state_json_to_piped_dev_stdout() -> None:
    """``--json /dev/stdout`` with stdout a pipe (a FIFO that has a reader) still works."""
    proc = subprocess.run([sys.executable, "-m", "icore", "bench", "state", "--quick",
                           "--json", "/dev/stdout"],
                          capture_output=True, text=True, timeout=110, check=False)
    assert proc.returncode == 0, proc.stderr
    assert '"bytes_per_obligation_cycled"' in proc.stdout
