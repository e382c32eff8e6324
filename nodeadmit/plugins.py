"""Calling one plugin: the shell, socket and grpc types (the manager's side of the protocol).

Every type sends the same request — the pod, JSON-encoded — and expects an
AdmitResult (:mod:`fedplace.nodeadmit.result`). :meth:`Plugin.call` returns the
plugin's :class:`~fedplace.nodeadmit.result.AdmitResult` or raises
:class:`PluginFailure` with the manager's reason and a detail; the manager
bounds every call with the plugin's timeout (cancellation cleans up: a shell
plugin's whole process group is killed).

* ``shell`` — executes ``<bin dir>/<name> [args…]`` in a new session (its own
  process group), writes the pod to stdin and closes it, reads stdout (at most
  :data:`MAX_ANSWER` bytes) and the tail of stderr. Exit 0 with a valid
  AdmitResult on stdout is an answer; a non-zero exit or a signal is a failure;
  stderr is quoted in the message of any failure.
* ``socket`` — connects to a Unix domain socket, writes the pod, half-closes
  (``shutdown(SHUT_WR)``), reads the AdmitResult until the plugin closes. One
  request per connection.
* ``grpc`` — ``PodAdmissionPlugin/Admit`` (nodeadmit/api/podadmission.proto) on
  ``127.0.0.1:<port>`` over one long-lived channel per plugin; the call carries
  the plugin's timeout as its gRPC deadline.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from pathlib import Path
from typing import Any

from fedplace.nodeadmit.config import PluginSpec
from fedplace.nodeadmit.result import (
    REASON_FAILED,
    REASON_INVALID_RESULT,
    REASON_MISSING,
    REASON_NOT_EXECUTABLE,
    REASON_TIMEOUT,
    REASON_UNREACHABLE,
    AdmitResult,
    InvalidResult,
    decode_result,
    validate_result,
)

__all__ = ["MAX_ANSWER", "GrpcPlugin", "Plugin", "PluginFailure", "ShellPlugin", "SocketPlugin", "make_plugin",
           "read_capped"]

MAX_ANSWER = 1 << 20  # bytes of stdout / socket answer accepted from a plugin
STDERR_TAIL = 2048  # bytes of a shell plugin's stderr kept for the message
MESSAGE_STDERR = 512  # characters of it quoted in a rejection message
KILL_WAIT = 2.0  # seconds to wait for a killed shell plugin to be reaped

log = logging.getLogger(__name__)


class PluginFailure(Exception):
    """The plugin gave no valid answer; ``reason`` is one of nodeadmit.result's REASON_*."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


async def read_capped(reader: asyncio.StreamReader, limit: int, *, keep_tail: bool = False) -> tuple[bytes, bool]:
    """Read to EOF; returns (data, overflowed). Past ``limit`` bytes: stop at once
    (``keep_tail=False``) or go on draining and keep only the last ``limit`` bytes."""
    data = bytearray()
    overflowed = False
    while True:
        chunk = await reader.read(65536)
        if not chunk:
            return bytes(data), overflowed
        data += chunk
        if len(data) > limit:
            overflowed = True
            if not keep_tail:
                return bytes(data[:limit]), True
            del data[:-limit]


class Plugin:
    """One configured plugin."""

    def __init__(self, spec: PluginSpec) -> None:
        self.spec = spec

    async def call(self, pod: bytes) -> AdmitResult:  # pragma: no cover - abstract
        raise NotImplementedError

    async def close(self) -> None:
        """Release what the plugin holds (channels)."""


def _stderr_note(stderr: bytes) -> str:
    text = " ".join(stderr.decode("utf-8", errors="replace").split())
    if not text:
        return ""
    if len(text) > MESSAGE_STDERR:
        text = "…" + text[-MESSAGE_STDERR:]
    return f"; stderr: {text}"


