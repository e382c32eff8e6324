"""How every ``fedplace`` command ends: exit codes, one-line errors, a closed pipe.

Exit codes (docs/insight.md, "Conventions"):

* 0 — done;
* 1 — the command found what it was asked to look for: what-if's changes over the
  thresholds or a module that would not compile, ``explain --fail-on-denial`` a
  denial, ``limits --fail-on-violations`` a violation;
* 2 — a usage or input error: a flag, a file, the kubeconfig, an object or
  document that does not exist, a request the server refuses (4xx);
* 3 — a server (OPA, the API server, opa-kube-sync) cannot be reached or gives
  no usable answer: connection refused, DNS, TLS, timeout, 5xx, an answer that
  is not JSON;
* 4 — an internal error (a bug): one line too; ``FEDPLACE_DEBUG=1`` prints the
  traceback.

Every error a user can cause is one line on stderr, ``<prog>: error: <message>``
(warnings: ``<prog>: warning: …``), never a traceback. :class:`Parser` makes
argparse's errors one line too; :func:`guarded` maps exceptions onto exit codes
for one subcommand's ``run``; :func:`execute` parses and runs a whole command
line; :func:`main` adds what only a process has (stdout closed early by
``| head``, Ctrl-C).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import os
import ssl
import sys
import traceback
from typing import Any, Awaitable, Callable, Sequence, TextIO

import aiohttp
import yaml

from fedplace.common.kube_client import KubeApiError, KubeConfigError
from fedplace.common.opa_client import OpaError, OpaEvaluationError, OpaMalformedResponse, OpaUnavailable

__all__ = ["EXIT_FOUND", "EXIT_INTERNAL", "EXIT_OK", "EXIT_UNREACHABLE", "EXIT_USAGE", "CliError", "Parser",
           "SafeStream", "Unreachable", "UsageError", "classify", "execute", "guarded", "main", "one_line",
           "version", "warn"]

EXIT_OK, EXIT_FOUND, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_INTERNAL = 0, 1, 2, 3, 4


class CliError(Exception):
    """An error for the user, with its exit code (2 unless said)."""

    code = EXIT_USAGE

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class UsageError(CliError, ValueError):
    """A flag, a file or an object the command cannot use (exit 2); a ValueError, as the
    functions raising it raised before."""


class Unreachable(CliError):
    """A server that cannot be reached or gives no usable answer (exit 3)."""

    code = EXIT_UNREACHABLE


def one_line(text: object) -> str:
    return " ".join(str(text).split())


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed
    try:
        return installed("fedplace")
    except PackageNotFoundError:
        return "unknown (not installed)"


def classify(exc: BaseException) -> tuple[int, str] | None:
    """The exit code and message for an exception a user can cause; None for a bug."""
    from fedplace.insight.evaluate import EvaluatorUnavailable  # not at import: opa_bindings' probe
    if isinstance(exc, CliError):
        return exc.code, str(exc)
    if isinstance(exc, KubeConfigError):
        return EXIT_USAGE, str(exc)
    if isinstance(exc, KubeApiError):
        unusable = exc.status >= 500 or exc.status == 429 or exc.reason == "MalformedResponse"
        return (EXIT_UNREACHABLE if unusable else EXIT_USAGE), f"the API server answered {exc}"
    if isinstance(exc, OpaUnavailable) and not exc.answered:
        return EXIT_UNREACHABLE, f"cannot reach OPA: {exc}"
    if isinstance(exc, (OpaUnavailable, OpaMalformedResponse)):
        return EXIT_UNREACHABLE, str(exc)
    if isinstance(exc, OpaEvaluationError):
        return EXIT_USAGE, f"the placement policy fails on this object (the webhook denies it): {exc}"
    if isinstance(exc, OpaError):
        return EXIT_USAGE, str(exc)
    if isinstance(exc, EvaluatorUnavailable):
        cause = exc.__cause__
        return (EXIT_UNREACHABLE if isinstance(cause, (OpaUnavailable, OpaMalformedResponse)) else EXIT_USAGE), \
            str(exc)
    if isinstance(exc, (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, ConnectionError, ssl.SSLError,
                        TimeoutError, asyncio.TimeoutError)):
        return EXIT_UNREACHABLE, f"cannot reach the server: {exc.__class__.__name__}: {exc}".rstrip(": ")
    if isinstance(exc, aiohttp.ClientResponseError):
        return (EXIT_UNREACHABLE if exc.status >= 500 else EXIT_USAGE), f"{exc.status} {exc.message}"
    if isinstance(exc, aiohttp.InvalidURL):
        return EXIT_USAGE, f"invalid URL: {exc}"
    if isinstance(exc, yaml.YAMLError):
        return EXIT_USAGE, f"not valid YAML: {exc}"
    if isinstance(exc, UnicodeDecodeError):
        return EXIT_USAGE, "the input is not text (UTF-8)"
    if isinstance(exc, OSError):  # files (connections were taken above)
        name = f"{exc.filename}: " if exc.filename else ""
        return EXIT_USAGE, f"{name}{exc.strerror or exc}"
    if isinstance(exc, ValueError):
        return EXIT_USAGE, str(exc)
    return None


def warn(err: TextIO, prog: str, message: str) -> None:
    err.write(f"{prog}: warning: {one_line(message)}\n")


async def guarded(prog: str, body: Callable[[argparse.Namespace, TextIO, TextIO], Awaitable[int]],
                  args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``body(args, out, err)``, with every error a user can cause turned into one line on ``err``
    and its exit code; a bug propagates (:func:`execute` reports it)."""
    try:
        return await body(args, out, err)
    except Exception as exc:
        found = classify(exc)
        if found is None:
            raise
        code, message = found
        err.write(f"{prog}: error: {one_line(message) or exc.__class__.__name__}\n")
        return code


