"""A simulated CUDA device: the allocator's backend on machines without a GPU.

It keeps real bookkeeping — live address ranges, a capacity, per-stream queues of work —
and a virtual clock, so that allocator logic can be tested and its benefit measured
anywhere. Time is modelled, never slept:

- the host clock advances by :meth:`SimulatedDevice.advance` (host work) and by the cost of
  each API call; :meth:`SimulatedDevice.launch` queues ``seconds`` of device work on a stream,
  which runs after the stream's earlier work and not before the launch;
- an event completes once the host clock reaches the end of the work queued before it;
- ``cudaMalloc`` costs ``malloc_cost`` seconds; ``cudaFree`` first waits for *all* streams
  to drain (as the real call may) and then costs ``free_cost``. This device-wide stall is
  what the caching allocator exists to avoid (section 5.3 of the PyTorch paper).
"""

from __future__ import annotations

import bisect
import ctypes
import dataclasses
import threading

from ._backend import Backend, DeviceOutOfMemory

__all__ = ["SimEvent", "SimStream", "SimulatedDevice"]

_GiB = 1 << 30
# cudaMalloc returns addresses aligned to at least 256 bytes; real drivers hand out 2 MiB
# granules, which also keeps simulated segments from touching by accident.
_ALIGNMENT = 2 << 20
_BASE_ADDRESS = 0x7F00_0000_0000


@dataclasses.dataclass(frozen=True)
class SimStream:
    """A stream of a :class:`SimulatedDevice`, identified by ``id`` (0 is the default)."""

    id: int


@dataclasses.dataclass(frozen=True)
class SimEvent:
    """A recorded event: done once the device's host clock reaches ``time`` (seconds)."""

    stream: int
    time: float


