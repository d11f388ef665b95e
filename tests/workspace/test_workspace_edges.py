"""Workspace API rough edges found by new users (#28 QA: LangGraph D6-D8, AG2 8, OpenAI
Agents 1/7/8/10, CrewAI 8): typed errors naming the fix, and readers that can never
change what an owner stored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.errors import HeadConflict, MalformedRecord
from icore.workspace import FactNotWritten, Workspace, WorkspaceError

ROOM = "room/R101"


def _ws(tmp: Path | None = None) -> Workspace:
    facts = {"room/*": "facilities", "order/42": "sales"}
    ws = Workspace.sqlite(facts, tmp) if tmp is not None else Workspace(facts)
    ws.put(ROOM, {"price": 100, "tags": ["quiet"]})
    return ws


# --- never written vs written as None ---------------------------------------------------

def test_a_fact_never_written_raises_typed_with_did_you_mean_and_default_opts_in() -> None:
    """D6: ``value``/``read`` of a never-written key raise FactNotWritten (a typo gets
    the closest written key); ``default=`` opts in; ``head`` is None; ``None`` written is
    a value."""
    ws = _ws()
    booker = ws.agent("booker")
    for read in (ws.value, booker.read):
        with pytest.raises(FactNotWritten, match="never been written") as ei:
            read("room/R10l")  # matches room/* but nobody wrote it: a typo
        assert "did you mean 'room/R101'?" in str(ei.value)
        assert isinstance(ei.value, LookupError) and isinstance(ei.value, WorkspaceError)
        with pytest.raises(FactNotWritten, match=r"ws\.put\('room/R777'"):
            read("room/R777")  # far from every written key: how to write it
        assert read("room/R777", default=None) is None
        assert read("room/R777", default={"price": 0}) == {"price": 0}
    assert ws.head("room/R777") is None
    assert booker.read_record("room/R777") is None and "room/R777" not in booker.seen()
    ws.put("room/R5", None)  # None is a value like any other
    assert ws.value("room/R5") is None and booker.read("room/R5") is None
    assert ws.head("room/R5") is not None and "room/R5" in booker.seen()


def test_update_of_a_fact_never_written_names_put_and_default_opts_in() -> None:
    """D6/CrewAI 8: ``update`` never calls ``fn(None)`` for a missing fact."""
    ws = _ws()
    called: list[Any] = []
    with pytest.raises(FactNotWritten, match="never been written") as ei:
        ws.update("room/R404", lambda o: called.append(o) or {**o, "price": 1})
    assert "ws.put('room/R404'" in str(ei.value) and called == []
    rec = ws.update("room/counter", lambda n: n + 1, default=0)
    assert rec.content == 1 and ws.update("room/counter", lambda n: n + 1).content == 2


def test_update_needs_a_function_that_returns_the_new_value() -> None:
    """D7, OpenAI 7/8: a value instead of a function, and an in-place edit that returns
    None, are typed errors naming the fix; nothing is committed."""
    ws = _ws()
    head = ws.head(ROOM)
    with pytest.raises(WorkspaceError, match="update needs a function") as ei:
        ws.update(ROOM, {"price": 3})  # type: ignore[arg-type]
    assert "ws.put('room/R101', value)" in str(ei.value)
    with pytest.raises(WorkspaceError, match="returned None") as ei:
        ws.update(ROOM, lambda r: r.update(price=2))  # the classic in-place mistake
    assert "ws.put('room/R101', None)" in str(ei.value)
    assert ws.head(ROOM) == head and ws.value(ROOM) == {"price": 100, "tags": ["quiet"]}


def test_update_function_that_takes_no_old_value_is_named() -> None:
    """QA r5-crew D6: ``lambda: {...}`` (no parameter) or two required parameters: a
    WorkspaceError naming the key, the function and the fix, not a raw TypeError from
    inside icore; nothing is committed. A default-valued extra parameter is fine."""
    ws = _ws()
    head = ws.head(ROOM)
    for fn in (lambda: {"price": 1}, lambda a, b: {"price": 1}):
        with pytest.raises(WorkspaceError, match="one argument") as ei:
            ws.update(ROOM, fn)
        assert ei.value.fields["key"] == ROOM and "lambda" in ei.value.fields["function"]
        assert "lambda old" in str(ei.value)
    assert ws.head(ROOM) == head
    assert ws.update(ROOM, lambda o, bump=1: {**o, "price": o["price"] + bump}).content[
        "price"] == 101


@pytest.mark.parametrize(("key", "words", "fix"), [
    (123, "is a str", "'123'"),
    (None, "is a str", "'order/42'"),
    ("", "non-empty", "'order/42'"),
    ("room/*", "is a pattern, not a fact", "'room/<id>'"),
    ("room/R?", "is a pattern, not a fact", "'room/R<id>'"),
])
def test_a_fact_key_is_one_fact_named_by_a_str(key: Any, words: str, fix: str) -> None:
    """D8, AG2 8, OpenAI 10, CrewAI 8: globs and non-str keys are refused everywhere one
    fact is named; the fix never invites declaring ``'None'``."""
    ws = _ws()
    booker = ws.agent("booker")
    for op in (lambda: ws.put(key, {"a": 1}), lambda: ws.value(key), lambda: ws.head(key),
               lambda: booker.read(key), lambda: ws.update(key, lambda o: o),
               lambda: ws.commit(key, 1, expected=None)):
        with pytest.raises(WorkspaceError, match=words) as ei:
            op()
        assert fix in str(ei.value) and "Workspace({'None'" not in str(ei.value)
    assert ws.written_keys() == [ROOM]


def test_depends_on_with_a_non_str_key_names_the_text_fix() -> None:
    """OpenAI 10: ``depends_on={5}`` is told keys are text, not to declare ``'5'``."""
    ws = _ws()
    with pytest.raises(WorkspaceError, match="keys are non-empty str") as ei:
        ws.check_keys({5}, where="depends_on")  # type: ignore[arg-type]
    assert "depends_on={'5'}" in str(ei.value) and "declare" not in str(ei.value)


def test_an_empty_depends_on_is_a_setup_error_with_or_without_the_calls_arguments() -> None:
    """A ``depends_on`` returning no key is the developer's mistake even when the call's
    arguments are given (only keys made of the model's text go to the model)."""
    ws = _ws()
    for args in (None, {"room": "R1"}):
        with pytest.raises(WorkspaceError, match="depends_on is empty"):
            ws.check_keys(set(), where="depends_on", args=args)
    assert ws.check_keys({"room/*"}, where="depends_on", args={"r": "*"}) == frozenset()


def test_expected_must_be_a_head_id_and_the_error_names_expected() -> None:
    """AG2 8: a bad ``expected=`` names ``expected=``, not the internal ``supersedes``."""
    ws = _ws()
    with pytest.raises(WorkspaceError, match="expected=") as ei:
        ws.commit(ROOM, {"price": 1}, expected="deadbeef")
    assert "supersedes" not in str(ei.value) and "ws.head('room/R101').id" in str(ei.value)
    with pytest.raises(MalformedRecord):
        ws.put(ROOM, {1, 2})  # type: ignore[arg-type]  # not JSON: still typed


def test_a_value_with_no_json_form_names_the_field_and_the_fix() -> None:
    """QA r4-ag2 D10: ``put`` of a value holding an ``object()`` names the field, the
    type (no "a object") and what to store instead; nothing is written."""
    ws = _ws()
    with pytest.raises(MalformedRecord, match="value of type object, which has no JSON "
                       "form") as ei:
        ws.put(ROOM, {"when": object()})  # type: ignore[dict-item]
    assert ei.value.fields["field"] == "content.when"
    assert "isoformat()" in ei.value.fields["fix"]
    assert ws.value(ROOM) == {"price": 100, "tags": ["quiet"]}


# --- overlapping owner patterns ---------------------------------------------------------

def test_an_owner_that_is_not_a_str_is_named_with_the_fix() -> None:
    """QA r6-lgmcp D6: ``Workspace({"dock/*": 5})`` names the owner's type and the fix."""
    with pytest.raises(WorkspaceError, match="an owner must be a non-empty str") as ei:
        Workspace({"dock/*": 5})  # type: ignore[dict-item]
    assert "int 5" in str(ei.value)
    assert ei.value.fields["keys"] == ["'dock/*'"]
    assert "Workspace({'dock/*': 'dispatcher'})" in ei.value.fields["fix"]
    with pytest.raises(WorkspaceError, match="fact key must be a non-empty str"):
        Workspace({"": "sales"})


def test_owner_patterns_that_tie_for_a_key_are_refused() -> None:
    """OpenAI 10: ``room/*1`` vs ``room/R*`` (same length, both match room/R1) would make
    the owner depend on declaration order: refused, either order; a more specific
    (longer) pattern, or the same owner, is fine."""
    for facts in ({"room/*1": "a", "room/R*": "b"}, {"room/R*": "b", "room/*1": "a"}):
        with pytest.raises(WorkspaceError, match="declaration order") as ei:
            Workspace(facts)
        assert set(ei.value.fields["patterns"]) == {"room/*1", "room/R*"}
    ws = Workspace({"room/*": "a", "room/R1*": "b", "stock/*": "c", "stoc?/x": "c"})
    assert ws.owner_of("room/R12") == "b" and ws.owner_of("room/A") == "a"
    Workspace({"a/[0-9]x": "a", "a/?y": "b"})  # no key matches both


# --- readers never touch what the owner stored (OpenAI 1, SAFETY) ----------------------

def _mutate(value: Any) -> None:
    if isinstance(value, dict):
        value["price"] = 99
        value.setdefault("tags", []).append("mine")
    elif isinstance(value, list):
        value.append("x")


@pytest.mark.parametrize("sqlite", [False, True])
def test_changing_what_a_reader_got_never_changes_a_head(tmp_path: Path, sqlite: bool) -> None:
    """Values from read/value/head/read_record, a written value kept by the caller, and
    the value an update fn edits in place and then fails on: none is the stored object."""
    ws = _ws(tmp_path if sqlite else None)
    booker, other = ws.agent("booker"), ws.agent("other")
    head = ws.head(ROOM)
    assert head is not None
    mine = {"price": 100, "tags": ["quiet"]}
    ws.put("room/R2", mine)
    _mutate(mine)
    for got in (booker.read(ROOM), ws.value(ROOM), head.content,
                booker.read_record(ROOM).content):  # type: ignore[union-attr]
        _mutate(got)

    def edit_then_fail(r: Any) -> Any:
        _mutate(r)
        raise RuntimeError("changed my mind")

    with pytest.raises(RuntimeError):
        ws.update(ROOM, edit_then_fail)
    for reader in (other.read, booker.read, ws.value):
        assert reader(ROOM) == {"price": 100, "tags": ["quiet"]}
    assert ws.value("room/R2") == {"price": 100, "tags": ["quiet"]}
    assert ws.head(ROOM).id == head.id  # type: ignore[union-attr]  # verified: hashes


def test_a_tool_editing_its_read_cannot_authorize_on_the_edited_value() -> None:
    """The gate authorizes on versions; the agent's edited copy is not the fact."""
    ws = _ws()
    booker = ws.agent("booker")
    room = booker.read(ROOM)
    room["price"] = 1  # type: ignore[index]
    call = booker.execute("book", lambda price: price, {"price": 1}, depends_on={ROOM})
    assert call.executed  # the version read is current: the arguments are the model's
    assert ws.value(ROOM)["price"] == 100  # type: ignore[index]
    ws.agent("auditor").read(ROOM)  # no RecordIdMismatch for other readers


@settings(max_examples=40, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda kids: st.lists(kids, max_size=3)
                    | st.dictionaries(st.text(max_size=3), kids, max_size=3), max_leaves=12))