class Parser(argparse.ArgumentParser):
    """argparse, with kubectl's habits: no abbreviated flags, and an error is one line (exit 2)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> Any:  # argparse's: usage + "error:" + exit 2
        self.exit(EXIT_USAGE, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        parsed, extras = super().parse_known_args(args, namespace)
        # Python 3.11's argparse drops a value that is '--' (--opa-ca-file=--, -f --) and stores an
        # empty list instead of the one string the flag takes.
        for action in self._actions:
            value = getattr(parsed, action.dest, None)
            if isinstance(action, argparse._StoreAction) and action.nargs is None and isinstance(value, list):
                self.error(f"argument {'/'.join(action.option_strings)}: expected one argument")
            if isinstance(action, argparse._AppendAction) and isinstance(value, list) \
                    and any(isinstance(v, list) for v in value):
                self.error(f"argument {'/'.join(action.option_strings)}: expected one argument")
        return parsed, extras


class SafeStream(io.TextIOBase):
    """A text stream that survives its reader going away (``| head``): the first BrokenPipeError
    points the file descriptor at /dev/null (so the interpreter's last flush is quiet too) and
    the rest of the output is dropped; the command still ends with its own exit code."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self._stream = stream
        self.broken = False

    def _drop(self) -> None:
        self.broken = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, io.UnsupportedOperation):
            pass

    def write(self, text: str) -> int:
        if not self.broken:
            try:
                self._stream.write(text)
            except BrokenPipeError:
                self._drop()
        return len(text)

    def flush(self) -> None:
        if not self.broken:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._drop()
            except (OSError, ValueError):
                pass

    def isatty(self) -> bool:
        try:
            return self._stream.isatty()
        except (OSError, ValueError):
            return False

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._stream.fileno()


async def execute(parser: argparse.ArgumentParser, argv: Sequence[str] | None, out: TextIO, err: TextIO) -> int:
    """Parse ``argv`` with ``parser`` (its subcommand parsers set ``run`` and ``prog``) and run
    it: the exit code, every message on ``out`` and ``err``."""
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):  # --help, --version, errors
            args = parser.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    prog = getattr(args, "prog", parser.prog)
    try:
        return await args.run(args, out, err)
    except Exception as exc:  # a bug: still one line, and a code that is none of the others
        if os.environ.get("FEDPLACE_DEBUG"):
            traceback.print_exc(file=err)
        err.write(f"{prog}: internal error: {exc.__class__.__name__}: {one_line(exc)} "
                  "(a bug: please report it; FEDPLACE_DEBUG=1 shows where)\n")
        return EXIT_INTERNAL


def main(parser: argparse.ArgumentParser, argv: Sequence[str] | None = None) -> int:
    """:func:`execute` in a process: stdout and stderr safe against a closed pipe, Ctrl-C is 130."""
    out, err = SafeStream(sys.stdout), SafeStream(sys.stderr)
    try:
        code = asyncio.run(execute(parser, argv, out, err))
    except KeyboardInterrupt:
        return 130
    out.flush()
    err.flush()
    return code
