"""The gateway manifest: validated with pydantic; errors typed, naming field and line."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from icore.cli import app
from icore.mcp import GatewayManifestError, load_manifest, manifest_from_dict


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "m.yaml"
    p.write_text(text, encoding="utf-8")
    return p


def test_valid_manifest_resolves_paths(tmp_path: Path) -> None:
    p = _write(tmp_path, """
upstreams:
  a: {command: python, args: [s.py]}
  b: {url: "http://127.0.0.1:9/mcp", timeout_s: 2}
store: {backend: sqlite, path: facts}
tools:
  book: {depends_on: ["memo://price", "fact://plan/{trip}"]}
trace: t.jsonl
""")
    m = load_manifest(p)
    assert m.upstreams["a"].transport == "stdio" and m.upstreams["b"].transport == "http"
    assert m.resolve(m.store.path or "") == tmp_path.resolve() / "facts"
    assert m.tools["book"].placeholders() == {"trip"}


@pytest.mark.parametrize(("text", "path", "line"), [
    ("upstreams:\n  a: {command: python}\ntools:\n  book:\n    depends_on: []\n",
     "tools.book.depends_on", 5),
    ("upstreams:\n  a: {command: python, url: 'http://x/mcp'}\n", "upstreams.a", 2),
    ("upstreams:\n  a:\n    url: ftp://x\n", "upstreams.a", 2),
    ("upstreams: {}\n", "upstreams", 1),
    ("upstreams:\n  a: {command: python}\nstore: {backend: sqlite}\n", "store", 3),
    ("upstreams:\n  a: {command: python}\nfacts:\n  owners: {'plan/x': p}\n",
     "facts.owners", 4),
    ("upstreams:\n  a: {command: python}\nbogus: 1\n", "bogus", 3),
    ("upstreams:\n  a: {command: python}\nstore:\n  backend: owner-service\n", "store", 3),
    ("upstreams:\n  a: {command: python}\nstore: {backend: owner-service, identity: g,"
     " certs_dir: c, addresses: {s: 'nohost'}}\n", "store", 3),
    ("upstreams:\n  a: {command: python, timeout_s: -1}\n", "upstreams.a.timeout_s", 2),
    ("upstreams:\n  a: {command: python}\nstore: {backend: nats, certs_dir: c}\n", "store", 3),
    ("upstreams:\n  a: {command: python}\nstore: {backend: nats, certs_dir: c,"
     " servers: ['http://x:4222']}\n", "store", 3),
    ("upstreams:\n  a: {command: python}\nstore: {servers: ['tls://x:4222']}\n", "store", 3),
    ("upstreams:\n  a: {command: python}\nstore: {backend: owner-service, identity: g,"
     " certs_dir: c, addresses: {s: 'h:1'}, serve: {s: 'h:2'}}\n", "store", 3),
    ("upstreams:\n  a: {command: python}\nstore: {backend: owner-service, identity: g,"
     " certs_dir: c, serve: {s: 'h:x'}}\n", "store", 3),
    ("upstreams:\n  a.b: {command: python}\nstore: {backend: nats, certs_dir: c,"
     " servers: ['tls://x:4222']}\n", "<root>", 1),
])
def test_manifest_errors_name_field_and_line(tmp_path: Path, text: str, path: str,
                                             line: int) -> None:
    with pytest.raises(GatewayManifestError) as ei:
        load_manifest(_write(tmp_path, text))
    err = ei.value
    assert isinstance(err, ValueError)
    assert err.fields["path"] == path and err.fields["line"] == line, err
    assert f"line {line}" in str(err) and str(tmp_path) in str(err)


def test_bad_yaml_names_line(tmp_path: Path) -> None:
    with pytest.raises(GatewayManifestError, match="line 3") as ei:
        load_manifest(_write(tmp_path, "name: x\nupstreams:\n  a: {command: python}}\n"))
    assert ei.value.fields["line"] == 3


def test_not_a_mapping_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(GatewayManifestError, match="mapping"):
        load_manifest(_write(tmp_path, "- a\n"))
    with pytest.raises(GatewayManifestError, match="not a readable"):
        load_manifest(tmp_path / "nope.yaml")
    with pytest.raises(GatewayManifestError, match="upstreams"):
        manifest_from_dict({})


def test_cli_manifest_error_exit_2(tmp_path: Path) -> None:
    p = _write(tmp_path, "upstreams:\n  a: {command: python}\ntools: {book: {}}\n")
    res = CliRunner().invoke(app, ["mcp", str(p)])
    assert res.exit_code == 2
    assert "line 3" in res.output and "tools.book.depends_on" in res.output


@pytest.mark.parametrize("arg", ["", "  "])
def test_cli_empty_manifest_path_is_a_usage_error(arg: str) -> None:
    """An unset shell variable (``icore mcp "$M"``) is not the current folder."""
    res = CliRunner().invoke(app, ["mcp", arg])
    assert res.exit_code == 2, res.output
    assert "'manifest'" in res.output and "empty path" in res.output, res.output
    assert "directory" not in res.output


def test_cli_bad_http_address(tmp_path: Path) -> None:
    p = _write(tmp_path, "upstreams:\n  a: {command: python}\n")
    res = CliRunner().invoke(app, ["mcp", str(p), "--http", "nope"])
    assert res.exit_code == 2 and "HOST:PORT" in res.output


def test_cli_bad_event_loop_choice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ICORE_EVENT_LOOP (uvloop by default when installed) is checked before any start."""
    p = _write(tmp_path, "upstreams:\n  a: {command: python}\n")
    monkeypatch.setenv("ICORE_EVENT_LOOP", "tokio")
    res = CliRunner().invoke(app, ["mcp", str(p)])
    assert res.exit_code == 2 and "ICORE_EVENT_LOOP" in res.output, res.output