def test_property_mutating_any_read_value_never_changes_any_head(value: Any) -> None:
    """For any JSON value: a reader's copy, changed any way, leaves the head intact."""
    ws = Workspace({"k/*": "o"})
    rec = ws.put("k/1", value)
    for got in (ws.value("k/1"), ws.agent("a").read("k/1"), ws.head("k/1").content):  # type: ignore[union-attr]
        _mutate(got)
        if isinstance(got, dict):
            got.clear()
        elif isinstance(got, list):
            got.clear()
    assert ws.value("k/1") == value and ws.head("k/1") == rec


# --- lost updates (CrewAI 2, SAFETY) ---------------------------------------------------

def test_commit_of_a_version_another_writer_already_wrote_is_a_conflict() -> None:
    """Two writers with the same base and value make the byte-identical record; the
    second must not be told it committed (its update would be lost)."""
    ws = Workspace({"c": "o"})
    base = ws.put("c", 0)
    store = ws.stores["o"]
    seq = store.next_seq("o")
    store.next_seq = lambda owner=None: seq  # type: ignore[method-assign]  # both read it
    first = ws.commit("c", 1, expected=base.id)
    with pytest.raises(HeadConflict, match="wrote this version first") as ei:
        ws.commit("c", 1, expected=base.id)
    assert ei.value.fields["current"] == first.id


