"""The committed gRPC stubs are what grpcio-tools generates from nodeadmit/api/podadmission.proto.

They are committed (not generated at install) so a node needs only grpcio and
protobuf at run time, not grpcio-tools and its bundled protoc; this test keeps
them from going stale (regenerate with the command in the .proto file). It
compares what the .proto defines — the serialized file descriptor, and the
service code — not the generator's version stamps, so a newer grpcio-tools
does not fail it.
"""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
API = Path("nodeadmit") / "api"
# Where the package is installed (fedplace.nodeadmit.api): the generator writes imports from it.
INSTALLED = Path("fedplace") / API


def descriptor(pb2_source: str) -> bytes:
    match = re.search(r"AddSerializedFile\((b'.*?')\)\n", pb2_source, re.S)
    assert match, "no serialized descriptor in the generated module"
    return ast.literal_eval(match.group(1))


def service_code(grpc_source: str) -> str:
    return re.sub(r"GRPC_GENERATED_VERSION = '[^']*'", "GRPC_GENERATED_VERSION = …", grpc_source)


def test_committed_stubs_match_the_proto(tmp_path: Path) -> None:
    protoc = pytest.importorskip("grpc_tools.protoc")
    (tmp_path / INSTALLED).mkdir(parents=True)
    shutil.copy(ROOT / API / "podadmission.proto", tmp_path / INSTALLED)
    status = protoc.main(["protoc", "-I", str(tmp_path), f"--python_out={tmp_path}", f"--grpc_python_out={tmp_path}",
                          str(tmp_path / INSTALLED / "podadmission.proto")])
    assert status == 0
    stale = f"{API} is stale: regenerate the stubs (see podadmission.proto)"
    fresh, committed = tmp_path / INSTALLED / "podadmission_pb2.py", ROOT / API / "podadmission_pb2.py"
    assert descriptor(fresh.read_text()) == descriptor(committed.read_text()), stale
    fresh, committed = tmp_path / INSTALLED / "podadmission_pb2_grpc.py", ROOT / API / "podadmission_pb2_grpc.py"
    assert service_code(fresh.read_text()) == service_code(committed.read_text()), stale


def test_the_stale_check_notices_a_changed_proto(tmp_path: Path) -> None:
    protoc = pytest.importorskip("grpc_tools.protoc")
    (tmp_path / INSTALLED).mkdir(parents=True)
    changed = (ROOT / API / "podadmission.proto").read_text().replace("string message = 3;", "string note = 3;")
    (tmp_path / INSTALLED / "podadmission.proto").write_text(changed)
    assert protoc.main(["protoc", "-I", str(tmp_path), f"--python_out={tmp_path}",
                        str(tmp_path / INSTALLED / "podadmission.proto")]) == 0
    assert descriptor((tmp_path / INSTALLED / "podadmission_pb2.py").read_text()) != \
        descriptor((ROOT / API / "podadmission_pb2.py").read_text())
