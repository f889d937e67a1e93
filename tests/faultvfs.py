"""An apsw VFS shim that injects I/O faults and simulates power loss, over the real files.

``FaultVFS`` registers a VFS (by default named ``"faultvfs"``) that inherits the platform's
default VFS: every file is a real file, locked and shared-memory-mapped by SQLite's own unix
code. On top of that it can

* **inject one fault** at the n-th eligible operation (`arm`): ``read``, ``write``, ``sync``,
  ``truncate`` or ``lock`` raise ``apsw.IOError`` (SQLite sees ``SQLITE_IOERR_<op>``, as from
  an EIO); ``short_write`` writes the first half of the buffer, then fails with
  ``SQLITE_FULL`` (what the unix VFS reports for a short write); ``full`` makes the n-th write
  that grows a file, and every later one, fail with ``SQLITE_FULL`` until `disarm` (a full
  disk: overwrites in place still succeed);
* **simulate power loss** (``volatile=True``): writes and truncations go to an in-memory image
  of each file (the OS page cache) and reach the real file only at ``xSync``. `power_cut`
  drops every unsynced change — or, with ``torn=rng``, keeps a random subset of them, in
  order, as a disk that reorders writes between syncs would — and fails every later
  operation until `power_on`, so the connections that "lost power" write nothing more.
  Armed with kind ``power``, the cut happens at the n-th write (``torn_rng`` decides whether
  some unsynced writes survive).

Operations are counted per kind (`counts`) so a caller can aim a fault at a random point of
a workload it has measured once without faults.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import apsw

#: the kinds of fault `arm` accepts, and the operation each one counts
FAULT_KINDS: dict[str, str] = {
    "read": "read",
    "write": "write",
    "sync": "sync",
    "truncate": "truncate",
    "lock": "lock",
    "short_write": "write",
    "full": "write",
    "power": "write",
}

_EXTENDED = {
    "read": apsw.SQLITE_IOERR_READ,
    "write": apsw.SQLITE_IOERR_WRITE,
    "sync": apsw.SQLITE_IOERR_FSYNC,
    "truncate": apsw.SQLITE_IOERR_TRUNCATE,
    "lock": apsw.SQLITE_IOERR_LOCK,
}


class PowerIsOff(apsw.IOError):
    """Raised by every operation between `FaultVFS.power_cut` and `FaultVFS.power_on`."""


def _io_error(kind: str, where: str) -> apsw.IOError:
    exc = apsw.IOError(f"injected {kind} fault ({where})")
    exc.extendedresult = _EXTENDED[kind]  # type: ignore[attr-defined]
    return exc


@dataclass
class Image:
    """The OS's view of one file: its bytes now, and the changes not yet synced to disk."""

    data: bytearray
    unsynced: list[tuple[int, bytes | int]] = field(default_factory=list)  # (offset, bytes) or (-1, new size)


@dataclass
class Fault:
    kind: str
    countdown: int  # eligible operations left before it fires (1: the next one)
    fired_at: str | None = None


