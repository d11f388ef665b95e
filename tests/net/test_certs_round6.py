"""Issue 29, sixth sweep round: ``icore certs init`` never leaves a broken certs folder.

Three causes: ``--force`` for one agent made a new CA and left every other agent's
certificate signed by the CA it replaced (unverifiable, silently); an agent named ``ca``
wrote its certificate and key over the team CA's ``ca.crt``/``ca.key``; two
``certs init`` at once on one folder each made a CA, and one agent's certificate was
signed by the CA the other process then wrote over.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cryptography import x509

from icore.errors import TeamManifestError
from icore.net import init_team_certs


def _signed_by_ca(folder: Path) -> dict[str, bool]:
    ca = x509.load_pem_x509_certificate((folder / "ca.crt").read_bytes())
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    out = {}
    for crt in sorted(folder.glob("*.crt")):
        if crt.name == "ca.crt":
            continue
        cert = x509.load_pem_x509_certificate(crt.read_bytes())
        try:
            cert.verify_directly_issued_by(ca)
            out[crt.stem] = True
        except Exception:
            out[crt.stem] = False
    return out


def test_force_for_one_agent_reissues_the_others(tmp_path: Path) -> None:
    c = tmp_path / "c"
    init_team_certs(c, ["a", "b"])
    old_ca = (c / "ca.crt").read_bytes()
    init_team_certs(c, ["b"], overwrite=True)
    assert (c / "ca.crt").read_bytes() != old_ca
    assert _signed_by_ca(c) == {"a": True, "b": True}
    assert not list(c.glob(".*.tmp"))


@pytest.mark.parametrize("agent", ["ca", "CA", "Ca"])
def test_an_agent_named_ca_is_refused(tmp_path: Path, agent: str) -> None:
    c = tmp_path / "c"
    init_team_certs(c, ["a"])
    before = {p.name: p.read_bytes() for p in c.iterdir()}
    with pytest.raises(TeamManifestError, match="team CA"):
        init_team_certs(c, [agent], overwrite=True)
    r = subprocess.run([sys.executable, "-m", "icore", "certs", "init", "--dir", str(c),
                        "--agent", agent, "--force"], capture_output=True, text=True,
                       timeout=120, check=False)
    assert r.returncode == 2 and agent in r.stderr and "ca.crt" in r.stderr
    assert "Traceback" not in r.stderr
    assert {p.name: p.read_bytes() for p in c.iterdir()} == before


def test_two_inits_at_once_leave_one_consistent_folder(tmp_path: Path) -> None:
    c = tmp_path / "c"
    code = ("import sys\nfrom icore.net import init_team_certs\n"
            "init_team_certs(sys.argv[1], [sys.argv[2]], overwrite=sys.argv[3] == '1')\n")
    for force in ("0", "1"):
        procs = [subprocess.Popen([sys.executable, "-c", code, str(c), a, force])
                 for a in ("a", "b", "d")]
        assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
        assert _signed_by_ca(c) == {"a": True, "b": True, "d": True}


def test_force_leaves_a_pair_another_ca_signed_alone(tmp_path: Path) -> None:
    other, c = tmp_path / "other", tmp_path / "c"
    init_team_certs(other, ["x"])
    init_team_certs(c, ["a"])
    for ext in (".crt", ".key"):
        (c / f"x{ext}").write_bytes((other / f"x{ext}").read_bytes())
    mine = (c / "x.crt").read_bytes()
    init_team_certs(c, ["b"], overwrite=True)
    assert (c / "x.crt").read_bytes() == mine  # not ours to replace
    assert _signed_by_ca(c) == {"a": True, "b": True, "x": False}
