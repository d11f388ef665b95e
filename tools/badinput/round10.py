r"""Bad inputs of the files and arguments added since round 9 (issue 29, round 10).

Run alone (it builds only its own cases, in seconds):
``python -m tools.badinput.round10 --seed 31337 [--only att10/,own10/] [--json out]``.

- ``attempts-file`` (``att10/``): a LangGraph app with a fenced tool over a
  ``Workspace.sqlite`` folder whose ``icore-attempts.sqlite`` is damaged (random bytes,
  text, a folder, another program's ``attempts`` table or view, read-only, locked) or
  holds rows that cannot be read back. Only typed errors; the tool body never runs when
  the file cannot record its start, and a damaged row is never run again.
- ``ownership-record`` (``own10/``): a folder with committed facts whose
  ``ownership.sqlite`` holds odd rows (no JSON object, deep nesting, 5000 digits, NUL,
  lone surrogates, another owner) or is damaged: typed refusals, and every committed
  fact reads back once the record is restored.
- ``over-tcp`` (``tcp10/``): ``Workspace.over_tcp`` with odd ``identity``,
  ``addresses``, ``certs_dir`` and ``timeout_s``: an answer or an ``IcoreError`` (the
  documented ``FileNotFoundError`` / ``NotADirectoryError`` of a certs folder aside).
- ``claims`` (``claims10/``): a real stdio gateway whose shared write claims
  (``<store>/icore-writes/``) are damaged, another program's, locked, hold odd rows or
  lock files that are folders, FIFOs, link loops or unreadable: no handler may raise
  (the call must be refused or made, and recorded), the trace audits.
- ``progress`` (``prog10/``): a real stdio gateway in front of an upstream that sends
  ``notifications/progress`` with odd tokens and values (``NaN``, ``1e400``, a string, a
  10 MB or 50,000-deep message, a token the gateway never handed out, 5000 of them,
  after the answer), for calls whose client ``progressToken`` is odd (a bool, a float,
  an object, 100,000 characters, 5000 digits, the gateway's own prefix): answers in
  time, progress only under the client's own valid token, the trace audits.
- ``hostile-trace`` (``aud10/``): a recorded run edited: odd values at the ``chain``,
  ``chain_end``, ``run.icore`` header and ``reissue_of`` fields (and anywhere), duplicate
  keys, NUL / lone surrogates / BOM / line separators inserted, 20,000-deep nesting:
  ``icore audit`` exits 0-3 without a traceback.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from . import round5, round8, sweep
from .cases import Builder, Case, _Raw, dumps
from .round9 import NOCAP

_REPO = Path(__file__).resolve().parents[2]

# ------------------------------------------------------------------------ attempts-file
_ATT_DAMAGES = ["garbage", "text", "dir", "foreign", "foreign-cols", "view", "ro", "locked",
                "row-badjson", "row-deep", "row-digits", "row-blob", "row-int-how",
                "row-refused-blob", "row-unknown-blob"]

_ATT_APP = r'''
import os, sys, sqlite3
from pathlib import Path
from typing import Annotated, TypedDict
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from icore.errors import IcoreError
from icore.integrations.langgraph import fenced_tool
from icore.integrations.langgraph._attempts_db import AttemptsFile, durable_key
from icore.workspace import Workspace
DB, DAMAGE = sys.argv[1], sys.argv[2]
ws = Workspace.sqlite({"stock/*": "inventory"}, DB)
ws.put("stock/bolt", {"qty": 100})
clerk = ws.agent("clerk")
p = os.path.join(DB, "icore-attempts.sqlite")
ROWS = {"row-badjson": ("ran", None, "{bad"), "row-deep": ("ran", None, "[" * 100000),
        "row-digits": ("ran", None, "1" + "0" * 5000), "row-blob": ("ran", None, b"\xff"),
        "row-int-how": (5, None, b"\xff"), "row-refused-blob": ("refused", "opaque", b"\xfe"),
        "row-unknown-blob": ("unknown", None, b"\xfe")}
if DAMAGE == "garbage":
    open(p, "wb").write(os.urandom(5000))
elif DAMAGE == "text":
    open(p, "w").write("hello\n")
elif DAMAGE == "dir":
    os.mkdir(p)
elif DAMAGE in ("foreign", "foreign-cols", "view"):
    c = sqlite3.connect(p)
    c.execute({"foreign": "create table attempts (a, b)", "view": "create view attempts as "
               "select 1 as key", "foreign-cols": "create table attempts (key TEXT PRIMARY "
               "KEY, how)"}[DAMAGE]); c.commit(); c.close()
elif DAMAGE == "ro":
    AttemptsFile(Path(p)).close()
    for s in ("-wal", "-shm"):
        if os.path.exists(p + s):
            os.remove(p + s)
    os.chmod(p, 0o444)
elif DAMAGE == "locked":
    AttemptsFile(Path(p)).close()
    HOLD = sqlite3.connect(p, isolation_level=None)  # held while the app runs: 30 s wait
    HOLD.execute("BEGIN EXCLUSIVE")
@tool
def get_stock(sku: str) -> dict:
    """Read."""
    return clerk.read(f"stock/{sku}")
RAN = []
@tool
def dispatch(sku: str, qty: int) -> str:
    """Dispatch goods."""
    RAN.append(1)
    return "dispatched"
class M(GenericFakeChatModel):
    def bind_tools(self, t, **k): return self
def script():
    yield AIMessage("", tool_calls=[{"name": "get_stock", "args": {"sku": "bolt"}, "id": "r1"}])
    yield AIMessage("", tool_calls=[{"name": "dispatch", "args": {"sku": "bolt", "qty": 5},
                                     "id": "d1"}])
    yield AIMessage("done")
llm = M(messages=script())
class S(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
fenced = fenced_tool(dispatch, agent=clerk, depends_on=lambda a: {f"stock/{a['sku']}"})
if DAMAGE in ROWS:  # a row under every key this step can have: planted by a spy
    import icore.integrations.langgraph._attempts_db as adb
    real = adb.durable_key
    def spy(step):
        k = real(step)
        if k is not None:
            f = AttemptsFile(Path(p))
            f.start(k, "dispatch", "t1", "d1")
            f.close()
            how, kind, value = ROWS[DAMAGE]
            c = sqlite3.connect(p)
            c.execute("UPDATE attempts SET how = ?, kind = ?, value = ? WHERE key = ?",
                      (how, kind, value, k)); c.commit(); c.close()
        return k
    import icore.integrations.langgraph._fenced_node as fn
    fn.durable_key = spy
g = StateGraph(S)
g.add_node("clerk", lambda s: {"messages": [llm.invoke(s["messages"])]})
g.add_node("tools", ToolNode([get_stock, fenced]))
g.add_edge(START, "clerk"); g.add_conditional_edges("clerk", tools_condition)
g.add_edge("tools", "clerk")
app = g.compile()
try:
    out = app.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t1"}})
    for m in out["messages"]:
        if m.type == "tool":
            print("TOOL", m.name, ascii(str(m.content)[:300]))
except IcoreError as e:
    print("TYPED", type(e).__name__, ascii(str(e)[:300]))
if RAN and DAMAGE in ROWS:
    print("ACCEPTED a call whose earlier attempt cannot be read back ran again"); sys.exit(0)
if RAN and DAMAGE not in ROWS and DAMAGE != "locked":
    print("ACCEPTED the body ran with no attempts file to record its start"); sys.exit(0)
'''


def attempts_file(b: Builder, per_seed: int = 8) -> None:
    """A fenced LangGraph tool over a damaged ``icore-attempts.sqlite`` (sampled)."""
    for how in sorted(b.rng.sample(_ATT_DAMAGES, min(per_seed, len(_ATT_DAMAGES)))):
        cid = f"att10/{how}"
        d = b._dir(cid)
        (d / "app.py").write_text(_ATT_APP)
        argv = [*NOCAP, sys.executable, str(d / "app.py"), str(d / "db"), how]
        b.cases.append(Case(cid, "attempts-file", argv, timeout=120, ok_codes=(0,),
                            refusal=True))


# --------------------------------------------------------------------- ownership-record
_OWN_ROWS: dict[str, Any] = {
    "list": "[1, 2]", "int": 5, "blob": b"\xff", "str": '"x"', "deep": "[" * 100000,
    "digits": "1" + "0" * 5000, "nan": "NaN", "null": None, "badjson": "{",
    "owner-int": '{"k/*": 5}', "owner-null": '{"k/*": null}', "empty-key": '{"": "o"}',
    "surrogate": '{"k/\\ud800": "o"}', "nul": '{"k/\\u0000": "zz"}',
    "other-owner": '{"k/*": "zz"}', "class": '{"k/[": "zz"}', "huge": json.dumps(
        {f"k/{i}": "o" for i in range(20000)})}
_OWN_FILES = ["garbage", "text", "foreign", "view", "ro-file"]

_OWN_RUN = r'''
import os, sqlite3, sys, shutil
from icore.errors import IcoreError
from icore.workspace import Workspace
d, how, kind = sys.argv[1], sys.argv[2], sys.argv[3]
ws = Workspace.sqlite({"k/*": "o"}, d)
for i in range(20):
    ws.put(f"k/{i}", {"v": i})
ws.close()
rec = os.path.join(d, "ownership.sqlite")
shutil.copy(rec, rec + ".keep")
if kind == "row":
    import json
    v = json.loads(open(sys.argv[4], encoding="utf-8").read())
    v = bytes.fromhex(v[4:]) if isinstance(v, str) and v.startswith("hex:") else v
    c = sqlite3.connect(rec)
    c.execute("CREATE TABLE m2 (id TEXT PRIMARY KEY, entries) WITHOUT ROWID")
    c.execute("INSERT INTO m2 SELECT * FROM maps"); c.execute("DROP TABLE maps")
    c.execute("ALTER TABLE m2 RENAME TO maps")
    c.execute("INSERT INTO maps VALUES ('x', ?)", (v,)); c.commit(); c.close()
elif how == "garbage":
    open(rec, "wb").write(os.urandom(3000))
elif how == "text":
    open(rec, "w").write("hello")
elif how in ("foreign", "view"):
    os.remove(rec)
    c = sqlite3.connect(rec)
    c.execute("create table maps (a)" if how == "foreign" else
              "create view maps as select 1 as entries"); c.commit(); c.close()
elif how == "ro-file":
    os.chmod(rec, 0o444)
try:
    ws = Workspace.sqlite({"k/*": "o"}, d)
    ws.put("k/new", 1)
    print("OPENED")
    ws.close()
except IcoreError as e:
    print("TYPED", type(e).__name__, ascii(str(e)[:300]))
os.chmod(rec, 0o644)
os.replace(rec + ".keep", rec)
ws = Workspace.sqlite({"k/*": "o"}, d)
lost = [i for i in range(20) if ws.value(f"k/{i}", default=None) != {"v": i}]
if lost:
    print("LOST committed facts:", lost); sys.exit(9)
'''


def ownership_record(b: Builder, per_seed: int = 10) -> None:
    """A folder's ``ownership.sqlite`` given odd rows or damaged (sampled)."""
    picks = [("row", k) for k in _OWN_ROWS] + [("file", k) for k in _OWN_FILES]
    for kind, how in sorted(b.rng.sample(picks, min(per_seed, len(picks)))):
        cid = f"own10/{kind}-{how}"
        d = b._dir(cid)
        (d / "run.py").write_text(_OWN_RUN)
        v = _OWN_ROWS.get(how) if kind == "row" else None
        row = d / "row.json"  # a file: a 240 KB row is past one argument's size limit
        row.write_text(json.dumps("hex:" + v.hex() if isinstance(v, bytes) else v))
        b.cases.append(Case(cid, "ownership-record", [*NOCAP, sys.executable,
                            str(d / "run.py"), str(d / "facts"), how, kind, str(row)],
                            timeout=120, ok_codes=(0,)))


