"""Browser assets (GraphiQL, charts) served from the package, so pages work with no internet.

The files come from the npm registry at install time (`make` runs `python -m feedfabric.ops.vendor`),
pinned by exact version and checked against the sha512 integrity in `vendor.json`; nothing is
fetched while the API runs. They land in `static/vendor/<package>/<file>`, which git ignores.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["STATIC", "locked"]

HERE = Path(__file__).resolve().parent
PACKAGE = HERE.parent
LOCK = HERE / "vendor.json"
STATIC = PACKAGE / "static" / "vendor"


@dataclass(frozen=True)
class Asset:
    package: str
    version: str
    integrity: str
    files: tuple[str, ...]

    @property
    def folder(self) -> Path:
        return STATIC / self.package

    def installed(self) -> bool:
        stamp = self.folder / ".version"
        return (
            stamp.exists()
            and stamp.read_text() == f"{self.version} {self.integrity}"
            and all((self.folder / name).exists() for name in self.files)
        )


def locked() -> list[Asset]:
    entries = json.loads(LOCK.read_text())
    return [Asset(name, entry["version"], entry["integrity"], tuple(entry["files"])) for name, entry in entries.items()]


def integrity_of(tarball: Path) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(tarball.read_bytes()).digest()).decode()


def install(asset: Asset) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        packed = subprocess.run(
            ["npm", "pack", f"{asset.package}@{asset.version}", "--json", "--pack-destination", tmp],
            check=True,
            capture_output=True,
            text=True,
        )
        tarball = Path(tmp) / json.loads(packed.stdout)[0]["filename"]
        got = integrity_of(tarball)
        if got != asset.integrity:
            raise SystemExit(f"{asset.package}@{asset.version}: integrity {got} is not the locked {asset.integrity}")
        if asset.folder.exists():
            shutil.rmtree(asset.folder)
        asset.folder.mkdir(parents=True)
        with tarfile.open(tarball) as archive:
            for name in asset.files:
                member = archive.extractfile(f"package/{name}")
                if member is None:
                    raise SystemExit(f"{asset.package}@{asset.version} has no file {name}")
                target = asset.folder / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(member.read())
        (asset.folder / ".version").write_text(f"{asset.version} {asset.integrity}")


def main() -> None:
    for asset in locked():
        if not asset.installed():
            print(f"vendoring {asset.package}@{asset.version}", file=sys.stderr)
            install(asset)


if __name__ == "__main__":
    main()
