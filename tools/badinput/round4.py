"""Bad inputs of the surfaces the first three rounds did not reach (issue 29, fourth round).

Families, each generated from the sweep's seed (sampled where the product is large):

- ``gateway-start``: gateway manifests that validate but cannot start or run: an upstream
  command that is missing, a folder, not executable, exits at once, prints no JSON-RPC or
  never answers; a URL upstream that is down, with a password or a bearer header (never
  printed); a trace that is a folder, a FIFO, a link loop, ``/dev/full``, under ``/proc``;
  an ``http.clients`` token variable that is unset or empty; an OTLP endpoint that is down.
- ``odd-files``: every file icore reads (a trace of each format, the run, team and
  gateway manifests, ``serve``'s team manifest) replaced by a folder, a FIFO, a link loop,
  a dead link, an empty file, random bytes, one 20 MB line, UTF-16 with a BOM, a UTF-8
  BOM, CRLF line ends, NUL bytes, a truncated or a doubled (concatenated) document.
- ``env-otel``: the ``OTEL_*`` variables icore's exporter honours and ``ICORE_EVENT_LOOP``
  / ``ICORE_MCP_LEAN`` / ``ICORE_LLM_API_KEY`` set to junk (headers and keys carry a
  credential that must never be printed).
- ``bench-flags``: the ``icore bench`` flags the first rounds left out, with values that
  must be refused (a legal value may run for minutes).
- ``report-names``: run ids that collide once made file names (``a/b`` and ``a_b``,
  ``R1`` and ``r1``, ``index`` and ``INDEX``, ``.``, ``..``, ``assets``), and ``--out``
  folders holding the user's own ``index.html``: every run must get its own report and
  nothing the user had may change.
- ``api-more``: the public helpers outside the third round's table (approvals,
  replanners, records, declarations, manifests from dicts, report names, agent ids,
  importers' helpers), one argument at a time replaced by a wrong type.
"""

from __future__ import annotations

import copy
import json
import os
import random
import shutil
import sys
from pathlib import Path
from typing import Any

import yaml

from . import api_types, seeds
from .cases import SECRET, Builder, Case, dumps
from .surfaces import _UPSTREAM, _gateway_doc


def _gw_case(b: Builder, cid: str, doc: dict[str, Any], names: list[str],
             prep: Any = None, ok: tuple[int, ...] = (1, 2), env: str = "",
             timeout: float = 90) -> None:
    d = b._dir(cid)
    shutil.copy(_UPSTREAM, d)
    (d / "facts.db").write_text("the user's own file\n")
    if prep is not None:
        prep(d)
    p = d / "gw.yaml"
    p.write_text(yaml.safe_dump(doc))
    argv = ["ICORE", "mcp", str(p)]
    if env:
        argv = ["sh", "-c", f'{env} exec "$ICORE_PY" -m icore mcp {p}']
    b.cases.append(Case(cid, "gateway-start", argv, inputs=[p, d / "notes_server.py",
                                                            d / "facts.db"],
                        names=names, timeout=timeout, ok_codes=ok))