# ----------------------------------------------------------------------------- over-tcp
_TCP_IDS = ["None", "1", "''", "'ca'", "'me'", "'nope'", "'\\ud800'", "'x' * 100", "'me\\x00'",
            "b'me'", "['me']", "'../me'"]
_TCP_CERTS = ["CERTS", "FILE", "EMPTY", "'/dev/null'", "'\\x00'", "5", "None", "FIFO"]
_TCP_ADDRS = ["{'o': ('127.0.0.1', 1)}", "{'o': ('127.0.0.1', 70000)}", "{'o': 'x'}",
              "{'o': ('h',)}", "None", "{'o': ('127.0.0.1', -1)}", "{'zz': ('127.0.0.1', 1)}",
              "{'o': ['127.0.0.1', True]}", "{'o': ('', 1)}", "{'o': (None, 1)}", "[('o', 1)]",
              "{'o': ('127.0.0.1', 1.5)}", "{1: ('127.0.0.1', 1)}", "{'o': ('a\\x00b', 1)}"]
_TCP_T = ["0.2", "-1", "float('nan')", "'1'", "0", "float('inf')"]

_TCP_RUN = r'''
import os, sys, tempfile
from icore.errors import IcoreError
from icore.net import init_team_certs
from icore.workspace import Workspace
T = tempfile.mkdtemp()
CERTS = os.path.join(T, "certs"); init_team_certs(CERTS, ["o", "me"])
FILE = os.path.join(T, "f"); open(FILE, "w").write("x")
EMPTY = os.path.join(T, "e"); os.mkdir(EMPTY)
FIFO = os.path.join(T, "fifo"); os.mkfifo(FIFO)
try:
    ws = Workspace.over_tcp({"k/*": "o"}, identity=IDENT, addresses=ADDRS, certs_dir=CERTSD,
                            timeout_s=TIMEOUT)
except IcoreError as e:
    print("TYPED", type(e).__name__, ascii(str(e)[:200])); sys.exit(1)
except (FileNotFoundError, NotADirectoryError) as e:  # documented: a certs file is missing
    print("MISSING", ascii(str(e)[:200])); sys.exit(1)
try:
    ws.put("k/1", 1)
    print("PUT")
except IcoreError as e:
    print("TYPED at put", type(e).__name__, ascii(str(e)[:200]))
finally:
    ws.close()
'''