def test_http_parser_is_httptools_when_installed() -> None:
    from icore.mcp._transport import _http_parser
    try:
        import httptools  # noqa: F401
    except ImportError:
        assert _http_parser() == "h11"
    else:
        assert _http_parser() == "httptools"


def test_help_lists_mcp() -> None:
    res = CliRunner().invoke(app, ["--help"])
    assert res.exit_code == 0 and " mcp " in res.output
    res = CliRunner().invoke(app, ["bench", "--help"])
    assert " mcp " in res.output


def test_store_backends_parse(tmp_path: Path) -> None:
    m = load_manifest(_write(tmp_path, "upstreams:\n  a: {command: python}\nstore:\n"
                             "  backend: owner-service\n  identity: gw\n  certs_dir: c\n"
                             "  addresses: {sales: '[::1]:7001'}\n"
                             "  serve: {a: '127.0.0.1:0'}\n"))
    assert m.store.endpoints() == {"sales": ("::1", 7001)}
    assert m.store.served() == {"a": ("127.0.0.1", 0)}
    m = load_manifest(_write(tmp_path, "upstreams:\n  a: {command: python}\nstore:\n"
                             "  {backend: nats, certs_dir: c, servers: ['tls://h:4222'],"
                             " prefix: team1}\n"))
    assert m.store.servers == ("tls://h:4222",) and m.store.prefix == "team1"
    with pytest.raises(GatewayManifestError, match="subject token"):
        load_manifest(_write(tmp_path, "upstreams:\n  a: {command: python}\nowners:\n"
                             "  {'memo://*': my.owner}\nstore: {backend: nats, certs_dir:"
                             " c, servers: ['nats://h:4222']}\n"))


