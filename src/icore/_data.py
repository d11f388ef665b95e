"""Where the shared real inputs live (Mahimahi traces, Who&When traces).

Data is never copied into the repo; it is read from ``$ICORE_SHARED_DATA`` or from a
``shared/data`` folder next to the checkout (the layout of a developer machine and CI).
"""

from __future__ import annotations

import os
from pathlib import Path

from icore.errors import DataUnavailable


def shared_data_dir() -> Path:
    """Return the shared data folder.

    Looks at ``$ICORE_SHARED_DATA``, then ``../shared/data`` relative to the current
    directory and to the source checkout.

    Raises:
        DataUnavailable: ``$ICORE_SHARED_DATA`` is set but not a folder, or no folder exists
            (the message says where it looked).
    """
    candidates: list[Path] = []
    env = os.environ.get("ICORE_SHARED_DATA")
    if env:
        # an explicit setting is never silently replaced by a guess
        if not Path(env).is_dir():
            raise DataUnavailable(f"ICORE_SHARED_DATA={env} is not a folder", path=env)
        return Path(env)
    candidates.append(Path.cwd().parent / "shared" / "data")
    candidates.append(Path.cwd() / "shared" / "data")
    here = Path(__file__).resolve()
    candidates.extend(p / "shared" / "data" for p in here.parents)
    for c in candidates:
        if c.is_dir():
            return c
    raise DataUnavailable("shared data folder not found; set ICORE_SHARED_DATA",
                     looked_in=[str(c) for c in candidates[:4]])