# --- bad input QA (#28, badinput D4 / D12) ----------------------------------------------

@pytest.mark.parametrize("owner", ["../../escape", "x/y", "..", ".hidden", "", "a" * 64])
def test_sqlite_refuses_owner_names_that_are_not_safe_file_names(tmp_path: Path,
                                                                 owner: str) -> None:
    """An owner's name is its database file's name: ``../x`` would write outside."""
    folder = tmp_path / "ws"
    with pytest.raises(WorkspaceError) as ei:
        Workspace.sqlite({"a/*": owner}, folder)
    assert "[A-Za-z0-9._-]" in str(ei.value) or "non-empty" in str(ei.value)
    assert sorted(p.name for p in tmp_path.rglob("*.db")) == []
    with Workspace.sqlite({"a/*": "sales-eu.1"}, folder) as ok:
        ok.put("a/1", 1)
    assert (folder / "sales-eu.1.db").exists()


@pytest.mark.parametrize("folder", [None, "", 3])
def test_sqlite_names_the_folder_argument_when_it_is_not_a_path(folder: Any) -> None:
    """``Workspace.sqlite(facts, None)``: a ``WorkspaceError`` naming the argument and the
    fix, not pathlib's raw ``TypeError`` (QA r4-oa D8)."""
    with pytest.raises(WorkspaceError, match="folder of the owners' SQLite files") as ei:
        Workspace.sqlite({"a/*": "sales"}, folder)
    assert ei.value.fields["argument"] == "directory" and "fix" in ei.value.fields


