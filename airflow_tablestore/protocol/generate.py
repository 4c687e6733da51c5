"""Regenerate the committed ``*_pb2.py`` modules from the ``.proto`` files (``make proto``).

The generated modules are post-processed to drop protoc's runtime-version guard: the builder API they use is
the same from protobuf 5.29 through 7.x, while the guard would refuse runtimes two major versions apart. A test
(tests/protocol/test_generated.py) regenerates into a temporary directory and fails if the committed files are
stale.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

PROTO_FILES = ("ots_filter.proto", "ots_table.proto", "ots_tunnel.proto")
PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent.parent

_GUARD = re.compile(
    r"^from google\.protobuf import runtime_version as _runtime_version\n"
    r"|^_runtime_version\.ValidateProtobufRuntimeVersion\(\n(?:.*\n)*?\)\n",
    re.MULTILINE,
)
_VERSION_COMMENT = re.compile(r"^# Protobuf Python Version: .*\n", re.MULTILINE)


def generate(out_dir: Path) -> list[Path]:
    """Run protoc into ``out_dir`` (mirroring the package path) and return the generated files."""
    from grpc_tools import protoc  # test-only dependency

    args = ["protoc", f"-I{REPO_ROOT}", f"--python_out={out_dir}"]
    args += [str(PACKAGE_DIR.relative_to(REPO_ROOT) / name) for name in PROTO_FILES]
    if protoc.main(args) != 0:
        raise RuntimeError("protoc failed")
    produced = []
    for name in PROTO_FILES:
        path = out_dir / PACKAGE_DIR.relative_to(REPO_ROOT) / name.replace(".proto", "_pb2.py")
        text = _VERSION_COMMENT.sub("", _GUARD.sub("", path.read_text()))
        path.write_text(text)
        produced.append(path)
    return produced


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        for path in generate(Path(tmp)):
            target = PACKAGE_DIR / path.name
            target.write_text(path.read_text())
            print(f"wrote {target.relative_to(REPO_ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
