"""Issue 29 outside the importers: run folders, manifests, certificates, NATS ids, URLs
with credentials, unbindable hosts: typed errors naming what, nothing of the user's
moved or lost."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from cryptography import x509

from icore._files import MARKER, make_room, mark_folder
from icore.errors import IcoreError, redact
from icore.live import LiveManifestError, default_manifest, manifest_from_dict

from .conftest import invoke_cli as _invoke


def test_make_room_moves_only_icores_own_folders(tmp_path: Path) -> None:
    user = tmp_path / "mine"
    user.mkdir()
    (user / "run.json").write_text("my notes")
    with pytest.raises(FileExistsError, match="not created by icore"):
        make_room(user, run_files=("run.json", "certs"))
    assert (user / "run.json").read_text() == "my notes" and not (tmp_path / "mine.1").exists()
    assert make_room(user, run_files=("certs",)) is None  # unrelated files: left alone
    own = tmp_path / "own"
    own.mkdir()
    mark_folder(own)
    assert make_room(own) == tmp_path / "own.1" and (tmp_path / "own.1" / MARKER).is_file()
    assert make_room(tmp_path / "missing") is None


def test_run_out_never_moves_a_users_folder_and_says_when_it_moves_its_own(
        tmp_path: Path) -> None:
    user = tmp_path / "results"
    (user / "certs").mkdir(parents=True)
    (user / "certs" / "keep.txt").write_text("mine")
    # a usage error before any agent starts (QA r8-bad D18: was exit 1 from the run)
    code, out = _invoke("run", "--out", str(user))
    assert code == 2 and "not created by icore" in out and str(user) in out
    assert (user / "certs" / "keep.txt").read_text() == "mine"
    assert not (tmp_path / "results.1").exists()
    run = tmp_path / "run"
    code, out = _invoke("run", "--out", str(run))
    assert code == 0, out
    assert (run / MARKER).is_file()
    code, out = _invoke("run", "--out", str(run))
    assert code == 0 and "moved the earlier run" in out and (tmp_path / "run.1").is_dir()


def test_flags_that_cannot_apply_are_usage_errors(tmp_path: Path) -> None:
    m = tmp_path / "m.yaml"
    m.write_text(json.dumps(default_manifest("reservation").model_dump(mode="json")))
    code, out = _invoke("run", str(m), "--family", "deployment", "--out", str(tmp_path / "o"))
    assert code == 2 and "--family" in out and not (tmp_path / "o").exists()
    f = tmp_path / "file.txt"
    f.write_text("x")
    code, out = _invoke("demo", "--out", str(f))
    assert code == 2 and "not a folder" in out and f.read_text() == "x"


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_nan_timeouts_are_reported_as_such(value: float) -> None:
    d = default_manifest("reservation").model_dump(mode="json")
    d["timeouts"]["step_s"] = value
    with pytest.raises(LiveManifestError) as e:
        manifest_from_dict(d)
    assert "finite" in str(e.value) and "3600" not in str(e.value)
    with pytest.raises(LiveManifestError, match="mapping"):
        manifest_from_dict([1, 2])  # type: ignore[arg-type]


def test_nats_agent_id_with_a_dot_is_typed() -> None:
    from icore.net._team.nats_server import check_nats_agent

    d = default_manifest("reservation").model_dump(mode="json")
    d["agents"][0]["id"] = "planner.1"
    d["ownership"] = {k: ("planner.1" if v == d["agents"][0]["id"].split(".")[0] else v)
                      for k, v in d["ownership"].items()}
    d["memory"] = {"backend": "nats"}
    with pytest.raises(LiveManifestError, match=r"planner\.1"):
        manifest_from_dict(d)
    with pytest.raises(IcoreError, match="subject token"):
        check_nats_agent("planner.1")


def test_long_and_non_ascii_names_fit_x509(tmp_path: Path) -> None:
    from icore.net import init_team_certs, server_context
    from icore.net._team.nats_server import user_dn
    from icore.net._team.pki import x509_name

    team = "é" * 26 + " " + "t" * 80
    d = init_team_certs(tmp_path / "certs", ["planner"], team=team)
    ca = x509.load_pem_x509_certificate((d / "ca.crt").read_bytes())
    org = ca.subject.get_attributes_for_oid(x509.NameOID.ORGANIZATION_NAME)[0].value
    assert len(str(org).encode()) <= 64 and org == x509_name(team) == x509_name(team)
    assert x509_name("a" * 200) != x509_name("a" * 201)
    assert f"O={org}," in user_dn("planner", team)
    server_context(d, "planner")


def test_certs_days_and_a_certs_dir_that_is_a_file(tmp_path: Path) -> None:
    code, out = _invoke("certs", "init", "--dir", str(tmp_path / "c"), "--agent", "a",
                        "--days", "100000000")
    assert code == 2 and "--days" in out
    f = tmp_path / "certs"
    f.write_text("x")
    from icore.net import client_context, init_team_certs

    with pytest.raises(OSError, match="is a file"):
        client_context(f, "a")
    with pytest.raises(ValueError, match="is a file"):
        init_team_certs(f, ["a"])
    with pytest.raises(ValueError, match="validity"):
        init_team_certs(tmp_path / "c2", ["a"], days=10**8)


def test_credentials_are_redacted_in_every_icore_error() -> None:
    from icore.net import OwnerUnreachable

    e = OwnerUnreachable("cannot connect to nats://bob:s3cret@h:4222",
                         servers=["tls://bob:s3cret@h:1", "nats://tok3n@h:2"])
    assert "s3cret" not in str(e) and "tok3n" not in str(e) and "nats://***@h:4222" in str(e)
    assert redact("see https://u:p@x.io/a and http://x.io") == \
        "see https://***@x.io/a and http://x.io"
    d = default_manifest("reservation").model_dump(mode="json")
    d["memory"] = {"backend": "nats", "servers": ["http://admin:hunter2@h:4222"]}
    with pytest.raises(LiveManifestError) as err:
        manifest_from_dict(d)
    assert "hunter2" not in str(err.value)


def test_an_unresolvable_host_is_named_with_its_agent(tmp_path: Path) -> None:
    from icore.memory import MemoryStore, OwnershipMap
    from icore.net import OwnerServer, TransportError, init_team_certs, server_context

    d = init_team_certs(tmp_path / "c", ["alice"])
    srv = OwnerServer(MemoryStore(OwnershipMap({"k": "alice"}), "alice"), agent="alice",
                      ssl_context=server_context(d, "alice"), host="no-such-host.invalid",
                      port=0)
    with pytest.raises(TransportError) as e:
        asyncio.run(srv.start())
    assert "alice" in str(e.value) and "no-such-host.invalid" in str(e.value)
