"""The bad inputs of the sweep (issue 29), generated from the seeds, never from the fixes.

Each family generalizes a cause of the issue: wrong types at every field of every importer
(a sample of the cross product path x bad value, drawn with the sweep's seed), encodings,
structure (cycles, orphans, duplicates), file-system oddities, every CLI command and flag,
the YAML manifests and the Python API. A :class:`Case` is one subprocess.
"""

from __future__ import annotations

import copy
import datetime
import json
import os
import random
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from . import seeds

SECRET = "s3cr3tPW9"


@dataclass
class Case:
    """One bad input: ``argv`` (``ICORE`` = ``python -m icore``, ``PY`` = ``python -c``)."""

    id: str
    family: str
    argv: list[str]
    inputs: list[Path] = field(default_factory=list)
    names: list[str] = field(default_factory=list)  # any of them must be in an error message
    fields: list[str] = field(default_factory=list)  # soft: the damaged field's names
    timeout: float = 60.0
    ok_codes: tuple[int, ...] = (0, 1, 2)
    refusal: bool = False  # API: accepting the value is a defect


class _Raw:
    """A JSON token written as is (``1e400``, a 50,000-deep nesting)."""

    def __init__(self, text: str) -> None:
        self.text = text


BAD: list[Any] = [
    None, True, 0, -1, -(2**63) - 1, 2**64, 10**30, 1.5, float("nan"), float("inf"),
    float("-inf"), _Raw("1e400"), _Raw("-1e400"), "", "abc", "\u00b2", "NaN", "Infinity",
    "2026-01-01T00:00:00", "-1", "1e400", "x\u2028y\u2029z", "\x00", "\u00e9" * 300,
    "x" * 100_000, [], [1, [2]], {}, {"a": {}}, _Raw("[" * 50_000 + "]" * 50_000),
    "[1,2]", "{", "null", '{"a": [1, 2]}', "\ud800", "<script>alert(1)</script>",
    "../../etc/passwd",
    # 5000-digit integers: past Python's 4300-digit int/str limit, as a token and a string
    _Raw("1" + "0" * 5000), _Raw("-" + "9" * 5000), "1" + "0" * 5000,
    # bad dates and times: naive, year 0, out of range, impossible days, NaN-like strings
    "2026-01-01 00:00:00", "0000-01-01T00:00:00Z", "2026-02-30T00:00:00Z",
    "2026-13-01T00:00:00Z", "2026-01-01T25:61:00Z", "9999-12-31T23:59:60Z",
    "10000-01-01T00:00:00Z", "-0001-01-01T00:00:00Z", "2026-01-01T00:00:00+99:00",
    "1970-01-01T00:00:00Z", "nan", "-Infinity", "9" * 30, "-" + "9" * 30,
]


def dumps(doc: Any) -> str:
    """JSON text of ``doc``, :class:`_Raw` tokens written as they are."""
    raws: dict[str, str] = {}

    def sub(x: Any) -> Any:
        if isinstance(x, _Raw):
            k = f"__RAW{len(raws)}__"
            raws[k] = x.text
            return k
        if isinstance(x, dict):
            return {k: sub(v) for k, v in x.items()}
        if isinstance(x, list):
            return [sub(v) for v in x]
        return x

    text = json.dumps(sub(doc), ensure_ascii=False)
    for k, v in raws.items():
        text = text.replace(f'"{k}"', v)
    return text