def _exit_text(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by {name}"
    return f"exited with status {returncode}"


class ShellPlugin(Plugin):
    """A binary in the bin directory, run once per pod."""

    def __init__(self, spec: PluginSpec, bin_dir: Path) -> None:
        super().__init__(spec)
        self.path = bin_dir / spec.name

    async def call(self, pod: bytes) -> AdmitResult:
        path = self.path
        if not os.path.lexists(path):
            raise PluginFailure(REASON_MISSING, f"no executable at {path}")
        if not path.is_file() or not os.access(path, os.X_OK):
            raise PluginFailure(REASON_NOT_EXECUTABLE, f"{path} is not an executable file")
        try:
            proc = await asyncio.create_subprocess_exec(
                str(path), *self.spec.args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, start_new_session=True)
        except OSError as exc:  # ENOEXEC (no #! line), a missing interpreter, EACCES on a directory on the way…
            raise PluginFailure(REASON_NOT_EXECUTABLE, f"{path} cannot be executed: {exc.strerror or exc}") from exc
        side = asyncio.gather(read_capped(proc.stderr, STDERR_TAIL, keep_tail=True),  # type: ignore[arg-type]
                              self._feed(proc, pod))
        try:
            stdout, overflow = await read_capped(proc.stdout, MAX_ANSWER)  # type: ignore[arg-type]
            if overflow:
                _kill_group(proc.pid)
            (stderr, _), _ = await side
            if overflow:
                raise PluginFailure(REASON_INVALID_RESULT, f"wrote more than {MAX_ANSWER} bytes to stdout")
            returncode = await proc.wait()
        finally:
            side.cancel()
            side.add_done_callback(_consume)
            if proc.returncode is None:  # timed out (cancelled) or overflowed: kill the plugin and its children
                _kill_group(proc.pid)
                try:
                    await asyncio.wait_for(proc.wait(), KILL_WAIT)
                except TimeoutError:  # unkillable (e.g. stuck in the kernel): do not hold the pod's verdict
                    log.error("shell plugin did not die", extra={"plugin": self.spec.name, "pid": proc.pid})
        if returncode != 0:
            raise PluginFailure(REASON_FAILED, _exit_text(returncode) + _stderr_note(stderr))
        try:
            return decode_result(stdout)
        except InvalidResult as exc:
            raise PluginFailure(REASON_INVALID_RESULT,
                                f"invalid result on stdout: {exc}{_stderr_note(stderr)}") from None

    @staticmethod
    async def _feed(proc: asyncio.subprocess.Process, pod: bytes) -> None:
        assert proc.stdin is not None
        try:
            proc.stdin.write(pod)
            await proc.stdin.drain()
            proc.stdin.close()
            await proc.stdin.wait_closed()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the plugin did not read the pod: its exit status and output decide


def _consume(future: asyncio.Future) -> None:
    """Retrieve a cancelled helper's outcome, so asyncio does not log it as never retrieved."""
    if not future.cancelled():
        future.exception()


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class SocketPlugin(Plugin):
    """A server on a Unix domain socket, one connection per pod."""

    def __init__(self, spec: PluginSpec) -> None:
        super().__init__(spec)
        assert spec.socket is not None
        self.path = spec.socket

    async def call(self, pod: bytes) -> AdmitResult:
        if not os.path.lexists(self.path):
            raise PluginFailure(REASON_MISSING, f"no socket at {self.path}")
        try:
            reader, writer = await asyncio.open_unix_connection(str(self.path), limit=MAX_ANSWER)
        except OSError as exc:
            raise PluginFailure(REASON_UNREACHABLE, f"cannot connect to {self.path}: {exc.strerror or exc}") from exc
        try:
            try:
                writer.write(pod)
                await writer.drain()
                writer.write_eof()
                raw, overflow = await read_capped(reader, MAX_ANSWER)
            except OSError as exc:  # reset / broken pipe: the plugin went away mid-request
                raise PluginFailure(REASON_FAILED, f"connection to {self.path} broken: {exc.strerror or exc}") from exc
        finally:
            writer.close()
        if overflow:
            raise PluginFailure(REASON_INVALID_RESULT, f"answered more than {MAX_ANSWER} bytes")
        if not raw.strip():
            raise PluginFailure(REASON_FAILED, f"{self.path}: the connection closed without an answer")
        try:
            return decode_result(raw)
        except InvalidResult as exc:
            raise PluginFailure(REASON_INVALID_RESULT, f"invalid result: {exc}") from None


class GrpcPlugin(Plugin):
    """A gRPC server on a local port (``PodAdmissionPlugin/Admit``)."""

    # Reconnect quickly after the plugin restarts: gRPC's default backoff (1 s growing to
    # 120 s) would keep rejecting pods long after the plugin is back.
    CHANNEL_OPTIONS = (
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.min_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", 1000),
        ("grpc.enable_http_proxy", 0),
    )

    def __init__(self, spec: PluginSpec) -> None:
        super().__init__(spec)
        self.target = f"127.0.0.1:{spec.port}"
        self._channel: Any = None
        self._admit: Any = None

    def _method(self) -> Any:
        if self._admit is None:
            import grpc

            from fedplace.nodeadmit.api import podadmission_pb2 as pb

            self._channel = grpc.aio.insecure_channel(self.target, options=self.CHANNEL_OPTIONS)
            # Raw response bytes, decoded here, so that an undecodable answer is an invalid result.
            self._admit = self._channel.unary_unary(admit_method_path(),
                                                    request_serializer=pb.AdmitRequest.SerializeToString)
        return self._admit

    async def call(self, pod: bytes) -> AdmitResult:
        import grpc
        from google.protobuf.message import DecodeError

        from fedplace.nodeadmit.api import podadmission_pb2 as pb

        admit = self._method()
        try:
            raw = await admit(pb.AdmitRequest(pod=pod), timeout=self.spec.timeout)
        except grpc.aio.AioRpcError as exc:
            code = exc.code()
            detail = f"{self.target}: {code.name}: {exc.details() or ''}".rstrip(": ")
            if code == grpc.StatusCode.UNAVAILABLE:
                raise PluginFailure(REASON_UNREACHABLE, detail) from None
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise PluginFailure(REASON_TIMEOUT, f"no answer within {self.spec.timeout:g}s ({detail})") from None
            raise PluginFailure(REASON_FAILED, detail) from None
        try:
            reply = pb.AdmitResult.FromString(raw)
        except DecodeError as exc:
            raise PluginFailure(REASON_INVALID_RESULT, f"undecodable answer: {exc}") from None
        doc: dict[str, Any] = {"reason": reply.reason, "message": reply.message}
        if reply.HasField("admit"):
            doc["admit"] = reply.admit
        try:
            return validate_result(doc)
        except InvalidResult as exc:
            raise PluginFailure(REASON_INVALID_RESULT, f"invalid result: {exc}") from None

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = self._admit = None


def admit_method_path() -> str:
    """``/fedplace.nodeadmit.v1alpha1.PodAdmissionPlugin/Admit``, from the generated descriptor."""
    from fedplace.nodeadmit.api import podadmission_pb2 as pb

    service = pb.DESCRIPTOR.services_by_name["PodAdmissionPlugin"]
    return f"/{service.full_name}/{service.methods_by_name['Admit'].name}"


def make_plugin(spec: PluginSpec, bin_dir: Path) -> Plugin:
    if spec.type == "shell":
        return ShellPlugin(spec, bin_dir)
    if spec.type == "socket":
        return SocketPlugin(spec)
    return GrpcPlugin(spec)
