"""The real owner transport: asyncio TCP with mutual TLS 1.3 (re-exported by ``icore.net``).

``channel`` (the TLS channel, the traffic shaper and its :class:`PathModel`), ``client``
(``OwnerClient``), ``server`` (``OwnerServer``, ``GroupCommitter``), ``sync`` (the thread
wrappers). Server and client do not import each other; ``sync`` imports both.
"""
