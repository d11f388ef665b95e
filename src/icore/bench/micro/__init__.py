"""Microbenchmarks of the parts (I/O layer): each prints figures, none is asserted on.

Module map:

================  ==============================================================
``_core_gate``    ``icore bench core``: gate decisions/s and store commits/s
``_contention``   contended commits: writers racing on hot keys
``_net``          ``icore bench net``: transport costs (planfence Fig. 2, Sec. 5.4)
``_backends``     ``icore bench net --backend nats``: owner memory backends
``_peers``        ``icore bench peers``: icore's owner service vs Redis, NATS, etcd
``_otel``         ``icore bench otel``: OpenTelemetry export and import
``_state``        ``icore bench state``: the iCORE state (design.md 4.4)
``_loopback``     free ports, waiting for a listener, a byte-counting relay
================  ==============================================================

The entry points are the ``icore bench ...`` commands; the modules are imported where
used.
"""
