"""Start Arize Phoenix with its OTLP/gRPC port bound to 127.0.0.1 (test helper).

Phoenix binds its HTTP server (UI, REST API, OTLP/HTTP at /v1/traces) to PHOENIX_HOST,
but its OTLP/gRPC server to every interface; the house rule is loopback only, so this
launcher, run with the Phoenix venv's Python, rewrites that one bind address and then
starts ``phoenix serve`` unchanged.
"""

import sys

from grpc.aio import _server

_add = _server.Server.add_insecure_port


def _loopback(self: _server.Server, address: str) -> int:
    return _add(self, address.replace("[::]", "127.0.0.1"))


_server.Server.add_insecure_port = _loopback  # type: ignore[method-assign]

from phoenix.server.main import main  # noqa: E402

sys.argv = ["phoenix", "serve"]
sys.exit(main())
