"""A team around the owner services: manifest, PKI, launcher, NATS engine (``icore.net``).

``manifest`` (``TeamManifest``), ``pki`` (``init_team_certs``; the reading half is
``icore._tls``), ``launch`` (``TeamProcesses``, ``serve_agent``; ``python -m
icore.net._team``), ``nats_server`` (dev NATS servers) and ``engine`` (``TeamEngine``).
"""
