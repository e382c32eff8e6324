"""The items of a Kubernetes list answer, parsed one by one as its bytes arrive.

An unpaged list of a large collection (the API server's watch cache answers
``resourceVersion=0`` whole: 100,000 ReplicaSets are ~200 MB of JSON) must not
be held, or parsed, at once. :class:`ListItems` takes the answer's bytes in any
pieces and returns each item as soon as it is complete, keeping only the bytes
of the item being read.

The API server writes a built-in type's list as ``kind``, ``apiVersion``,
``metadata``, ``items``, and a custom resource's with its keys sorted
(``apiVersion``, ``items``, ``kind``, ``metadata``): what precedes ``items`` is
read when it has arrived, what follows when the answer ends. Every item of a
list begins the same way: a typed object with ``{"metadata":``, a custom
resource with ``{"apiVersion":``. An item therefore
ends where ``},`` plus that opening follows it, or at the array's ``}]``; a
candidate end whose text does not parse (the same characters inside an item,
say a StatefulSet's ``volumeClaimTemplates``) is passed over for the next one,
so the split is exact whatever the items hold. Each item is parsed alone
(:func:`fedplace.common.jsonsafe.loads`).
"""

from __future__ import annotations

from typing import Any

from fedplace.common import jsonsafe

__all__ = ["ListItems"]

_SPACE = b" \t\r\n"
_KEEP = 1 << 20  # consumed bytes are dropped once this many have gathered


class ListItems:
    """Feed the bytes of one list answer with :meth:`feed`; it returns the items they complete.

    ``head`` is the answer without its items (``kind``, ``apiVersion``, ``metadata``): what
    precedes the items once they begin, all of it once :meth:`close` has checked that the
    whole answer was read (ValueError otherwise); :meth:`feed` raises ValueError for an
    answer that is not a list."""

    def __init__(self) -> None:
        self.head: dict[str, Any] | None = None
        self._buf = bytearray()
        self._pos = 0  # where the next item (or the array's end) starts
        self._opening = b""  # "}," + how the first item began, e.g. b'},{"metadata":'
        self._done = False

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        """The items ``chunk`` completes, in order."""
        self._buf += chunk
        out: list[dict[str, Any]] = []
        if self.head is None and not self._read_head():
            return out
        while not self._done and self._next(out):
            pass
        if self._pos > _KEEP:
            del self._buf[: self._pos]
            self._pos = 0
        return out

    def close(self) -> None:
        """Read what follows the items into ``head``; raise ValueError when the answer ended
        before its items did, or does not end as a JSON object."""
        if self.head is None or not self._done:
            raise ValueError("the list answer ended before its items did")
        tail = bytes(self._buf[self._pos:]).strip(_SPACE)
        if tail.startswith(b","):  # more keys after the items
            try:
                rest = jsonsafe.loads(b"{" + tail[1:])
            except ValueError:
                rest = None
            if not isinstance(rest, dict):
                raise ValueError("what follows the items of a list answer is not the rest of a JSON object")
            self.head.update(rest)
        elif tail != b"}":
            raise ValueError("the list answer does not end after its items")

    def _read_head(self) -> bool:
        at = self._buf.find(b'"items":')
        if at < 0:
            if len(self._buf) > 1 << 16:
                raise ValueError("no items in the first 64 KB of a list answer")
            return False
        rest = bytes(self._buf[at + 8 : at + 16]).lstrip(_SPACE)
        if not rest or (rest[:1] == b"n" and len(rest) < 4):
            return False
        try:
            head = jsonsafe.loads(bytes(self._buf[:at]).rstrip(_SPACE).rstrip(b",") + b"}")
        except ValueError:
            head = None
        if not isinstance(head, dict):
            raise ValueError("a list answer is not a JSON object")
        if rest.startswith(b"null"):
            self._done = True
            self._pos = self._buf.find(b"null", at + 8) + 4
        elif rest.startswith(b"["):
            self._pos = self._buf.find(b"[", at + 8) + 1
        else:
            raise ValueError("the items of a list answer are not a list")
        self.head = head
        return True

    def _next(self, out: list[dict[str, Any]]) -> bool:
        """Parse the next item into ``out``, or read the array's end; False when more bytes are needed."""
        buf, p = self._buf, self._pos
        while p < len(buf) and buf[p] in _SPACE:
            p += 1
        if p >= len(buf):
            return False
        if buf[p] == 0x5D:  # ]
            self._done, self._pos = True, p + 1
            return False
        if buf[p] != 0x7B:  # {
            raise ValueError("an item of a list answer is not a JSON object")
        if not self._opening:
            colon = buf.find(b":", p)
            if colon < 0:
                return False
            self._opening = b"}," + bytes(buf[p : colon + 1])
        q = p
        while True:
            # The next item's opening; for the last item, the array's end.
            cut = buf.find(self._opening, q)
            if cut < 0:
                cut = buf.find(b"}]", q)
                if cut < 0:
                    return False
            cut += 1
            try:
                item = jsonsafe.loads(bytes(memoryview(buf)[p:cut]))
            except ValueError:
                q = cut
                continue
            if not isinstance(item, dict):
                raise ValueError("an item of a list answer is not a JSON object")
            out.append(item)
            self._pos = cut + 1 if buf[cut] == 0x2C else cut  # past the "," (a "]" is read next)
            return True