def over_tcp(b: Builder, per_seed: int = 24) -> None:
    """``Workspace.over_tcp`` with odd arguments (sampled)."""
    combos = [(i, c, a, t) for i in _TCP_IDS for c in _TCP_CERTS for a in _TCP_ADDRS
              for t in _TCP_T]
    for i, c, a, t in sorted(b.rng.sample(combos, per_seed)):
        cid = (f"tcp10/id={ascii(i)[1:-1][:12]}/certs={ascii(c)[1:-1][:10]}/"
               f"a={ascii(a)[1:-1][:30]}/t={t}")
        b._dir(cid)
        src = (f"IDENT = {i}\nADDRS = {a}\nTIMEOUT = {t}\n" + _TCP_RUN).replace(
            "certs_dir=CERTSD", f"certs_dir={c}")
        b.cases.append(Case(cid, "over-tcp", ["PY", src], timeout=60, ok_codes=(0, 1)))


# ------------------------------------------------------------------------------- claims
_CLAIMS = ["garbage", "dbdir", "folderfile", "foreign", "deep", "lockdir", "lockfifo",
           "lockloop", "lockunread", "oddrows", "deadholder", "ro", "locked"]

_CLAIMS_DAMAGE = r'''
import json, os, shutil, sqlite3, sys
from pathlib import Path
w = Path(sys.argv[1]); how = sys.argv[2]
db = w / "claims.sqlite"
def rows(*rs):
    c = sqlite3.connect(db)
    c.executemany("insert into claims (holder, writes) values (?, ?)", rs); c.commit(); c.close()
LIVE = ("1-000000000000", json.dumps([["memo://*", True]]))
if how == "garbage":
    db.write_bytes(os.urandom(4096))
elif how == "dbdir":
    for f in w.iterdir():
        f.unlink()
    db.mkdir()
elif how == "folderfile":
    shutil.rmtree(w); w.write_text("x")
elif how == "foreign":
    db.unlink(); c = sqlite3.connect(db); c.execute("create table claims (x)"); c.commit()
elif how == "deep":
    rows(("1-000000000000", "[" * 100000 + "]" * 100000))
elif how == "lockdir":
    rows(LIVE); (w / "1-000000000000.lock").mkdir()
elif how == "lockfifo":
    rows(LIVE); os.mkfifo(w / "1-000000000000.lock")
elif how == "lockloop":
    rows(LIVE); os.symlink("1-000000000000.lock", w / "1-000000000000.lock")
elif how == "lockunread":
    rows(LIVE); p = w / "1-000000000000.lock"; p.write_text(""); p.chmod(0)
elif how == "oddrows":
    rows(("x", "5"), ("", "null"), ("1-000000000000", '[["a"]]'),
         ("1-000000000000", '"\\ud800"'), ("2-000000000000", "1" + "0" * 5000))
elif how == "deadholder":
    rows(("1-000000000000", json.dumps([["memo://price", False]])))
elif how == "ro":
    os.chmod(w, 0o555); db.chmod(0o444)
'''