def gateway_start(b: Builder) -> None:
    """Gateway manifests that validate, whose upstream, trace or clients cannot work."""
    sh = shutil.which("sh") or "/bin/sh"
    commands: dict[str, tuple[str, list[str]]] = {
        "missing": ("/nonexistent/bin/server", []),
        "folder": ("/tmp", []),
        "not-exec": ("./notes_server.py", []),
        "exits": (sh, ["-c", "exit 3"]),
        "garbage": (sh, ["-c", "echo 'not json'; echo '{\"jsonrpc\": 5}'; exec sleep 60"]),
        "silent": (sh, ["-c", "exec sleep 120"]),
        "stderr-flood": (sh, ["-c", "head -c 20000000 /dev/zero | tr '\\0' x >&2; exit 1"]),
        "crash-mid": (sh, ["-c", "head -c 10; exit 1"]),
    }
    for name, (cmd, args) in sorted(commands.items()):
        doc = _gateway_doc()
        doc["upstreams"]["notes"].update(command=cmd, args=args, timeout_s=3)
        _gw_case(b, f"gwstart/cmd-{name}", doc, ["notes", "upstream"])
    for name, url, headers in (
            ("url-down", "http://127.0.0.1:1/mcp", {}),
            ("url-password", f"http://user:{SECRET}@127.0.0.1:1/mcp", {}),
            ("url-bearer", "http://127.0.0.1:1/mcp", {"Authorization": f"Bearer {SECRET}"}),
            ("url-unresolvable", "http://no-such-host.invalid:8000/mcp", {})):
        doc = _gateway_doc()
        doc["upstreams"]["notes"] = {"url": url, "headers": headers, "timeout_s": 3}
        if not headers:
            doc["upstreams"]["notes"].pop("headers")
        _gw_case(b, f"gwstart/{name}", doc, ["notes", "upstream"])
    doc = _gateway_doc()
    doc["upstreams"]["notes"]["env"] = {"API_KEY": SECRET}
    doc["upstreams"]["notes"]["command"] = "/nonexistent/bin/server"
    _gw_case(b, "gwstart/env-secret", doc, ["notes", "upstream"])

    def trace_dir(d: Path) -> None:
        (d / "t").mkdir()

    def trace_fifo(d: Path) -> None:
        os.mkfifo(d / "t")

    def trace_loop(d: Path) -> None:
        (d / "t").symlink_to(d / "t2")
        (d / "t2").symlink_to(d / "t")

    def trace_dead(d: Path) -> None:
        (d / "t").symlink_to(d / "nowhere" / "x")

    traces = {"dir": ("t", trace_dir), "fifo": ("t", trace_fifo), "loop": ("t", trace_loop),
              "dead-link": ("t", trace_dead), "dev-full": ("/dev/full", None),
              "proc": ("/proc/x/trace.jsonl", None), "dev-null": ("/dev/null", None),
              "user-file": ("facts.db", None)}
    for name, (path, prep) in sorted(traces.items()):
        doc = _gateway_doc()
        doc["trace"] = path
        _gw_case(b, f"gwstart/trace-{name}", doc, ["trace"], prep=prep)
    for name, env, token_env in (("token-unset", "unset GWTOK;", "GWTOK"),
                                 ("token-empty", "export GWTOK=;", "GWTOK"),
                                 ("token-space", "export GWTOK=' ';", "GWTOK")):
        doc = _gateway_doc()
        doc["http"] = {"clients": {"alice": {"token_env": token_env}}}
        _gw_case(b, f"gwstart/{name}", doc, ["GWTOK", "token"], env=env, ok=(0, 1, 2))
    for name, otel in (("otel-down", "http://127.0.0.1:1"),
                       ("otel-password", f"http://u:{SECRET}@127.0.0.1:1"),
                       ("otel-proc", "file:/proc/x/o.jsonl"), ("otel-fifo", "file:t")):
        doc = _gateway_doc()
        doc["otel"] = otel
        _gw_case(b, f"gwstart/{name}", doc, ["otel", "OTLP", "otlp"], ok=(0, 1, 2),
                 prep=trace_fifo if name == "otel-fifo" else None)


