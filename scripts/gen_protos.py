"""Regenerate the Python code for every .proto under protos/ into the `tombstone` package.

The proto directory layout is the Python import path (protos/tombstone/v1/x.proto becomes
tombstone/v1/x_pb2.py), so the generated imports need no rewriting. With --check the code is
generated into a temporary directory and compared with the committed files: stale generated
code fails CI.
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import subprocess
import sys
import tempfile
from importlib import resources
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTOS = ROOT / "protos"
PACKAGE = "tombstone"
INIT_TEXT = '"""Generated protobuf code. Do not edit: run `make gen-protos`."""\n'


def generate(out: Path) -> None:
    sources = sorted(str(p.relative_to(PROTOS)) for p in PROTOS.rglob("*.proto"))
    well_known = resources.files("grpc_tools") / "_proto"
    # The mypy-protobuf plugins sit next to this interpreter, which may not be on PATH.
    bindir = Path(sys.executable).parent
    cmd = [
        sys.executable,
        "-m",
        "grpc_tools.protoc",
        f"-I{PROTOS}",
        f"-I{well_known}",
        f"--python_out={out}",
        f"--grpc_python_out={out}",
        f"--plugin=protoc-gen-mypy={bindir / 'protoc-gen-mypy'}",
        f"--plugin=protoc-gen-mypy_grpc={bindir / 'protoc-gen-mypy_grpc'}",
        f"--mypy_out={out}",
        f"--mypy_grpc_out={out}",
        *sources,
    ]
    subprocess.run(cmd, check=True, cwd=PROTOS)
    for directory in [out / PACKAGE, *(p for p in (out / PACKAGE).rglob("*") if p.is_dir())]:
        (directory / "__init__.py").write_text(INIT_TEXT)
    (out / PACKAGE / "py.typed").touch()


def differences(a: Path, b: Path) -> list[str]:
    found: list[str] = []
    cmp = filecmp.dircmp(a, b, ignore=["__pycache__"])
    found += [f"only in committed: {a / n}" for n in cmp.left_only]
    found += [f"missing from committed: {n}" for n in cmp.right_only]
    for name in cmp.common_files:
        if (a / name).read_bytes() != (b / name).read_bytes():
            found.append(f"stale: {a / name}")
    for sub in cmp.common_dirs:
        found += differences(a / sub, b / sub)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if committed code is stale")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        generate(out)
        if args.check:
            stale = differences(ROOT / PACKAGE, out / PACKAGE)
            for line in stale:
                print(line, file=sys.stderr)
            if stale:
                print("generated code is stale: run `make gen-protos`", file=sys.stderr)
                return 1
            print("generated protobuf code is up to date")
            return 0
        shutil.rmtree(ROOT / PACKAGE, ignore_errors=True)
        shutil.copytree(out / PACKAGE, ROOT / PACKAGE)
    print(f"generated {PACKAGE}/ from {PROTOS.relative_to(ROOT)}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
