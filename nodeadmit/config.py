"""The plugin manager's configuration: KEP-2823's file, the directories, the feature gate.

The configuration file lives in the configuration directory (default
:data:`DEFAULT_CONF_DIR`); the directory must hold exactly one ``*.json`` or
``*.conf`` file, so a file dropped in beside it can never be silently ignored.
Its format is the KEP's, with a few optional extensions (marked +)::

    {
      "name": "admission-plugin",           # optional
      "version": "0.1",                     # optional
      "timeoutSeconds": 5,                  # + default per-plugin timeout
      "plugins": [                          # required, at least one
        {"name": "sysctlcheck", "type": "shell"},
        {"name": "fedplace-node-admit", "type": "socket"},
        {"name": "fargatecheck", "type": "grpc", "port": 50051}
      ]
    }

Per plugin: ``name`` (required; a file name: letters, digits, ``.``, ``_``,
``-``; unique), ``type`` (``shell``, ``socket`` or ``grpc``), and
+``timeoutSeconds``. Per type:

* ``shell`` — the executable ``<bin dir>/<name>``; +``args``: a list of
  strings passed to it.
* ``socket`` — the Unix socket +``socket`` (a path; relative paths are under
  the socket directory), default ``<socket dir>/<name>.sock``.
* ``grpc`` — +``port`` (required): the plugin listens on ``127.0.0.1:<port>``.

Unknown keys, wrong types, duplicate names, an empty plugin list: every one is
a :class:`~fedplace.common.config.ConfigError` at start-up, which stops the manager
(never an open door). A plugin that is missing or broken at admission time is
not a configuration error: it rejects the pods (see :mod:`fedplace.nodeadmit.manager`).

The feature gate :data:`FEATURE_GATE` (``PodAdmissionPlugin``, off by default,
as an alpha kubelet gate) is given like the kubelet's ``--feature-gates``:
``PodAdmissionPlugin=true``; an unknown gate name is an error.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedplace.common.config import ConfigError, integer, number, only

__all__ = [
    "DEFAULT_BIN_DIR",
    "DEFAULT_CONF_DIR",
    "DEFAULT_SOCKET_DIR",
    "DEFAULT_TIMEOUT",
    "FEATURE_GATE",
    "MAX_TIMEOUT",
    "PLUGIN_TYPES",
    "ManagerConfig",
    "PluginConfig",
    "PluginSpec",
    "find_config_file",
    "load_plugin_config",
    "parse_feature_gates",
    "plugin_config_from",
]

FEATURE_GATE = "PodAdmissionPlugin"
KNOWN_GATES = {FEATURE_GATE: False}

DEFAULT_CONF_DIR = "/etc/kubernetes/pod-admission.d"
DEFAULT_BIN_DIR = "/opt/pod-admission/bin"
DEFAULT_SOCKET_DIR = "/var/run/pod-admission"
DEFAULT_TIMEOUT = 5.0
MAX_TIMEOUT = 60.0
PLUGIN_TYPES = ("shell", "socket", "grpc")
CONFIG_SUFFIXES = (".json", ".conf")

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")
_TOP = ("name", "version", "timeoutSeconds", "plugins")
_PLUGIN_KEYS = {
    "shell": ("name", "type", "timeoutSeconds", "args"),
    "socket": ("name", "type", "timeoutSeconds", "socket"),
    "grpc": ("name", "type", "timeoutSeconds", "port"),
}


@dataclass(frozen=True)
class PluginSpec:
    """One configured plugin, validated; where to find it is resolved when it is called."""

    name: str
    type: str
    timeout: float = DEFAULT_TIMEOUT
    args: tuple[str, ...] = ()
    socket: Path | None = None
    port: int | None = None

    def describe(self) -> str:
        return f"{self.name} ({self.type})"


@dataclass(frozen=True)
class PluginConfig:
    """The configuration file, validated."""

    plugins: tuple[PluginSpec, ...]
    name: str = ""
    version: str = ""
    source: str = ""


@dataclass(frozen=True)
class ManagerConfig:
    """Where the manager looks for things, and whether it is on at all."""

    conf_dir: Path = Path(DEFAULT_CONF_DIR)
    bin_dir: Path = Path(DEFAULT_BIN_DIR)
    socket_dir: Path = Path(DEFAULT_SOCKET_DIR)
    enabled: bool = False  # the PodAdmissionPlugin feature gate
    config_file: Path | None = None  # overrides the search of conf_dir


def parse_feature_gates(text: str | None) -> dict[str, bool]:
    """``"PodAdmissionPlugin=true,…"`` → every known gate's value (defaults filled in)."""
    gates = dict(KNOWN_GATES)
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip().lower()
        if not sep or value not in ("true", "false"):
            raise ConfigError("--feature-gates", f"{item!r}: expected NAME=true or NAME=false")
        if key not in KNOWN_GATES:
            raise ConfigError("--feature-gates", f"unrecognized feature gate {key!r} (known: {', '.join(KNOWN_GATES)})")
        gates[key] = value == "true"
    return gates