class FaultVFS(apsw.VFS):
    """The shim. Open connections with ``apsw.Connection(path, vfs=shim.name)``."""

    def __init__(self, name: str = "faultvfs", *, volatile: bool = False) -> None:
        super().__init__(name, "")
        self.name = name
        self.volatile = volatile
        self.counts: dict[str, int] = dict.fromkeys(("read", "write", "sync", "truncate", "lock"), 0)
        self.fault: Fault | None = None
        self.disk_full = False
        self.injected: list[str] = []  # every fault that fired: "kind at file"
        self.powered_off = False
        self.images: dict[str, Image] = {}
        self.torn_rng: random.Random | None = None

    # -- control ------------------------------------------------------------------------
    def arm(self, kind: str, after: int) -> None:
        """Fail the `after`-th next operation of the kind `kind` counts (1 = the very next)."""
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}")
        self.fault = Fault(kind, max(1, after))

    def disarm(self) -> bool:
        """Stop injecting; True when the armed fault fired."""
        fired = self.fault is not None and self.fault.fired_at is not None
        self.fault = None
        self.disk_full = False
        return fired

    @property
    def fired(self) -> bool:
        return self.fault is not None and self.fault.fired_at is not None

    def power_cut(self, torn: random.Random | None = None) -> None:
        """Lose what was not synced (all of it, or a random subset with `torn`); fail from now on."""
        for path, image in self.images.items():
            if torn is not None and image.unsynced:
                survivors = [op for op in image.unsynced if torn.random() < 0.5]
                self._write_through(path, survivors)
        self.images.clear()
        self.powered_off = True

    def power_on(self) -> None:
        self.powered_off = False
        self.images.clear()

    # -- the hooks the files call -------------------------------------------------------
    def check(self, op: str, where: str, grows: bool = False) -> str | None:
        """Count one operation; raise the armed fault when it is this one. Returns "short"
        when a short write is due (the caller writes half, then raises)."""
        if self.powered_off:
            raise PowerIsOff(f"power is off ({op} {where})")
        self.counts[op] += 1
        if self.disk_full and op == "write" and grows:
            raise apsw.FullError(f"injected disk full ({where})")
        fault = self.fault
        if fault is None or fault.fired_at is not None or FAULT_KINDS[fault.kind] != op:
            return None
        if fault.kind == "full" and not grows:
            return None  # (a full disk fails only the writes that need space: it counts those)
        fault.countdown -= 1
        if fault.countdown > 0:
            return None
        fault.fired_at = where
        self.injected.append(f"{fault.kind} at {where}")
        if fault.kind == "full":
            self.disk_full = True
            raise apsw.FullError(f"injected disk full ({where})")
        if fault.kind == "power":
            self.power_cut(self.torn_rng)
            raise PowerIsOff(f"power cut ({where})")
        if fault.kind == "short_write":
            return "short"
        raise _io_error(fault.kind, where)

    def _write_through(self, path: str, ops: list[tuple[int, bytes | int]]) -> None:
        with open(path, "r+b") as handle:
            for offset, payload in ops:
                if isinstance(payload, int):
                    handle.truncate(payload)
                else:
                    handle.seek(offset)
                    handle.write(payload)

    # -- apsw.VFS -----------------------------------------------------------------------
    def xOpen(self, name: Any, flags: list[int]) -> FaultFile:
        return FaultFile(self, name, flags)

    def xDelete(self, filename: str, syncdir: bool) -> None:
        if self.powered_off:
            raise PowerIsOff(f"power is off (delete {filename})")
        self.images.pop(filename, None)
        super().xDelete(filename, syncdir)


def _path_of(name: Any) -> str | None:
    if name is None:
        return None
    if isinstance(name, str):
        return name
    return str(name.filename())


class FaultFile(apsw.VFSFile):
    """One open file of a `FaultVFS`: the real file, with the shim's checks and image."""

    def __init__(self, vfs: FaultVFS, name: Any, flags: list[int]) -> None:
        if vfs.powered_off:
            raise PowerIsOff("power is off (open)")
        super().__init__("", name, flags)
        self.vfs = vfs
        self.path = _path_of(name)
        self.where = (self.path or "temp").rsplit("/", 1)[-1]
        self.image: Image | None = None
        if vfs.volatile and self.path is not None:
            image = vfs.images.get(self.path)
            if image is None:
                size = super().xFileSize()
                image = Image(bytearray(super().xRead(size, 0)) if size else bytearray())
                vfs.images[self.path] = image
            self.image = image

    def _size(self) -> int:
        return len(self.image.data) if self.image is not None else super().xFileSize()

    def xRead(self, amount: int, offset: int) -> bytes:
        self.vfs.check("read", self.where)
        if self.image is None:
            return super().xRead(amount, offset)
        return bytes(self.image.data[offset : offset + amount])

    def xWrite(self, data: bytes, offset: int) -> None:
        due = self.vfs.check("write", self.where, grows=offset + len(data) > self._size())
        if due == "short":
            self._write(bytes(data)[: len(data) // 2], offset)
            raise apsw.FullError(f"injected short write ({self.where})")
        self._write(bytes(data), offset)

    def _write(self, data: bytes, offset: int) -> None:
        if self.image is None:
            super().xWrite(data, offset)
            return
        buf = self.image.data
        if offset > len(buf):
            buf.extend(bytes(offset - len(buf)))
        buf[offset : offset + len(data)] = data
        self.image.unsynced.append((offset, data))

    def xTruncate(self, newsize: int) -> None:
        self.vfs.check("truncate", self.where)
        if self.image is None:
            super().xTruncate(newsize)
            return
        del self.image.data[newsize:]
        self.image.unsynced.append((-1, newsize))

    def xSync(self, flags: int) -> None:
        self.vfs.check("sync", self.where)
        image = self.image
        if image is not None and image.unsynced:
            for offset, payload in image.unsynced:  # what the disk gets: the ops, in order
                if isinstance(payload, int):
                    super().xTruncate(payload)
                else:
                    super().xWrite(payload, offset)
            image.unsynced.clear()
        super().xSync(flags)

    def xFileSize(self) -> int:
        if self.vfs.powered_off:
            raise PowerIsOff(f"power is off (size {self.where})")
        return self._size()

    def xLock(self, level: int) -> None:
        self.vfs.check("lock", self.where)
        super().xLock(level)

    def xUnlock(self, level: int) -> None:
        super().xUnlock(level)  # (always: a process that lost power holds no lock either)

    def xClose(self) -> None:
        super().xClose()