_RAISED = r'''
fin10 = fin
def fin(code):
    """Round 5's end, then: no request handler of the gateway raised (a typed refusal)."""
    try:
        fin10(code)
    except SystemExit as done:
        code = done.code
    err = open(man + ".err", "rb").read().decode("utf-8", "replace")
    if "handler for 'tools/call' raised" in err:
        print("RAISED a tools/call handler raised (no refusal, nothing recorded)")
        code = code or 12
    sys.exit(code)
'''


def claims(b: Builder, per_seed: int = 6) -> None:
    """A real gateway whose shared write claims are damaged (sampled)."""
    env = {**os.environ, "PYTHONPATH": sweep._abs_pythonpath()}
    for how in sorted(b.rng.sample(_CLAIMS, min(per_seed, len(_CLAIMS)))):
        cid = f"claims10/{how}"
        d = b._dir(cid)
        (d / "keep.txt").write_text("the user's own file\n")
        man, drv = round5._fake_gateway(d, "none:none", 5)
        seed = drv.read_text()
        r = subprocess.run([sys.executable, str(drv), str(man), str(d / "trace.jsonl")],
                           cwd=d, env=env, capture_output=True, timeout=200)
        if r.returncode != 0:
            raise RuntimeError(f"round 10: the honest gateway run failed: {r.stdout[-500:]!r}")
        (d / "trace.jsonl").unlink()
        subprocess.run([sys.executable, "-c", _CLAIMS_DAMAGE, str(d / "facts" /
                        "icore-writes"), how], check=True, capture_output=True, timeout=60)
        text = seed.replace("p = subprocess.Popen([sys.executable",
                            f"p = subprocess.Popen([*{NOCAP!r}, sys.executable")
        hold = ""
        if how == "locked":  # another process holds the claims' write lock meanwhile
            hold = (f"import sqlite3 as _s\n_c = _s.connect("
                    f"{str(d / 'facts' / 'icore-writes' / 'claims.sqlite')!r}, "
                    "isolation_level=None); _c.execute('BEGIN EXCLUSIVE')\n")
        text = text.replace("reqs = [", _RAISED + hold + "reqs = [", 1)
        drv.write_text(text)
        b.cases.append(round5.driver_case(cid, "claims", d, man, drv))


