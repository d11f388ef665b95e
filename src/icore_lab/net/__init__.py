"""The lab's network: link models and the in-process transports on virtual time.

* a network model: :class:`Loopback`, :class:`FixedLink`, trace-driven :class:`TraceLink`
  (Mahimahi traces; planfence Sec. 6.1);
* transports under the owner-access interface of :mod:`icore.memory`, in-process on
  virtual time (:class:`VirtualTransport`, :class:`AsyncVirtualTransport`, run on a
  :class:`VirtualTimeLoop`), with a host CPU cost model (:class:`HostCost`,
  :class:`HostCpu`, :class:`TlsCost`).

A :class:`LinkPair` also shapes a real TCP connection (the ``path=`` of
:class:`icore.net.OwnerClient`). See docs/net.md.
"""

from icore_lab.net._links import (
    DEFAULT_ATT_TRACE,
    DEFAULT_BASE_DELAY_MS,
    DEFAULT_RTO_MS,
    LINK_NAMES,
    PACKET_BYTES,
    SEGMENT_HEADER_BYTES,
    SEGMENT_PAYLOAD_BYTES,
    TRACE_FILES,
    FixedLink,
    Link,
    LinkPair,
    Loopback,
    TraceLink,
    default_att_trace,
    link_by_name,
    path_by_name,
    traces_dir,
    wire_bytes,
)
from icore_lab.net._virtual import (
    DEFAULT_TLS_COST,
    AsyncVirtualTransport,
    HostCost,
    HostCpu,
    TlsCost,
    VirtualTransport,
)
from icore_lab.net._vloop import VirtualTimeLoop, run_virtual

__all__ = [
    "DEFAULT_ATT_TRACE",
    "DEFAULT_BASE_DELAY_MS",
    "DEFAULT_RTO_MS",
    "DEFAULT_TLS_COST",
    "LINK_NAMES",
    "PACKET_BYTES",
    "SEGMENT_HEADER_BYTES",
    "SEGMENT_PAYLOAD_BYTES",
    "TRACE_FILES",
    "AsyncVirtualTransport",
    "FixedLink",
    "HostCost",
    "HostCpu",
    "Link",
    "LinkPair",
    "Loopback",
    "TlsCost",
    "TraceLink",
    "VirtualTimeLoop",
    "VirtualTransport",
    "default_att_trace",
    "link_by_name",
    "path_by_name",
    "run_virtual",
    "traces_dir",
    "wire_bytes",
]