# ------------------------------------------------------------------------- odd files
def _variants(text: str, rng: random.Random) -> dict[str, bytes | str]:
    """The file replaced by ... (``str`` values are kinds of file-system node)."""
    raw = text.encode()
    return {
        "folder": "DIR", "fifo": "FIFO", "link-loop": "LOOP", "dead-link": "DEAD",
        "empty": b"", "random-bytes": rng.randbytes(4096),
        "huge-line": b"a" * (20 << 20),
        "utf16-bom": text.encode("utf-16"), "utf8-bom": b"\xef\xbb\xbf" + raw,
        "crlf": text.replace("\n", "\r\n").encode(),
        "nul": raw.replace(b"\n", b"\n\x00", 1) if b"\n" in raw else raw + b"\x00",
        "truncated": raw[: max(1, len(raw) * 2 // 3)],
        "concatenated": raw.rstrip(b"\n") + raw,
        "doubled-lines": raw + raw,
    }


def _place(p: Path, v: bytes | str) -> None:
    if v == "DIR":
        p.mkdir()
    elif v == "FIFO":
        os.mkfifo(p)
    elif v == "LOOP":
        p.symlink_to(p.with_name(p.name + ".2"))
        p.with_name(p.name + ".2").symlink_to(p)
    elif v == "DEAD":
        p.symlink_to(p.with_name("nowhere") / "x")
    else:
        assert isinstance(v, bytes)
        p.write_bytes(v)


def odd_files(b: Builder) -> None:
    """Each input file icore reads, replaced by each odd file (a sample per seed)."""
    gw = _gateway_doc()
    consumers: list[tuple[str, str, str, Any]] = []
    for fmt in ("otlp-json", "otlp-jsonl", "langfuse", "icore-jsonl", "whowhen-magentic",
                "live-export"):
        name, kind, doc = b.formats[fmt]
        text = "\n".join(dumps(x) for x in doc) + "\n" if kind == "jsonl" else dumps(doc)
        consumers.append((f"audit-{fmt}", name, text, "audit"))
    consumers += [
        ("run", "m.yaml", yaml.safe_dump(seeds.RUN_MANIFEST), "run"),
        ("certs", "team.yaml", yaml.safe_dump(seeds.TEAM_MANIFEST), "certs"),
        ("serve", "team.yaml", yaml.safe_dump(seeds.TEAM_MANIFEST), "serve"),
        ("mcp", "gw.yaml", yaml.safe_dump(gw), "mcp"),
    ]
    pairs = [(c, v) for c in consumers for v in _variants("x", random.Random(0))]
    for (label, fname, text, cmd), vname in sorted(b.rng.sample(pairs, min(60, len(pairs))),
                                                   key=lambda x: (x[0][0], x[1])):
        cid = f"odd/{label}/{vname}"
        d = b._dir(cid)
        p = d / fname
        _place(p, _variants(text, random.Random(cid))[vname])
        keep = d / "keep.txt"
        keep.write_text("the user's own file\n")
        out = d / "o"
        if cmd == "audit":
            argv = ["ICORE", "audit", str(p), "-o", str(out), "--json", str(d / "s.json")]
        elif cmd == "run":
            argv = ["ICORE", "run", str(p), "--out", str(out)]
        elif cmd == "certs":
            argv = ["ICORE", "certs", "init", "--manifest", str(p)]
        elif cmd == "serve":
            argv = ["ICORE", "serve", str(p), "--agent", "planner"]
        else:
            shutil.copy(_UPSTREAM, d)
            argv = ["ICORE", "mcp", str(p)]
        # a valid file may serve or run: only serve/mcp on good text is allowed to run on,
        # and a manifest with CRLF, a BOM or doubled lines may be valid (exit 0)
        b.cases.append(Case(cid, "odd-files", argv, inputs=[keep] + ([p] if p.is_file()
                                                                    and not p.is_symlink()
                                                                    else []),
                            # a valid team manifest gets as far as its missing certificates
                            names=[fname, *(["certs"] if cmd == "serve" else [])],
                            timeout=150,
                            ok_codes=(0, 1, 2)))


# ------------------------------------------------------------------------- env
_OTEL_ENV = {
    "OTEL_EXPORTER_OTLP_HEADERS": [f"Authorization=Bearer {SECRET}", "=,,=", "a", "\udcff=1",
                                   f"x-key={SECRET},bad header=1"],
    "OTEL_EXPORTER_OTLP_TIMEOUT": ["nan", "-1", "abc", "1e400", "0"],
    "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": ["nan", "abc"],
    "OTEL_EXPORTER_OTLP_COMPRESSION": ["bogus", "\udcff"],
    "OTEL_EXPORTER_OTLP_CERTIFICATE": ["/nonexistent.pem", "/dev/null", "/proc/self"],
    "OTEL_EXPORTER_OTLP_ENDPOINT": ["not a url", f"http://u:{SECRET}@127.0.0.1:1", ":::"],
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": ["ftp://x", "http://[::1"],
    "OTEL_RESOURCE_ATTRIBUTES": ["=,=,", "a=%zz", "\udcff=x", "x" * 5000],
    "OTEL_SERVICE_NAME": ["", "\udcff", "x" * 5000],
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": ["maybe", "\udcff", "TRUE "],
    "OTEL_BSP_SCHEDULE_DELAY": ["nan", "-1", "abc"],
    "OTEL_BSP_MAX_QUEUE_SIZE": ["0", "-5", "abc"],
    "OTEL_BSP_EXPORT_TIMEOUT": ["nan", "abc"],
}
_GW_ENV = {"ICORE_EVENT_LOOP": ["bogus", "", "\udcff", "uvloop "],
           "ICORE_MCP_LEAN": ["2", "", "\udcff"]}
_RUN_KEY_ENV = {"ICORE_LLM_API_KEY": [SECRET, f"\n{SECRET}\n", "\udcff" + SECRET]}


def env_otel(b: Builder) -> None:
    """OTEL_* under ``icore audit --otlp-endpoint``; loop and lean under ``icore mcp``."""
    d = b._dir("envo/base")
    t = b.write_doc(d, "t.jsonl", "jsonl", seeds.jsonl_rows())
    g = b._dir("envo/gw")
    shutil.copy(_UPSTREAM, g)
    man = g / "gw.yaml"
    doc = _gateway_doc()
    doc.pop("store")
    doc.pop("trace")
    man.write_text(yaml.safe_dump(doc))
    pairs = [(k, v, "audit") for k, vs in _OTEL_ENV.items() for v in vs]
    pairs += [(k, v, "mcp") for k, vs in _GW_ENV.items() for v in vs]
    pairs += [(k, v, "run") for k, vs in _RUN_KEY_ENV.items() for v in vs]
    script = 'export "$1=$(printf "$2")"; shift 2; exec "$@"'
    for k, v, cmd in sorted(b.rng.sample(pairs, min(30, len(pairs)))):
        cid = f"envo/{k}={v[:12]!r}"
        e = b._dir(cid)
        if cmd == "audit":
            # OTEL_* apply when the endpoint comes from the environment: a --otlp-endpoint
            # URL still reads headers, timeout, compression and certificates
            tail = ["audit", str(t), "--no-report", "--json", str(e / "s.json"),
                    "--otlp-endpoint", "http://127.0.0.1:1"]
            names = [k, "OTLP", "otlp", "127.0.0.1:1"]
        elif cmd == "mcp":
            tail = ["mcp", str(man)]
            names = [k]
        else:
            tail = ["run", "--backend", "llm", "--llm-base-url", "http://127.0.0.1:1/v1",
                    "--out", str(e / "o")]
            names = ["127.0.0.1", "llm", "LLM"]
        printf = "".join(f"\\{c:03o}" for c in os.fsencode(v))
        full = ["sh", "-c", script, "sh", k, printf, sys.executable, "-m", "icore", *tail]
        b.cases.append(Case(cid, "env-otel", full, inputs=[t, man], names=names,
                            timeout=150))


# ------------------------------------------------------------------------- bench flags
_BENCH: dict[str, dict[str, list[str]]] = {
    "net": {"--backend": ["bogus", ""]},
    "peers": {"--rounds": ["-1", "nan", "abc"], "--n": ["-1", "abc"],
              "--seconds": ["-1", "nan", "inf"], "--json": ["/proc/x/y", "/dev/full"]},
    "planfence": {"--transport": ["bogus", ""], "--link": ["bogus", ""],
                  "--base-delay-ms": ["inf", "1e400"], "--scale": ["inf", "0"]},
    "state": {"--rebuild-entries": ["-1", "abc"], "--trial-at": ["bogus", "", "-1"],
              "--sizes": ["0", "a,b", "1e400", ""], "--seed": ["abc", "nan"]},
    "import": {"--phoenix-mb": ["-1", "nan", "inf", "abc"],
               "--langfuse-mb": ["-1", "nan", "inf"], "--otlp-mb": ["inf", "1e400"]},
    "otel": {"--export-runs": ["-1", "abc"], "--receiver": ["bogus", ""],
             "--families": ["bogus", ""], "--json": ["/proc/x/y", "/dev/full"]},
    "icore": {"--preset": ["bogus", ""], "--llm-timeout-s": ["-1", "nan", "inf"],
              "--llm-base-url": [f"http://u:{SECRET}@127.0.0.1:1/v1", "not a url"]},
    "attribution": {"--write-model": ["/proc/x/y", "/dev/full", ""],
                    "--llm-mode": ["bogus", ""],
                    "--llm-base-url": [f"http://u:{SECRET}@127.0.0.1:1/v1"]},
    "integrations": {"--json": ["/proc/x/y", "/dev/full", ""], "--calls": ["0", "nan"]},
    "mcp": {"--n": ["0", "nan"], "--deps": ["nan", "1e400"]},
    "core": {"--seconds": ["inf", "1e400", "0"]},
}


def bench_flags(b: Builder) -> None:
    """``icore bench SUB FLAG VALUE`` with values that must be refused before any work."""
    for sub, flags in _BENCH.items():
        for flag, values in flags.items():
            for v in values:
                cid = f"bench2/{sub}/{flag}={v[:16]}"
                d = b._dir(cid)
                extra = ["--quick"] if sub in ("net", "state", "peers", "mcp") else []
                b.cases.append(Case(cid, "bench-flags",
                                    ["sh", "-c", f'cd {d} && exec "$ICORE_PY" -m icore '
                                     f'bench {sub} {flag} "$1" ' + " ".join(extra), "sh", v],
                                    names=[flag], timeout=60, ok_codes=(1, 2)))


# ------------------------------------------------------------------------- report names
_ID_SETS: list[list[str]] = [
    ["a/b", "a_b"], ["R1", "r1"], ["index", "INDEX"], [".", ".."], ["assets", "assets.html"],
    ["x" * 300, "x" * 299 + "y"], ["\u00e9", "e\u0301"], ["a b", "a_b", "a-b"],
    ["run", "run.html"], ["%2e%2e", "../x"], ["\u202eexe.html", "x"], ["a\nb", "a b"],
    ["CON", "con"], ["-", "--"], ["~", "$HOME"], ["a.html", "a"],
]


def report_names(b: Builder) -> None:
    """Runs whose ids collide as file names, audited into a folder holding user files."""
    rows = seeds.jsonl_rows()
    for k, ids in enumerate(b.rng.sample(_ID_SETS, min(10, len(_ID_SETS)))):
        cid = f"rnames/{k}"
        d = b._dir(cid)
        runs = d / "runs"
        runs.mkdir()
        for i, rid in enumerate(ids):
            doc = copy.deepcopy(rows)
            doc[0] = {"run": {**doc[0]["run"], "id": rid}}
            (runs / f"t{i}.jsonl").write_text("\n".join(dumps(x) for x in doc) + "\n")
        out = d / "o"
        out.mkdir()
        mine = out / "index.html"
        mine.write_text("<p>the user's own page</p>\n")
        (out / "notes.txt").write_text("the user's own notes\n")
        n = len(ids)
        # every run has a report of its own: the index links n distinct pages that exist
        fresh = d / "o2"
        # into the folder holding the user's files (refused or kept apart), then into a
        # fresh folder whose pages are counted
        check = (f'"$ICORE_PY" -m icore audit {runs} -o {out}; a=$?; '
                 f'"$ICORE_PY" -m icore audit {runs} -o {fresh}; rc=$?; '
                 f'[ $rc -ne 0 ] || "$ICORE_PY" - {fresh} {n} <<"EOF" || exit 4\n'
                 "import sys, pathlib\n"
                 "o = pathlib.Path(sys.argv[1]); n = int(sys.argv[2])\n"
                 "pages = [p for p in o.rglob('*.html') if p.name != 'index.html']\n"
                 "if len({p.resolve() for p in pages}) < n:\n"
                 "    print('COLLISION', sorted(p.name for p in pages)); sys.exit(1)\n"
                 "EOF\n"
                 '[ "$a" -le 2 ] || exit "$a"; exit $rc')
        b.cases.append(Case(cid + " " + json.dumps(ids)[:40], "report-names",
                            ["sh", "-c", check],
                            inputs=[*sorted(runs.iterdir()), mine, out / "notes.txt"],
                            names=["index.html", "--out", str(out)], timeout=120,
                            ok_codes=(0, 1, 2)))


# ------------------------------------------------------------------------- more API
_WSX = ("from icore.workspace import Workspace, ApprovalBook, read_answer, arg_fault, "
        "bad_args_hint, UserReplanner\n")
_REC = ("from icore.records import Record, derive, canonical_json, content_address, "
        "decode_record, is_record_id, ancestors, frontier, record_from_wire\n"
        "r0 = Record.create(key='k', owner='o', seq=1, content={})\n")
_GWD = ("import json\nfrom icore.mcp import manifest_from_dict, expand_deps\n"
        "GWD = " + repr(json.loads(json.dumps({**_gateway_doc(), "store": {"backend":
                                                                            "memory"}}))) +
        "\nGWD.pop('trace')\n")
MORE_TARGETS: list[tuple[str, str, str, dict[str, str]]] = [
    ("ApprovalBook", _WSX, "ApprovalBook(max_calls={max_calls})", {"max_calls": "8"}),
    ("read_answer", _WSX, "read_answer({answer})", {"answer": "{'approve': True}"}),
    ("arg_fault", _WSX, "arg_fault({key}, {args})", {"key": "'k/{x}'", "args": "{'x': 1}"}),
    ("bad_args_hint", _WSX, "bad_args_hint({bad}, {action}, {keys})",
     {"bad": "{'x': 'why'}", "action": "'book'", "keys": "['k/1']"}),
    ("agent.execute.approve", _WSX, "ag.execute('book', t, {{'x': 1}}, depends_on={{'k/1'}}, "
     "approve={approve})", {"approve": "(lambda req: True)"}),
    ("agent.execute.replan", _WSX, "ag.execute('book', t, {{'x': 1}}, depends_on={{'k/1'}}, "
     "replan={replan})", {"replan": "(lambda stale: {'x': 2})"}),
    ("records.derive", _REC, "derive(key={key}, owner={owner}, seq={seq}, content={content}, "
     "inputs={inputs})", {"key": "'p'", "owner": "'o'", "seq": "1", "content": "{}",
                          "inputs": "[r0]"}),
    ("records.canonical_json", _REC, "canonical_json({value})", {"value": "{'a': 1}"}),
    ("records.content_address", _REC, "content_address({data})", {"data": "b'{}'"}),
    ("records.decode_record", _REC, "decode_record({data})", {"data": "encode_record(r0)"}),
    ("records.record_from_wire", _REC, "record_from_wire({obj})",
     {"obj": "record_to_wire(r0)"}),
    ("records.ancestors", _REC, "ancestors({root}, {lookup})",
     {"root": "r0.id", "lookup": "{r0.id: r0}.get"}),
    ("records.frontier", _REC, "frontier({roots}, {deps}, {lookup})",
     {"roots": "[r0.id]", "deps": "['k']", "lookup": "{r0.id: r0}.get"}),
    ("state.declaration_from_dict", "from icore.state import declaration_from_dict\n",
     "declaration_from_dict({data}, file={file})", {"data": "{}", "file": "'d.yaml'"}),
    ("live.manifest_from_dict", "from icore.live import manifest_from_dict\n",
     "manifest_from_dict({data}, file={file})",
     {"data": repr(seeds.RUN_MANIFEST), "file": "'m.yaml'"}),
    ("live.default_manifest", "from icore.live import default_manifest\n",
     "default_manifest({family})", {"family": "'reservation'"}),
    ("live.make_task", "from icore.live import make_task\n",
     "make_task({family}, {seed}, {task})",
     {"family": "'reservation'", "seed": "0", "task": "None"}),
    ("mcp.manifest_from_dict", _GWD, "manifest_from_dict({data}, file={file})",
     {"data": "GWD", "file": "'gw.yaml'"}),
    ("mcp.expand_deps", _GWD, "expand_deps({patterns}, {args}, {known})",
     {"patterns": "['memo://{x}']", "args": "{'x': 'a'}", "known": "['x']"}),
    ("report.report_filename", "from icore.report import report_filename\n",
     "report_filename({run_id})", {"run_id": "'r1'"}),
    ("net.check_agent_id", "from icore.net import check_agent_id\n",
     "check_agent_id({agent})", {"agent": "'planner'"}),
    ("net.TeamManifest.parse", "from icore.net import TeamManifest\n",
     "TeamManifest.parse({data}, where={where})",
     {"data": repr(seeds.TEAM_MANIFEST), "where": "'team.yaml'"}),
    ("adapters.parse_otlp_runs", "from icore.adapters import parse_otlp_runs\n",
     "parse_otlp_runs({text}, file={file}, run_id={run_id})",
     {"text": repr(dumps(seeds.otlp_doc())), "file": "'f'", "run_id": "'r'"}),
    ("adapters.iter_otlp_runs", _TRACE_OTLP := (
        "from icore.adapters import iter_otlp_runs, load_otlp_runs\n"
        "OT = os.path.join(DIR, 't.otlp.json')\nopen(OT, 'w').write(" +
        repr(dumps(seeds.otlp_doc())) + ")\n"), "list(iter_otlp_runs({path}))", {"path": "OT"}),
    ("adapters.load_otlp_runs", _TRACE_OTLP, "load_otlp_runs({path})", {"path": "OT"}),
    ("adapters.parse_who_and_when_data", "from icore.adapters import "
     "parse_who_and_when_data\n", "parse_who_and_when_data({data}, file={file})",
     {"data": repr(seeds.magentic()), "file": "'f'"}),
    ("adapters.parse_spans", "from icore.adapters import parse_spans\n",
     "parse_spans({text}, file={file})",
     {"text": repr(dumps(seeds.otlp_doc())), "file": "'f'"}),
    ("adapters.check_size", "from icore.adapters import check_size\nfrom pathlib import Path\n",
     "check_size({path})", {"path": "Path(DIR)"}),
    ("adapters.collect_paths", "from icore.adapters import collect_paths\n",
     "collect_paths({paths})", {"paths": "[DIR]"}),
    ("adapters.detect_family", "from icore.adapters import detect_family\n",
     "detect_family({data})", {"data": repr(seeds.magentic())}),
    ("fence.bind_action", "from icore.fence import bind_action\n",
     "bind_action({action}, {args})", {"action": "'book'", "args": "{'x': 1}"}),
    ("fence.args_digest", "from icore.fence import args_digest\n",
     "args_digest({args})", {"args": "{'x': 1}"}),
    ("fence.strategy", "from icore.fence import strategy\n", "strategy({policy})",
     {"policy": "'planfence'"}),
    ("integrations.read_refusal", "from icore.integrations import read_refusal\n",
     "read_refusal({result}, {tool})", {"result": "'x'", "tool": "'t'"}),
    ("integrations.normalize_args", "from icore.integrations import normalize_args\n",
     "normalize_args({schema}, {args})", {"schema": "t", "args": "{'x': 1}"}),
]


def api_more(b: Builder, per_seed: int = 80) -> None:
    """``per_seed`` sampled (helper, argument, bad value) calls, one a subprocess."""
    triples = [(tid, arg, bad) for tid, _, _, good in MORE_TARGETS for arg in good
               for bad in api_types.BAD]
    for tid, arg, bad in sorted(b.rng.sample(triples, min(per_seed, len(triples)))):
        _, setup, template, good = next(t for t in MORE_TARGETS if t[0] == tid)
        setup = setup.replace("from icore.records import", "from icore.records import "
                              "encode_record, record_to_wire,")
        cid = f"apimore/{tid}/{arg}={bad}"
        b._dir(cid)
        b.cases.append(Case(cid, "api-more",
                            ["PY", api_types._code(setup, template.format(
                                **{**good, arg: api_types.BAD[bad]}))],
                            # a typed error's structured field or path names it too
                            names=[arg, tid.split(".")[-1], arg.split("_")[-1], "file=",
                                   "field=", "path="],
                            timeout=60, ok_codes=(0, 1)))


def all_families(b: Builder) -> None:
    """Every family of this module."""
    gateway_start(b)
    odd_files(b)
    env_otel(b)
    bench_flags(b)
    report_names(b)
    api_more(b)


def _check_targets() -> None:  # pragma: no cover - a developer's check of the table
    """Every target of :data:`MORE_TARGETS` with its good arguments."""
    import subprocess
    for tid, setup, template, good in MORE_TARGETS:
        setup = setup.replace("from icore.records import", "from icore.records import "
                              "encode_record, record_to_wire,")
        r = subprocess.run([sys.executable, "-c", api_types._code(setup,
                                                                   template.format(**good))],
                           capture_output=True, text=True, timeout=120, env={**os.environ})
        print(tid, r.returncode, (r.stdout + r.stderr).strip().splitlines()[-1:])


if __name__ == "__main__":  # pragma: no cover
    _check_targets()

__all__ = ["MORE_TARGETS", "all_families"]