@pytest.mark.parametrize("owner", ["../x", "../../escape", "x/y", "..", ".hidden", "-x",
                                   "a b", "a" * 64])
def test_every_store_holds_owner_names_to_the_sqlite_rule(tmp_path: Path,
                                                          owner: str) -> None:
    """One names rule for every store: a name SQLite refuses (it names the owner's
    file) is refused in memory too, when the workspace is made, naming the owner."""
    from icore.memory import MemoryStore, OwnershipMap

    om = OwnershipMap.from_mapping({"a/*": owner})
    for make in (lambda: Workspace({"a/*": owner}), lambda: Workspace.in_memory(om),
                 lambda: Workspace(om, stores={owner: MemoryStore(om, owner)}),
                 lambda: Workspace.sqlite(om, tmp_path / "ws")):
        with pytest.raises(WorkspaceError, match=r"\[A-Za-z0-9._-\]") as ei:
            make()
        assert ei.value.fields["owners"] == [owner]
    assert not list(tmp_path.rglob("*.db"))


@pytest.mark.parametrize("owner", ["sales", "sales-eu.1", "_notes", "A9"])
def test_a_safe_owner_name_works_in_memory_and_in_sqlite(tmp_path: Path,
                                                         owner: str) -> None:
    for ws in (Workspace({"a/*": owner}), Workspace.sqlite({"a/*": owner}, tmp_path)):
        with ws:
            ws.put("a/1", 1)
            assert ws.value("a/1") == 1
    assert (tmp_path / f"{owner}.db").exists()


