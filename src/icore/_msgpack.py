"""One msgpack packer per thread, shared by the record codec and the wire protocol (issue 27).

``msgpack.packb`` builds a new ``Packer`` on every call; the record codec
(:mod:`icore.records`) and the frame codec (:mod:`icore.net`) encode on hot paths, so
each thread keeps one packer and reuses it. A thread-local one, because a ``Packer`` has
a buffer of its own and the owner service encodes on its event loop and in its commit
worker thread at once.
"""

from __future__ import annotations

import threading

import msgpack

_LOCAL = threading.local()


def packer() -> msgpack.Packer:
    """This thread's msgpack packer (``use_bin_type``): no new packer per message.

    Its ``pack`` returns the same bytes as ``msgpack.packb(o, use_bin_type=True)``.
    """
    p: msgpack.Packer | None = getattr(_LOCAL, "packer", None)
    if p is None:
        p = _LOCAL.packer = msgpack.Packer(use_bin_type=True)
    return p


__all__ = ["packer"]