def test_duplicate_keys_refused_naming_both_lines(tmp_path: Path) -> None:
    """YAML keeps the last of two equal keys: a second ``reserve:`` would silently drop
    the first D(a). Refused, at any depth, naming both lines."""
    p = _write(tmp_path, "upstreams:\n  a: {command: python}\ntools:\n"
                         "  reserve: {depends_on: ['rooms://{hotel}/rate']}\n"
                         "  cancel: {depends_on: ['x://y']}\n"
                         "  reserve: {depends_on: ['policy://checkin']}\n")
    with pytest.raises(GatewayManifestError, match="duplicate key") as ei:
        load_manifest(p)
    f = ei.value.fields
    assert f["path"] == "tools.reserve" and f["lines"] == [4, 6] and f["line"] == 6
    assert "first at line 4, again at line 6" in str(ei.value) and str(p) in str(ei.value)
    with pytest.raises(GatewayManifestError, match=r"upstreams\.a\.env\.K"):
        load_manifest(_write(tmp_path, "upstreams:\n  a:\n    command: python\n"
                                       "    env: {K: '1', K: '2'}\n"))
    res = CliRunner().invoke(app, ["mcp", str(p)])
    assert res.exit_code == 2 and "duplicate key" in res.output


def test_alias_bomb_is_refused_in_linear_time(tmp_path: Path) -> None:
    """Aliases reuse one node: the duplicate-key walk visits it once (9**8 paths else)."""
    levels = ["x: &l0 [" + ",".join(['"x"'] * 9) + "]"]
    levels += [f"x{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 9)]
    p = _write(tmp_path, "\n".join(levels) + "\nupstreams:\n  a: {command: python}\n")
    with pytest.raises(GatewayManifestError, match="unknown key"):
        load_manifest(p)  # the pytest timeout fails the exponential walk


def test_string_for_a_list_says_list(tmp_path: Path) -> None:
    with pytest.raises(GatewayManifestError) as ei:
        load_manifest(_write(tmp_path, "upstreams:\n  a: {command: python}\ntools:\n"
                                       "  book: {depends_on: 'memo://price'}\n"))
    msg = str(ei.value)
    assert "must be a list" in msg and "write ['memo://price']" in msg and "tuple" not in msg
    assert ei.value.fields["line"] == 4


def test_nats_without_the_extra_is_one_line_exit_2(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "nats" else real(name, *a))
    p = _write(tmp_path, "upstreams:\n  a: {command: python}\nstore:\n  backend: nats\n"
                         "  servers: ['tls://127.0.0.1:1']\n  certs_dir: c\n")
    res = CliRunner().invoke(app, ["mcp", str(p)])
    assert res.exit_code == 2, res.output
    assert "pip install 'icore[nats]'" in res.output and "store.backend" in res.output
    assert "line 4" in res.output and "Traceback" not in res.output


def test_http_clients(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import hashlib

    import anyio

    from icore.mcp import token_verifier
    digest = hashlib.sha256(b"b-token").hexdigest()
    m = load_manifest(_write(tmp_path, "upstreams:\n  a: {command: python}\nhttp:\n"
                                       "  clients:\n    alice: {token_env: T_ALICE}\n"
                                       f"    bob: {{token_sha256: {digest}}}\n"))
    with pytest.raises(GatewayManifestError, match="T_ALICE") as ei:
        token_verifier(m)
    assert ei.value.fields["line"] == 5
    monkeypatch.setenv("T_ALICE", "a-token")
    v = token_verifier(m)
    assert v is not None
    got = [anyio.run(v.verify_token, t) for t in ("a-token", "b-token", "nope")]
    assert [g.client_id if g else None for g in got] == ["alice", "bob", None]
    for bad in ("{token_env: A, token_sha256: " + digest + "}", "{}", "{token_sha256: ab}",
                "{token_env: 'no such'}"):
        with pytest.raises(GatewayManifestError, match=r"http\.clients\.x"):
            load_manifest(_write(tmp_path, "upstreams:\n  a: {command: python}\nhttp:\n"
                                           f"  clients:\n    x: {bad}\n"))


@pytest.mark.parametrize("kind", ["folder", "manifest", "user_file", "fifo", "link"])
def test_trace_path_never_moves_what_the_gateway_did_not_write(tmp_path: Path,
                                                               kind: str) -> None:
    """A ``trace:`` naming a folder, the manifest, a user's file, a FIFO or a link is a
    manifest error naming ``trace``; the entry is left exactly as it was."""
    import os

    from icore.mcp import Gateway
    target = {"folder": tmp_path / "proj", "manifest": tmp_path / "m.yaml",
              "user_file": tmp_path / "notes_server.py", "fifo": tmp_path / "pipe",
              "link": tmp_path / "t.jsonl"}[kind]
    if kind == "folder":
        target.mkdir()
    elif kind == "user_file":
        target.write_text("print('mine')\n", encoding="utf-8")
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "link":
        (tmp_path / "elsewhere.txt").write_text("x", encoding="utf-8")
        target.symlink_to(tmp_path / "elsewhere.txt")
    p = _write(tmp_path, f"upstreams:\n  a: {{command: python}}\ntrace: {target.name}\n")
    before = sorted(x.name for x in tmp_path.iterdir())
    with pytest.raises(GatewayManifestError) as ei:
        Gateway(load_manifest(p))
    assert ei.value.fields["path"] == "trace" and ei.value.fields["line"] == 3
    after = sorted(x.name for x in tmp_path.iterdir() if not x.name.startswith("."))
    assert after == [x for x in before if not x.startswith(".")]
    if kind == "user_file":
        assert target.read_text(encoding="utf-8") == "print('mine')\n"


@pytest.mark.parametrize(("text", "path", "words"), [
    ("upstreams:\n  a: {command: python}\nstore: {backend: sqlite, path: f}\n"
     "owners: {'memo://*': '../../../tmp/escape'}\n", "owners", "no '/'"),
    ("upstreams:\n  a: {command: python}\nfacts:\n  owners: {'fact://p/*': '..'}\n",
     "facts.owners", "no leading '.'"),
    ("upstreams:\n  a: {command: python}\nfacts:\n  owners: {'fact://p/*': p}\n"
     "  initial: {'fact://p/d': 2026-05-01}\n", "facts.initial", "must be JSON"),
    ("upstreams:\n  a: {command: python}\nfacts:\n  owners: {'fact://p/*': p}\n"
     "  initial: {'fact://p/n': .nan}\n", "facts.initial", "must be JSON"),
    ("upstreams:\n  a: {command: python}\nfacts:\n  owners: {'fact://p/*': p}\n"
     "  initial: {'fact://p/big': '" + "x" * (4 * 1024 * 1024) + "'}\n", "facts.initial",
     "more than a record holds"),
    ("upstreams:\n  a: {command: python, timeout_s: .nan}\n", "upstreams.a.timeout_s",
     "finite number"),
    ("upstreams:\n  a: {command: python, trust_updates: 'yes'}\n",
     "upstreams.a.trust_updates", "valid boolean"),
    ("upstreams:\n  a:\n    command: python\n    trust_updates: 1\n",
     "upstreams.a.trust_updates", "valid boolean"),
])
def test_bad_values_named(tmp_path: Path, text: str, path: str, words: str) -> None:
    with pytest.raises(GatewayManifestError) as ei:
        load_manifest(_write(tmp_path, text))
    assert ei.value.fields["path"] == path and words in str(ei.value), ei.value
    assert ei.value.fields["line"] is not None and str(tmp_path) in str(ei.value)


def test_cli_http_host_that_cannot_be_bound(tmp_path: Path) -> None:
    p = _write(tmp_path, "upstreams:\n  a: {command: python}\n")
    res = CliRunner().invoke(app, ["mcp", str(p), "--http", "999.1.1.1:8808"])
    assert res.exit_code == 2 and "--http" in res.output and "Traceback" not in res.output


def test_cli_http_port_in_use_is_one_line_before_any_upstream(tmp_path: Path) -> None:
    """Sweep seed 7 (by hand): a port in use ended in uvicorn's SystemExit(3) inside a
    task group, a BaseExceptionGroup traceback, after the upstreams had started."""
    import socket

    p = _write(tmp_path, "upstreams:\n  a: {command: /nonexistent/never-started}\n")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        res = CliRunner().invoke(app, ["mcp", str(p), "--http", f"127.0.0.1:{port}"])
    assert res.exit_code == 1, res.output
    assert f"cannot listen on 127.0.0.1:{port}" in res.output, res.output
    assert "never-started" not in res.output and "Traceback" not in res.output


_LISTS = {  # every list-valued option, given one string (QA r7 D4), and its line
    "upstreams.a.args": ("upstreams:\n  a:\n    command: python\n    args: server.py\n", 4),
    "tools.book.depends_on": ("upstreams:\n  a: {command: python}\ntools:\n  book:\n"
                              "    depends_on: memo://price\n", 5),
    "tools.book.writes": ("upstreams:\n  a: {command: python}\ntools:\n  book:\n"
                          "    depends_on: [memo://price]\n    writes: memo://price\n", 6),
    "facts.stdio_speaks_for": ("upstreams:\n  a: {command: python}\nfacts:\n"
                               "  owners: {'fact://p/*': pharmacist}\n"
                               "  stdio_speaks_for: pharmacist\n", 5),
    "facts.writers.pharmacist": ("upstreams:\n  a: {command: python}\nfacts:\n"
                                 "  owners: {'fact://p/*': pharmacist}\n"
                                 "  writers:\n    pharmacist: nurse\n", 6),
    "store.servers": ("upstreams:\n  a: {command: python}\nstore:\n  backend: nats\n"
                      "  servers: tls://127.0.0.1:4222\n", 5),
}


@pytest.mark.parametrize("field", sorted(_LISTS))
def test_every_list_option_refuses_a_string(tmp_path: Path, field: str) -> None:
    """A string where a list is expected is refused, never taken as a one-item list."""
    text, line = _LISTS[field]
    with pytest.raises(GatewayManifestError) as ei:
        load_manifest(_write(tmp_path, text))
    msg = str(ei.value)
    assert "must be a list" in msg and f"line {line}" in msg and field in msg, msg
    assert ei.value.fields["line"] == line and ei.value.fields["path"] == field


@pytest.mark.parametrize(("tool", "part", "i"), [
    ({"depends_on": ["memo://{cty}"]}, "depends_on", 0),
    ({"depends_on": ["memo://{city}"], "writes": ["memo://a", "memo://{cty}"]}, "writes", 1),
])
def test_a_placeholder_no_argument_names_is_refused_in_depends_on_and_writes(
        tool: dict[str, list[str]], part: str, i: int) -> None:
    from icore.mcp._gateway_checks import check_placeholders
    m = manifest_from_dict({"upstreams": {"a": {"command": "python"}},
                            "tools": {"book": tool}})
    check_placeholders(m, {"book": None})  # no schema listed: nothing to check against
    with pytest.raises(GatewayManifestError) as ei:
        check_placeholders(m, {"book": {"properties": {"city": {"type": "string"}}}})
    said = str(ei.value)
    assert "placeholder {cty} in 'memo://{cty}' is not an argument of book" in said, said
    assert "did you mean 'city'" in said.lower() or "'city'" in said, said
    assert ei.value.fields["path"] == f"tools.book.{part}.{i}"


@pytest.mark.parametrize(("text", "path", "says"), [
    ("upstreams:\n  a: {command: python}\ntools: {book: }\n", "tools.book",
     "must be a mapping such as {depends_on: ...} (required: depends_on; optional: "),
    ("upstreams:\n  a: {command: python}\ntools: {book: 5}\n", "tools.book", "not an int"),
    ("upstreams:\n  a:\n", "upstreams.a", "must be a mapping such as {command: ...}"),
])
def test_an_entry_that_is_no_mapping_names_its_fields_not_a_class(
        tmp_path: Path, text: str, path: str, says: str) -> None:
    """QA qa-new17a #5: ``tools: {book_room: }`` said "instance of ToolSpec"."""
    with pytest.raises(GatewayManifestError) as ei:
        load_manifest(_write(tmp_path, text))
    assert ei.value.fields["path"] == path and says in str(ei.value), ei.value
    assert "Spec" not in str(ei.value) and "instance of" not in str(ei.value)