# ----------------------------------------------------------------------------- progress
_TOKENS = ['"t1"', "5", "True", "1.5", '{"a": 1}', '"x" * 100000', "10 ** 5000", "None",
           '"icore-progress-1"', '""', "-1", '"\\ud800"']

_PROG = r'''
sys.set_int_max_str_digits(0)
PROG = []
def _seen(msg):
    if isinstance(msg, dict) and msg.get("method") == "notifications/progress":
        PROG.append(msg)
fin10 = fin
def fin(code):
    """Round 5's end, then: progress reached the client under its own token, or none."""
    try:
        fin10(code)
    except SystemExit as done:
        code = done.code
    valid = isinstance(TOKEN, (str, int)) and not isinstance(TOKEN, bool)
    for m in PROG:
        got = (m.get("params") or {}).get("progressToken")
        num = (m.get("params") or {}).get("progress")
        if isinstance(num, bool) or not isinstance(num, (int, float)):
            print("LEAK a progress notification with no number:", ascii(num)[:80])
            code = code or 13
        if not valid:
            print("LEAK progress relayed for a request that asked for none:", ascii(got)[:80])
            code = code or 13
        elif got != TOKEN:
            print("WRONG progress under another token:", ascii(got)[:80]); code = code or 13
    print("PROGRESS", len(PROG))
    sys.exit(code)
'''


