"""Package the reconciler for `spark-submit`: a zip of the project's packages for `--py-files`
and the driver script that runs the `tombstone` CLI.

    .venv/bin/python scripts/dist_spark.py [--out dist]
    spark-submit --py-files dist/tombstone-spark.zip dist/tombstone_reconcile.py reconcile ...
"""

from __future__ import annotations

import argparse
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("services", "tombstone")
ZIP_NAME = "tombstone-spark.zip"
MAIN_NAME = "tombstone_reconcile.py"
MAIN_TEXT = '''"""spark-submit driver: the `tombstone` CLI (`reconcile run ... --master submit`)."""

from services.cli import cli

if __name__ == "__main__":
    cli(prog_name="tombstone")
'''


def build(out: Path) -> tuple[Path, Path]:
    """Write the zip and the driver script into `out`; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    archive = out / ZIP_NAME
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for package in PACKAGES:
            for path in sorted((ROOT / package).rglob("*")):
                if (
                    path.is_file()
                    and "__pycache__" not in path.parts
                    and path.suffix
                    in (
                        ".py",
                        ".pyi",
                        ".typed",
                    )
                ):
                    zf.write(path, path.relative_to(ROOT).as_posix())
    main = out / MAIN_NAME
    main.write_text(MAIN_TEXT)
    return archive, main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "dist")
    archive, script = build(parser.parse_args().out)
    print(f"{archive}\n{script}")


if __name__ == "__main__":
    main()