class SimulatedDevice(Backend):
    """A device with ``capacity`` bytes, modelled streams, events and API costs.

    Args:
        capacity: Device memory in bytes.
        malloc_cost: Host seconds one raw ``malloc`` takes.
        free_cost: Host seconds one raw ``free`` takes after its device-wide synchronisation.
        device: The device index reported in statistics.

    Counters (read them freely): ``num_mallocs``, ``num_frees``, ``num_syncs``;
    ``clock`` is the host's virtual time in seconds and ``stall_time`` the part of it spent
    waiting for the device.
    """

    def __init__(
        self,
        capacity: int = 16 * _GiB,
        *,
        malloc_cost: float = 50e-6,
        free_cost: float = 20e-6,
        device: int = 0,
    ) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity <= 0:
            raise ValueError(f"capacity: expected a positive int of bytes, got {capacity!r}")
        self.capacity = capacity
        self.malloc_cost = float(malloc_cost)
        self.free_cost = float(free_cost)
        self.device = device
        self.clock = 0.0
        self.stall_time = 0.0
        self.num_mallocs = 0
        self.num_frees = 0
        self.num_syncs = 0
        self._lock = threading.Lock()
        self._used = 0
        self._live: dict[int, int] = {}  # address -> size of each raw allocation
        # Sorted disjoint free address ranges (start, end); the space past the last range
        # is untouched.
        self._holes: list[tuple[int, int]] = []
        self._top = _BASE_ADDRESS
        self._busy_until: dict[int, float] = {0: 0.0}
        self._next_stream = 1
        self._host: dict[int, ctypes.Array] = {}

    # -- streams and time ---------------------------------------------------------------

    def new_stream(self) -> SimStream:
        """Create a new stream."""
        with self._lock:
            stream = SimStream(self._next_stream)
            self._next_stream += 1
            self._busy_until[stream.id] = self.clock
            return stream

    def default_stream(self) -> SimStream:
        return SimStream(0)

    def stream_key(self, stream: SimStream) -> int:
        if not isinstance(stream, SimStream):
            raise TypeError(f"stream: expected a SimStream of this SimulatedDevice, got {stream!r}")
        return stream.id

    def launch(self, stream: SimStream, seconds: float) -> None:
        """Queue ``seconds`` of device work on ``stream`` (asynchronous for the host)."""
        with self._lock:
            sid = self.stream_key(stream)
            start = max(self._busy_until.get(sid, 0.0), self.clock)
            self._busy_until[sid] = start + seconds

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` of host time pass (the host doing other work)."""
        with self._lock:
            self.clock += seconds

    def _wait_until(self, time: float) -> None:
        if time > self.clock:
            self.stall_time += time - self.clock
            self.clock = time

    def synchronize(self) -> None:
        """Wait until every stream has drained."""
        with self._lock:
            self._synchronize()

    def _synchronize(self) -> None:
        self.num_syncs += 1
        self._wait_until(max(self._busy_until.values()))

    def record_event(self, stream: SimStream) -> SimEvent:
        with self._lock:
            sid = self.stream_key(stream)
            return SimEvent(sid, max(self._busy_until.get(sid, 0.0), self.clock))

    def event_query(self, event: SimEvent) -> bool:
        return self.clock >= event.time

    def event_synchronize(self, event: SimEvent) -> None:
        with self._lock:
            self._wait_until(event.time)

    # -- memory ---------------------------------------------------------------------------

    def mem_get_info(self) -> tuple[int, int]:
        return self.capacity - self._used, self.capacity

    @property
    def used(self) -> int:
        """Bytes currently held by raw allocations."""
        return self._used

    def live_allocations(self) -> dict[int, int]:
        """A copy of ``{address: size}`` of the raw allocations not yet freed."""
        with self._lock:
            return dict(self._live)

    def malloc(self, size: int) -> int:
        if size <= 0:
            raise ValueError(f"size: expected a positive number of bytes, got {size}")
        with self._lock:
            self.clock += self.malloc_cost
            if self._used + size > self.capacity:
                raise DeviceOutOfMemory(
                    f"simulated device {self.device}: cannot allocate {size} bytes, "
                    f"{self.capacity - self._used} of {self.capacity} free"
                )
            span = -(-size // _ALIGNMENT) * _ALIGNMENT
            address = self._take_range(span)
            self._live[address] = size
            self._used += size
            self.num_mallocs += 1
            return address

    def _take_range(self, span: int) -> int:
        for i, (start, end) in enumerate(self._holes):
            if end - start >= span:
                if end - start == span:
                    del self._holes[i]
                else:
                    self._holes[i] = (start + span, end)
                return start
        address = self._top
        self._top += span
        return address

    def free(self, address: int) -> None:
        with self._lock:
            size = self._live.pop(address, None)
            if size is None:
                raise ValueError(f"address: expected a live allocation of this device, got {address:#x}")
            # cudaFree may synchronise the whole device: the host waits for every stream.
            self._synchronize()
            self.clock += self.free_cost
            self._used -= size
            self.num_frees += 1
            span = -(-size // _ALIGNMENT) * _ALIGNMENT
            self._release_range(address, address + span)

    def _release_range(self, start: int, end: int) -> None:
        i = bisect.bisect_left(self._holes, (start, end))
        if i < len(self._holes) and self._holes[i][0] == end:
            end = self._holes.pop(i)[1]
        if i > 0 and self._holes[i - 1][1] == start:
            start = self._holes.pop(i - 1)[0]
            i -= 1
        if end == self._top:
            self._top = start
        else:
            self._holes.insert(i, (start, end))

    def ipc_handle(self, address: int) -> bytes:
        """A 64-byte token naming the live raw allocation at ``address`` (like
        ``cudaIpcMemHandle_t``)."""
        with self._lock:
            if address not in self._live:
                raise ValueError(f"address: expected a live allocation of this device, got {address:#x}")
        return f"flambeau-sim:{self.device}:{address:x}".encode().ljust(64, b"\0")

    # -- pinned host memory ---------------------------------------------------------------

    def host_malloc(self, size: int) -> int:
        """Allocate ``size`` bytes of real (ordinary) host memory standing for pinned memory."""
        with self._lock:
            self.clock += self.malloc_cost
            buffer = (ctypes.c_char * size)()
            address = ctypes.addressof(buffer)
            self._host[address] = buffer
            return address

    def host_free(self, address: int) -> None:
        with self._lock:
            if self._host.pop(address, None) is None:
                raise ValueError(f"address: expected a live host allocation, got {address:#x}")
            # cudaFreeHost synchronises like cudaFree.
            self._synchronize()
            self.clock += self.free_cost