def progress(b: Builder, per_seed: int = 10) -> None:
    """A real gateway relaying an upstream's odd progress for odd client tokens (sampled)."""
    from .fake_upstream import PROGRESS
    hows = [*PROGRESS, *(f"after-{h}" for h in ("progress-echo", "progress-flood"))]
    combos = [(h, t) for h in hows for t in _TOKENS]
    for how, tok in sorted(b.rng.sample(combos, min(per_seed, len(combos)))):
        cid = f"prog10/{how}/token={ascii(tok)[1:-1][:20]}"
        d = b._dir(cid)
        (d / "keep.txt").write_text("the user's own file\n")
        man, drv = round5._fake_gateway(d, f"tools/call:{how}", 5)
        text = drv.read_text()
        text = text.replace("reqs = [", _PROG + f"TOKEN = {tok}\nreqs = [", 1)
        text = text.replace('{"name": "set_price", "arguments": {"value": "120"}}',
                            '{"name": "set_price", "arguments": {"value": "120"}, '
                            '"_meta": {"progressToken": TOKEN}}')
        text = text.replace('{"name": "weather", "arguments": {"city": "Porto"}}',
                            '{"name": "weather", "arguments": {"city": "Porto"}, '
                            '"_meta": {"progressToken": TOKEN}}')
        text = text.replace("            if msg.get(\"id\") == rid:",
                            "            _seen(msg)\n            if msg.get(\"id\") == rid:", 1)
        assert "_seen(msg)" in text and "TOKEN}}" in text
        drv.write_text(text)
        b.cases.append(round5.driver_case(cid, "progress", d, man, drv))


# ------------------------------------------------------------------------ hostile-trace
_VALS: list[Any] = [
    None, True, 0, -1, 2**64, 1.5, "x", "", [], {}, "1", "\ud800", "\x00", {"a": 1},
    [1, [2]], _Raw("1e400"), _Raw("NaN"), _Raw("1" + "0" * 5000),
    _Raw("[" * 5000 + "]" * 5000), "x" * 100000, -(2**63) - 1, {"v": 2}, {"v": "1"}]
_HOT = ("chain", "chain_end", "run", "icore", "reissue_of", "digest", "writer", "seq")