def _paths(node: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if at:
        yield at
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, (*at, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, (*at, i))


def _set(doc: Any, path: tuple[Any, ...], value: Any, *, delete: bool = False) -> Any:
    d = copy.deepcopy(doc)
    node = d
    for k in path[:-1]:
        node = node[k]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return d


def _keys(path: tuple[Any, ...]) -> list[str]:
    return [k for k in path if isinstance(k, str)]


class Builder:
    """Writes the inputs of every case under ``root`` and collects the cases."""

    def __init__(self, root: Path, rng: random.Random, live: Path, audit_export: Path,
                 per_format: int) -> None:
        self.root, self.rng, self.per_format = root, rng, per_format
        self.cases: list[Case] = []
        self.formats: dict[str, tuple[str, str, Any]] = {
            "otlp-json": ("t.otlp.json", "json", seeds.otlp_doc()),
            "otlp-jsonl": ("t.otlp.jsonl", "jsonl", [seeds.otlp_doc(), _retrace(seeds.otlp_doc())]),
            "phoenix": ("phoenix.json", "json", seeds.phoenix_doc()),
            "langfuse": ("langfuse.json", "json", seeds.langfuse_doc()),
            "jaeger": ("jaeger.json", "json", seeds.jaeger_doc()),
            "icore-jsonl": ("run.jsonl", "jsonl", seeds.jsonl_rows()),
            "live-export": ("live.otlp.jsonl", "jsonl", _lines(live)),
            "audit-export": ("audit.otlp.jsonl", "jsonl", _lines(audit_export)),
            "whowhen-magentic": ("magentic.json", "json", seeds.magentic()),
            "whowhen-captain": ("captain.json", "json", seeds.captain()),
        }

    def _dir(self, cid: str) -> Path:
        d = self.root / cid.replace("/", "_")
        d.mkdir(parents=True)
        return d

    def write_doc(self, d: Path, name: str, kind: str, doc: Any) -> Path:
        """Write ``doc`` (one document, or the lines of a JSONL file) as ``d/name``."""
        p = d / name
        text = "\n".join(dumps(x) for x in doc) + "\n" if kind == "jsonl" else dumps(doc)
        p.write_text(text, encoding="utf-8", errors="surrogatepass")
        return p

    def audit_case(self, cid: str, family: str, p: Path, fields: list[str] | None = None,
                   extra: list[str] | None = None) -> None:
        """``icore audit FILE -o OUT --json S``: the file must be named on failure."""
        d = p.parent
        self.cases.append(Case(cid, family, ["ICORE", "audit", str(p), "-o", str(d / "out"),
                                             "--json", str(d / "s.json"), *(extra or [])],
                               inputs=[p], names=[p.name], fields=fields or []))

    # ---------------------------------------------------------------- importers
    def importer_fields(self) -> None:
        """Wrong types at every field: a sample of (path x bad value or deletion)."""
        for fmt, (name, kind, doc) in self.formats.items():
            paths = list(_paths(doc))
            ops = [(p, v) for p in paths for v in range(len(BAD) + 1)]
            for n, (path, v) in enumerate(self.rng.sample(ops, min(self.per_format, len(ops)))):
                cid = f"field/{fmt}/{n}"
                d = self._dir(cid)
                mutated = _set(doc, path, None, delete=True) if v == len(BAD) and \
                    isinstance(path[-1], str) else _set(doc, path, BAD[v % len(BAD)])
                p = self.write_doc(d, name, kind, mutated)
                self.audit_case(cid, "importer-field", p, _keys(path))

    def importer_encodings(self) -> None:
        """Every seed in wrong encodings, with NUL bytes, raw separators, truncated..."""
        for fmt, (name, kind, doc) in self.formats.items():
            text = "\n".join(dumps(x) for x in doc) + "\n" if kind == "jsonl" else dumps(doc)
            variants: dict[str, bytes] = {
                "utf16": text.encode("utf-16"), "utf16le-nobom": text.encode("utf-16-le"),
                "utf8-bom": b"\xef\xbb\xbf" + text.encode(),
                "invalid-utf8": text.encode().replace(b'"', b'"\xff\xfe', 3),
                "nul-bytes": text.encode().replace(b",", b",\x00", 2),
                "raw-u2028": text.replace('": "', '": "\u2028\u2029', 3).encode(),
                "lone-surrogate": text.replace('": "', '": "\\udc80', 2).encode(),
                "truncated": text.encode()[: len(text) // 2],
                "empty": b"", "whitespace": b" \n\t\n",
                "crlf": text.replace("\n", "\r\n").encode(),
                "latin1": text.replace('": "', '": "\u00e9', 2).encode("latin-1", "replace"),
                "dup-keys": _dup_keys(text).encode(),
                "deep": ("[" * 200_000 + "]" * 200_000).encode(),
                "top-scalar": b"1e400",
            }
            for v, data in variants.items():
                cid = f"enc/{fmt}/{v}"
                d = self._dir(cid)
                p = d / name
                p.write_bytes(data)
                self.audit_case(cid, "encoding", p)

    def structure(self) -> None:
        """Cycles of 3+, orphan parents, duplicate ids, huge steps, repeated runs."""
        otlp = seeds.otlp_doc()
        sp = otlp["resourceSpans"][0]["scopeSpans"][0]["spans"]

        def with_parents(parents: dict[int, int | None], dup: bool = False) -> Any:
            d = copy.deepcopy(otlp)
            spans = d["resourceSpans"][0]["scopeSpans"][0]["spans"]
            for i, par in parents.items():
                if par is None:
                    spans[i].pop("parentSpanId", None)
                else:
                    spans[i]["parentSpanId"] = f"{par:016x}"
            if dup:
                spans.append(copy.deepcopy(spans[1]))
            return d

        cycles: dict[str, Any] = {
            "cycle3": with_parents({0: 3, 1: 1 + 0, 2: 2}),
            "cycle4": with_parents({0: 4, 1: 1, 2: 2, 3: 3}),
            "cycle3+root": with_parents({1: 4, 2: 2, 3: 3}),
            "orphans": with_parents({0: 99, 1: 98, 2: 97, 3: 96}),
            "dup-ids": with_parents({}, dup=True),
            "all-dup": {"resourceSpans": [{"scopeSpans": [{"spans": [sp[0]] * 5}]}]},
            "cycle-and-good": {"resourceSpans": [
                with_parents({0: 3, 1: 1, 2: 2})["resourceSpans"][0],
                _retrace(otlp)["resourceSpans"][0]]},
        }
        for name, doc in cycles.items():
            for fmt, fname, kind in (("otlp-json", "t.otlp.json", "json"),
                                     ("otlp-jsonl", "t.otlp.jsonl", "jsonl")):
                cid = f"struct/{fmt}/{name}"
                p = self.write_doc(self._dir(cid), fname, kind, [doc] if kind == "jsonl" else doc)
                self.audit_case(cid, "structure", p)
        ph = seeds.phoenix_doc()
        for i, par in ((0, 3), (1, 2)):
            ph[i]["parent_id"] = f"{par:016x}"
        lf = seeds.langfuse_doc()
        obs = lf["observations"]
        obs[0]["parentObservationId"], obs[2]["parentObservationId"] = "o3", "o2"
        obs[1]["parentObservationId"] = "o3"
        jg = seeds.jaeger_doc()
        jsp = jg["data"][0]["spans"]
        jsp[0]["references"] = [{"refType": "CHILD_OF", "spanID": jsp[2]["spanID"]}]
        jsp[1]["references"] = [{"refType": "CHILD_OF", "spanID": jsp[2]["spanID"]}]
        jsp[2]["references"] = [{"refType": "CHILD_OF", "spanID": jsp[1]["spanID"]}]
        lfd = seeds.langfuse_doc()
        lfd["observations"] += copy.deepcopy(lfd["observations"])
        jd = seeds.jaeger_doc()
        jd["data"][0]["spans"] += copy.deepcopy(jd["data"][0]["spans"])
        for cid, name, doc in (("struct/phoenix/cycle3", "phoenix.json", ph),
                               ("struct/langfuse/cycle3", "langfuse.json", lf),
                               ("struct/jaeger/cycle3", "jaeger.json", jg),
                               ("struct/langfuse/dup-ids", "langfuse.json", lfd),
                               ("struct/jaeger/dup-ids", "jaeger.json", jd)):
            p = self.write_doc(self._dir(cid), name, "json", doc)
            self.audit_case(cid, "structure", p)
        rows = seeds.jsonl_rows()
        big = [*rows[:2], {"agent": "a", "kind": "output", "content": "x", "step": 10**15},
               {"agent": "a", "kind": "output", "content": "y", "step": -5}]
        dec = copy.deepcopy(rows)
        dec[6]["planfence"]["decision"]["roots"] = ["b" * 64, "c" * 64, "b" * 64]
        dup = [*rows, rows[5], {"planfence": {"record": {"id": seeds.R, "key": "other",
                                                         "owner": "x", "seq": 1}}}]
        many = [rows[0]] + [rows[1]] * 3000
        for cid, doc in (("struct/jsonl/steps", big), ("struct/jsonl/dup-roots", dec),
                         ("struct/jsonl/dup-record", dup), ("struct/jsonl/many-tasks", many),
                         ("struct/jsonl/two-runs", [rows[0], *rows[1:3], rows[0]])):
            p = self.write_doc(self._dir(cid), "run.jsonl", "jsonl", doc)
            self.audit_case(cid, "structure", p)

    def filesystem(self) -> None:
        """Missing paths, folders named .jsonl, link loops, devices, files that vanish."""
        good = "\n".join(dumps(x) for x in seeds.jsonl_rows()) + "\n"
        d = self._dir("fs/missing")
        self.audit_case("fs/missing", "filesystem", d / "nope.jsonl")
        d = self._dir("fs/dir-named-jsonl")
        (d / "x.jsonl").mkdir()
        self.audit_case("fs/dir-named-jsonl", "filesystem", d / "x.jsonl")
        d = self._dir("fs/link-loop")
        (d / "runs").mkdir()
        (d / "runs" / "t.jsonl").write_text(good)
        (d / "runs" / "loop").symlink_to(d / "runs")
        (d / "runs" / "a.jsonl").symlink_to("b.jsonl")
        (d / "runs" / "b.jsonl").symlink_to("a.jsonl")
        self._folder_case("fs/link-loop", d / "runs", ["a.jsonl"])
        d = self._dir("fs/special")
        (d / "runs").mkdir()
        (d / "runs" / "t.jsonl").write_text(good)
        os.mkfifo(d / "runs" / "p.jsonl")
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(d / "runs" / "s.jsonl"))
        s.close()
        (d / "runs" / "z.jsonl").symlink_to("/dev/zero")
        (d / "runs" / "dead.json").symlink_to(d / "nowhere")
        self._folder_case("fs/special", d / "runs", ["p.jsonl", "s.jsonl", "z.jsonl",
                                                     "dead.json"])
        for name, target in (("dev-zero", "/dev/zero"), ("dev-null", "/dev/null"),
                             ("proc-status", "/proc/self/status"), ("proc-dir", "/proc/self")):
            self._dir(f"fs/{name}")
            self.cases.append(Case(f"fs/{name}", "filesystem",
                                   ["ICORE", "audit", target, "--no-report"], names=[target]))
        d = self._dir("fs/sparse-5g")
        with (d / "big.jsonl").open("wb") as f:
            f.truncate(5 << 30)
        self.audit_case("fs/sparse-5g", "filesystem", d / "big.jsonl")
        d = self._dir("fs/vanishing")
        (d / "runs").mkdir()
        for i in range(300):
            (d / "runs" / f"t{i:03d}.jsonl").write_text(good.replace('"r1"', f'"r{i}"'))
        self.cases.append(Case("fs/vanishing", "filesystem", [
            "sh", "-c", f"(sleep 1.2; rm -f {d}/runs/t1*.jsonl {d}/runs/t2*.jsonl) & "
            f"exec \"$ICORE_PY\" -m icore audit {d}/runs --no-report; wait"], names=["t1", "t2"]))

    def _folder_case(self, cid: str, folder: Path, names: list[str]) -> None:
        js = folder.parent / "s.json"
        self.cases.append(Case(cid, "filesystem", ["ICORE", "audit", str(folder), "-o",
                                                   str(folder.parent / "out"), "--json", str(js)],
                               inputs=[folder / "t.jsonl"], names=names))
        self.cases[-1].fields = [f"json:{n}" for n in names]  # the skip must be in --json


def _retrace(doc: dict[str, Any]) -> dict[str, Any]:
    d = copy.deepcopy(doc)
    for r in d["resourceSpans"]:
        for ss in r["scopeSpans"]:
            for s in ss["spans"]:
                s["traceId"] = "cd" * 16
    return d


def _lines(p: Path) -> list[Any]:
    return [json.loads(x) for x in p.read_text(encoding="utf-8").splitlines() if x.strip()]


def _dup_keys(text: str) -> str:
    i = text.find('{"') + 1
    j = text.find('":', i)
    key = text[i:j + 1]
    return text[:i] + key + ': {"x": [null]}, ' + text[i:] if i > 0 and j > 0 else text


def yaml_mutations(doc: Any, rng: random.Random, n: int) -> list[tuple[str, str, list[str]]]:
    """``n`` damaged copies of a YAML manifest: (label, text, the damaged field's keys)."""
    bad: list[Any] = [None, True, -1, 0, 10**30, 1.5, float("nan"), float("inf"), "", "abc",
                      "\u00e9" * 300, [], {}, [[[]]], {"a": [1]}, "../../etc/passwd",
                      "/proc/version", "a" * 5000, "-1", "x y", "planner.1", 10**5000,
                      datetime.date(2026, 1, 1), datetime.datetime(2026, 1, 1, 0, 0),
                      "2026-02-30T00:00:00Z", "0000-01-01", ".nan", "NaN"]
    ops = [(p, v) for p in _paths(doc) for v in range(len(bad) + 2)]
    out = []
    for path, v in rng.sample(ops, min(n, len(ops))):
        if v == len(bad):
            if not isinstance(path[-1], str):
                continue
            mutated = _set(doc, path, None, delete=True)
            label = "delete"
        elif v == len(bad) + 1:
            parent = path[:-1]
            node = doc
            for k in parent:
                node = node[k]
            if not isinstance(node, dict):
                continue
            mutated = _set(doc, (*parent, "unknown_key_x"), 1)
            label = "unknown-key"
        else:
            mutated = _set(doc, path, bad[v])
            label = f"v{v}"
        out.append((f"{'.'.join(map(str, path))}={label}", yaml.safe_dump(
            mutated, allow_unicode=True, width=10**6), _keys(path) or ["[0]"]))
    return out


YAML_SPECIALS: dict[str, str] = {
    "alias-bomb": "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
                  "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
                  "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
                  "g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nh: [*g,*g,*g,*g,*g,*g,*g,*g,*g]\n",
    "python-tag": "!!python/object/apply:os.system ['echo pwned']\n",
    "deep-flow": "[" * 20000 + "]" * 20000 + "\n",
    "tabs": "name:\tx\n\tagents: [\n",
    "scalar": "42\n", "list": "- a\n- b\n", "empty": "", "null": "null\n",
    "binary": "\udcff\udcfe",  # written as raw bytes 0xff 0xfe
    "huge-int": "name: 1" + "0" * 5000 + "\n",
    "merge-key": "base: &b {name: x}\n<<: *b\n",
    "huge-neg-int": "name: -" + "9" * 5000 + "\n",
    "date-feb30": "name: 2026-02-30\n",  # YAML timestamps that are no date
    "date-year0": "name: 0000-01-01\n",
    "time-out-of-range": "name: 2026-01-01 25:61:00\n",
    "date-bare": "2026-01-01\n",
}


def manifest_texts(doc: Any, rng: random.Random, n: int
                   ) -> Iterator[tuple[str, str, list[str]]]:
    """YAML damage: duplicate keys, aliases, bombs, tags, and :func:`yaml_mutations`."""
    body = yaml.safe_dump(doc, allow_unicode=True)
    yield "dup-key", f"name: first\n{body}", []
    first = next(iter(doc))
    yield "alias-field", f"x: &big {{{first}: 1}}\n" + body.replace(
        f"{first}:", f"{first}: *big\n_old_{first}:", 1), [first]
    for label, text in YAML_SPECIALS.items():
        yield label, text, []
    yield from yaml_mutations(doc, rng, n)


Gen = Callable[[Builder], None]
