"""Where the shared real inputs are found (``icore._data``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from icore._data import shared_data_dir
from icore.errors import IcoreError


def test_explicit_setting_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``$ICORE_SHARED_DATA`` wins when it names a folder."""
    monkeypatch.setenv("ICORE_SHARED_DATA", str(tmp_path))
    assert shared_data_dir() == tmp_path


def test_wrong_explicit_setting_is_an_error(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A set but wrong ``$ICORE_SHARED_DATA`` is named in an error, never silently
    replaced by the ``../shared/data`` guess."""
    missing = tmp_path / "nope"
    monkeypatch.setenv("ICORE_SHARED_DATA", str(missing))
    with pytest.raises(IcoreError, match=r"ICORE_SHARED_DATA=.*nope"):
        shared_data_dir()
    a_file = tmp_path / "f"
    a_file.write_text("x")
    monkeypatch.setenv("ICORE_SHARED_DATA", str(a_file))
    with pytest.raises(IcoreError, match="not a folder"):
        shared_data_dir()