def _paths(node: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [at] if at else []
    items = node.items() if isinstance(node, dict) else enumerate(node) \
        if isinstance(node, list) else []
    for k, v in items:
        out += _paths(v, (*at, k))
    return out


def _hostile(lines: list[Any], rng: random.Random) -> tuple[str, str]:
    """One edit of the recorded run: (name, file text)."""
    doc = copy.deepcopy(lines)
    text = [dumps(x) for x in doc]
    i = rng.randrange(len(doc))
    r = rng.random()
    if r < 0.65:
        ps = _paths(doc[i])
        hot = [p for p in ps if any(h in map(str, p) for h in _HOT)]
        p = rng.choice(hot if hot and rng.random() < 0.8 else ps)
        node = doc[i]
        for k in p[:-1]:
            node = node[k]
        v = rng.choice([*_VALS, "DROP", "REISSUE"])
        if v == "DROP":
            del node[p[-1]]
            name = f"l{i}/{'.'.join(map(str, p))}=drop"
        elif v == "REISSUE" and isinstance(node[p[-1]], dict):
            node[p[-1]]["reissue_of"] = rng.choice(_VALS)
            name = f"l{i}/{'.'.join(map(str, p))}+reissue_of"
        else:
            node[p[-1]] = None if v == "REISSUE" else v
            name = f"l{i}/{'.'.join(map(str, p))}={ascii(dumps(v))[:16]}"
        text[i] = dumps(doc[i])
    elif r < 0.75:
        k = rng.choice(list(doc[i]))
        text[i] = text[i][:-1] + ", " + json.dumps(k) + ": " + dumps(rng.choice(_VALS)) + "}"
        name = f"l{i}/dup-{k}"
    elif r < 0.9:
        pos = rng.randrange(len(text[i]))
        junk = rng.choice(["\x00", "\ud800", "\udfff", "\u2028", "\r", "\x1b[2J", "\ufeff"])
        text[i] = text[i][:pos] + junk + text[i][pos:]
        name = f"l{i}/insert-{ascii(junk)[1:-1]}@{pos}"
    else:
        n = rng.choice([100, 2000, 20000])
        text[i] = '{"x": ' * n + text[i] + "}" * n
        name = f"l{i}/nested-{n}"
    return name, "\n".join(text) + "\n"


def hostile_trace(b: Builder, work: Path, per_seed: int = 40) -> None:
    """The round-8 recorded run edited at its header and chain fields (sampled)."""
    got = round8.base_trace(work)
    if got is None:
        return
    lines = [json.loads(x) for x in got[0].read_text(encoding="utf-8").splitlines()]
    for _ in range(per_seed):
        name, text = _hostile(lines, b.rng)
        cid = f"aud10/{name}"[:120]
        if any(c.id == cid for c in b.cases):
            continue
        d = b._dir(cid)
        p = d / "r.jsonl"
        p.write_bytes(text.encode("utf-8", "surrogatepass"))
        b.cases.append(Case(cid, "hostile-trace", ["ICORE", "audit", str(p), "--no-report",
                                                   "--fail-on", "invalid"], inputs=[p],
                            timeout=120, ok_codes=(0, 1, 2, 3)))


_FAMILIES: dict[str, Any] = {
    "att10/": lambda b, w: attempts_file(b), "own10/": lambda b, w: ownership_record(b),
    "tcp10/": lambda b, w: over_tcp(b), "claims10/": lambda b, w: claims(b),
    "prog10/": lambda b, w: progress(b), "aud10/": hostile_trace}


def all_families(b: Builder, work: Path) -> None:
    """Every family of this module (in the full sweep: the sweep's one random stream)."""
    for family in _FAMILIES.values():
        family(b, work)


def main(argv: list[str] | None = None) -> int:
    """Build this round's cases alone, run them (``--jobs`` at once), print the counts."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=31337)
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--only", default="", help="case id prefixes: att10/,own10/,tcp10/,"
                    "claims10/,prog10/,aud10/")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    work = a.work or Path(tempfile.mkdtemp(prefix="icore-r10-"))
    work.mkdir(parents=True, exist_ok=True)
    sys.set_int_max_str_digits(0)
    empty = work / "none.jsonl"
    empty.write_text("")
    b = Builder(work / "cases", random.Random(a.seed), empty, empty, 0)
    prefixes = tuple(a.only.split(",")) if a.only else ("",)
    for prefix, family in _FAMILIES.items():  # each family draws from its own stream
        b.rng = random.Random(f"{a.seed}/{prefix}")
        if prefix.startswith(prefixes) or any(p.startswith(prefix) for p in prefixes):
            family(b, work)
    cases = [c for c in b.cases if c.id.startswith(prefixes)]
    print(f"{len(cases)} bad inputs under {work}", flush=True)
    t0 = time.monotonic()
    results = []
    with ThreadPoolExecutor(a.jobs) as ex:
        for r in ex.map(lambda c: sweep.run_case(c, work), cases):
            results.append(r)
            if r["verdict"] != "ok":
                print(f"{r['verdict']:6} {r['id']}: {r['cause']}", flush=True)
    sweep.report(results, time.monotonic() - t0)
    if a.json:
        a.json.write_text(json.dumps(results, indent=1))
    return 1 if any(r["verdict"] == "defect" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
