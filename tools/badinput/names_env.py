r"""File names and environments a careless user brings (issue 29, third round).

Families: names of inputs and outputs that are no UTF-8 (a shell's ``$'\xff'``: Python
holds them as lone surrogates), hold a newline or spaces, start with a dash, are over the
file system's 255-byte limit, or are links to nothing (``odd-names``); and every
``ICORE_*`` variable a command reads set to junk: NaN, infinities, 1e400, negatives,
empty, bytes that are no UTF-8, a URL with a password (``env``). Generated from the seed.
"""

from __future__ import annotations

import os
import sys

from . import seeds
from .cases import SECRET, Builder, Case, dumps


def _fs(name: bytes) -> str:
    """A file name of raw bytes as Python holds it (undecodable bytes as surrogates)."""
    return os.fsdecode(name)


def odd_names(b: Builder) -> None:
    """Inputs and outputs named with undecodable bytes, newlines, dashes, 300 bytes."""
    good = "\n".join(dumps(x) for x in seeds.jsonl_rows()) + "\n"
    names = {"latin1": b"r\xe9sum\xe9", "ff": b"run\xff", "newline": b"a\nb",
             "spaces": b" two  words ", "quote": b"it's \"q\"", "dash": b"-x",
             "emoji-cut": b"r\xf0\x9f\x98", "long": b"n" * 300}
    picked = sorted(b.rng.sample(sorted(names), 5))
    for label in picked:
        raw = names[label]
        d = b._dir(f"names/{label}")
        fits = len(raw) + len(b".jsonl") <= 255
        src = d / _fs(raw + b".jsonl") if fits else d / "t.jsonl"
        src.write_text(good)
        inputs = [src]
        out = _fs(raw)
        variants = [
            ("input", ["ICORE", "audit", "--no-report", "--", str(src)]),
            ("out", ["ICORE", "audit", str(src), "--out", str(d / out)]),
            ("json", ["ICORE", "audit", str(src), "--no-report", "--json",
                      str(d / _fs(raw + b".json"))]),
            ("otlp", ["ICORE", "audit", str(src), "--no-report", "--otlp-endpoint",
                      "file:" + str(d / _fs(raw + b".otlp.jsonl"))]),
            ("twice", ["sh", "-c", '"$ICORE_PY" -m icore audit "$1" --out "$2" >/dev/null; '
                       'exec "$ICORE_PY" -m icore audit "$1" --out "$2"', "sh", str(src),
                       str(d / _fs(raw + b"-2"))]),
        ]
        for v, argv in variants:
            b.cases.append(Case(f"names/{label}/{v}", "odd-names", argv, inputs=inputs,
                                names=[str(src.name)[:20], "--out", "--json", "name"],
                                timeout=120))
    d = b._dir("names/links")
    src = d / "t.jsonl"
    src.write_text(good)
    (d / "dead").symlink_to(d / "nowhere" / "x")
    (d / "to-file").symlink_to(src)
    (d / "to-self").symlink_to(d / "to-self")
    for link in ("dead", "to-file", "to-self"):
        for flag in ("--out", "--json"):
            b.cases.append(Case(f"names/links/{link}{flag}", "odd-names",
                                ["ICORE", "audit", str(src), flag, str(d / link)],
                                inputs=[src], names=[link, flag], timeout=60))


_AUDIT_ENV = {
    "ICORE_MAX_INPUT_MB": ["nan", "inf", "-inf", "1e400", "-1", "0", "", " 5 ", "5MB",
                           "0x10", "1e-30", "\udcff"],
    "ICORE_SHARED_DATA": ["", "/dev/null", "/proc/self", "\udcff", "x" * 5000],
}
_RUN_ENV = {
    "ICORE_LLM_SLOTS": ["nan", "0", "-1", "1e400", "2.5", "\udcff"],
    "ICORE_LLM_TIMEOUT_S": ["nan", "inf", "-1", "0", "1e400", "abc"],
    "ICORE_LLM_RETRIES": ["-1", "1e400", "nan", "1.5"],
    "ICORE_LLM_BACKOFF_S": ["-1", "inf", "nan"],
    "ICORE_LLM_TOOL_CHOICE": ["bogus", "", "\udcff"],
    "ICORE_LLM_BASE_URL": [f"http://u:{SECRET}@127.0.0.1:1/v1", "not a url", "file:///etc"],
    "ICORE_LLM_MODEL": ["", "\udcff", "x" * 5000],
}


def env_junk(b: Builder) -> None:
    """``ICORE_*`` variables set to junk under ``icore audit`` and ``icore run``."""
    d = b._dir("env/base")
    t = b.write_doc(d, "t.jsonl", "jsonl", seeds.jsonl_rows())
    pairs = [(k, v, "audit") for k, vs in _AUDIT_ENV.items() for v in vs]
    pairs += [(k, v, "run") for k, vs in _RUN_ENV.items() for v in vs]
    for k, v, cmd in sorted(b.rng.sample(pairs, min(24, len(pairs)))):
        cid = f"env/{k}={v[:12]!r}"
        e = b._dir(cid)
        val = os.fsencode(v)
        if cmd == "audit":
            argv = ["ICORE", "audit", str(t), "--no-report", "--json", str(e / "s.json")]
        else:  # the LLM team: reads every ICORE_LLM_* (the host is down either way)
            argv = ["ICORE", "run", "--backend", "llm", "--out", str(e / "o")]
        # printf's octal escapes carry any byte, also those no UTF-8 holds
        script = 'export "$1=$(printf "$2")"; shift 2; exec "$@"'
        printf = "".join(f"\\{c:03o}" for c in val)
        full = ["sh", "-c", script, "sh", k, printf, sys.executable, "-m", "icore", *argv[1:]]
        b.cases.append(Case(cid, "env", full, inputs=[t],
                            names=[k, "--llm", "LLM", "llm"], timeout=150))


def all_families(b: Builder) -> None:
    """Every family of this module."""
    odd_names(b)
    env_junk(b)


__all__ = ["all_families"]