@pytest.mark.parametrize(("kw", "words"), [
    ({"action": ""}, "action is the tool's name"),
    ({"action": 5}, "action is the tool's name"),
    ({"fn": None}, "fn is the tool function"),
    ({"args": ["R1"]}, "mapping of names"),
    ({"args": None}, "mapping of names"),
    ({"args": {1: "R1"}}, "mapping of names"),
    ({"turn": [1]}, "hashable"),
    ({"replan": "yes"}, "replan= must be a function"),
    ({"args": {"room": "R1", "x": 1}}, "do not fit the tool function's parameters"),
    ({"args": {}}, "do not fit the tool function's parameters"),
])
def test_execute_refuses_wrong_inputs_before_the_gate(kw: dict[str, Any], words: str) -> None:
    """badinput D12: typed errors, nothing asked or run (fn=None used to fail after the
    gate authorized the call)."""
    ws = _ws()
    booker = ws.agent("booker")
    booker.read(ROOM)
    ran: list[str] = []

    def book(room: str) -> str:
        ran.append(room)
        return room

    call: dict[str, Any] = {"action": "book", "fn": book, "args": {"room": "R1"},
                            "depends_on": {ROOM}, **kw}
    n = len(booker.log)
    with pytest.raises(WorkspaceError, match=words):
        booker.execute(call.pop("action"), call.pop("fn"), call.pop("args"), **call)
    assert ran == [] and len(booker.log) == n
    assert booker.execute("book", lambda **kw: kw, {"room": "R1"},
                          depends_on={ROOM}).executed  # explicit args: **kw is fine


def test_a_huge_fresh_value_is_cut_in_the_models_message() -> None:
    """A refusal hands over a 300 KB fact: the model-facing message stays under ~8k
    characters and says how to get the rest; the agent's read is the whole value."""
    from icore.workspace import Workspace
    from icore.workspace._call import MAX_HANDOVER_CHARS

    ws = Workspace({"room/R1": "facilities"})
    ws.put("room/R1", {"price": 100, "notes": "x" * 300_000})
    agent = ws.agent("booker")
    agent.read("room/R1")
    ws.update("room/R1", lambda v: {**(v or {}), "price": 120})
    call = agent.execute("book", lambda price: price, {"price": 100},
                         depends_on={"room/R1"})
    assert not call.executed and call.reason == "stale"
    assert len(call.message) < MAX_HANDOVER_CHARS + 400
    assert "more characters; read room/R1 again" in call.message
    assert call.fresh["room/R1"]["notes"] == "x" * 300_000  # type: ignore[index]
    assert ws.value("room/R1")["price"] == 120  # type: ignore[index]


def test_a_value_over_the_record_limit_is_said_too_large_not_no_json() -> None:
    """QA qa-new9b S2: a JSON value over 4 MiB is "too large" with its size and the
    limit as fields, never "no JSON value"."""
    from icore.records import MAX_CONTENT_BYTES
    ws = _ws()
    cur = ws.head(ROOM)
    assert cur is not None
    with pytest.raises(MalformedRecord) as err:
        ws.commit(ROOM, "x" * MAX_CONTENT_BYTES, expected=cur.id)
    assert err.value.message.startswith("the value is too large: content is ")
    assert err.value.fields["size"] == MAX_CONTENT_BYTES + 2  # the JSON string's quotes
    assert err.value.fields["limit"] == MAX_CONTENT_BYTES
    assert "no JSON value" not in err.value.message


@pytest.mark.parametrize("below", ["", "sub"])
def test_sqlite_on_a_file_is_a_workspace_error_naming_it(tmp_path: Path, below: str) -> None:
    """QA qa-new13a S4: ``Workspace.sqlite(facts, "afile")`` with ``afile`` a regular
    file raised ``StoreError ... [Errno 17] File exists ... (path='afile/p.db')``; now a
    typed ``WorkspaceError`` saying the folder is a file (also for a folder under it)."""
    afile = tmp_path / "afile"
    afile.write_text("x", encoding="utf-8")
    with pytest.raises(WorkspaceError, match="afile' is a file, not a folder") as err:
        Workspace.sqlite({"p/*": "p"}, afile / below if below else afile)
    assert err.value.fields["directory"].endswith("afile" + ("/sub" if below else ""))
    assert afile.read_text(encoding="utf-8") == "x"