def find_config_file(conf_dir: Path) -> Path:
    """The one configuration file in ``conf_dir``; ConfigError when there is none or more than one."""
    if not conf_dir.is_dir():
        raise ConfigError("conf dir", f"{str(conf_dir)!r} is not a directory")
    found = sorted(p for p in conf_dir.iterdir() if p.suffix in CONFIG_SUFFIXES and not p.name.startswith("."))
    if not found:
        raise ConfigError("conf dir", f"no *.json or *.conf configuration file in {str(conf_dir)!r}")
    if len(found) > 1:
        names = ", ".join(p.name for p in found)
        raise ConfigError("conf dir", f"more than one configuration file in {str(conf_dir)!r} ({names}): "
                                      "keep exactly one, so that none is silently ignored")
    return found[0]


def load_plugin_config(path: Path, socket_dir: Path = Path(DEFAULT_SOCKET_DIR)) -> PluginConfig:
    """Read and validate a configuration file (JSON)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), f"cannot be read: {exc}") from exc
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ConfigError(str(path), f"not valid JSON: {exc}") from exc
    return plugin_config_from(doc, socket_dir, source=str(path))


def _text(doc: dict[str, Any], key: str, name: str) -> str:
    value = doc.get(key, "")
    if not isinstance(value, str):
        raise ConfigError(name, f"must be a string, got {type(value).__name__}")
    return value


def plugin_config_from(doc: Any, socket_dir: Path = Path(DEFAULT_SOCKET_DIR), source: str = "") -> PluginConfig:
    """Validate a decoded configuration document."""
    if not isinstance(doc, dict):
        raise ConfigError("config", "the top level must be an object")
    only(doc, _TOP, "")
    default_timeout = number(doc, "timeoutSeconds", "timeoutSeconds", DEFAULT_TIMEOUT, maximum=MAX_TIMEOUT)
    plugins_doc = doc.get("plugins")
    if not isinstance(plugins_doc, list):
        raise ConfigError("plugins", "required: a list of {name, type}")
    if not plugins_doc:
        raise ConfigError("plugins", "is empty: list at least one plugin (to check nothing, turn the "
                                     f"{FEATURE_GATE} feature gate off)")
    plugins = []
    seen: set[str] = set()
    for i, entry in enumerate(plugins_doc):
        spec = _plugin(entry, f"plugins[{i}]", default_timeout, socket_dir)
        if spec.name in seen:
            raise ConfigError(f"plugins[{i}].name", f"{spec.name!r} is listed twice")
        seen.add(spec.name)
        plugins.append(spec)
    return PluginConfig(tuple(plugins), _text(doc, "name", "name"), _text(doc, "version", "version"), source)


def _plugin(entry: Any, where: str, default_timeout: float, socket_dir: Path) -> PluginSpec:
    if not isinstance(entry, dict):
        raise ConfigError(where, "must be an object with name and type")
    name = entry.get("name")
    if not isinstance(name, str) or not _NAME.match(name) or name in (".", ".."):
        raise ConfigError(f"{where}.name", f"{name!r}: required; letters, digits, '.', '_' and '-' only "
                                           "(it names a file)")
    kind = entry.get("type")
    if kind not in PLUGIN_TYPES:
        raise ConfigError(f"{where}.type", f"{kind!r}: must be one of {', '.join(PLUGIN_TYPES)}")
    only(entry, _PLUGIN_KEYS[kind], where)
    timeout = number(entry, "timeoutSeconds", f"{where}.timeoutSeconds", default_timeout, maximum=MAX_TIMEOUT)
    if kind == "shell":
        args = entry.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ConfigError(f"{where}.args", "must be a list of strings")
        return PluginSpec(name, kind, timeout, args=tuple(args))
    if kind == "socket":
        sock = entry.get("socket", f"{name}.sock")
        if not isinstance(sock, str) or not sock:
            raise ConfigError(f"{where}.socket", "must be a non-empty path")
        return PluginSpec(name, kind, timeout, socket=socket_dir / sock)
    if "port" not in entry:
        raise ConfigError(f"{where}.port", "required for a grpc plugin")
    port = integer(entry, "port", f"{where}.port", None, minimum=1, maximum=65535)
    return PluginSpec(name, kind, timeout, port=port)
