"""An installed wheel carries the playground: its files are package data (feedfabric/playground, a
symlink to graphql-playground/ in the repository), so `/playground` does not need a checkout."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from feedfabric.http.playground import PLAYGROUND_DIR

ROOT = Path(__file__).resolve().parents[2]


def test_the_playground_is_found_inside_the_package() -> None:
    assert PLAYGROUND_DIR.parent.name == "feedfabric"
    assert (PLAYGROUND_DIR / "index.html").is_file()


def test_a_built_wheel_holds_every_playground_file(tmp_path: Path) -> None:
    # A copy of what the build reads, so the build leaves nothing in the checkout.
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for name in ("feedfabric", "graphql-playground"):
        shutil.copytree(ROOT / name, source / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "wheel"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), str(source)],
        check=True,
        capture_output=True,
    )
    (wheel,) = out.glob("feedfabric-*.whl")
    shipped = {name for name in zipfile.ZipFile(wheel).namelist() if name.startswith("feedfabric/playground/")}
    expected = {
        f"feedfabric/playground/{path.relative_to(ROOT / 'graphql-playground').as_posix()}"
        for path in (ROOT / "graphql-playground").rglob("*")
        if path.is_file()
    }
    assert "feedfabric/playground/index.html" in expected
    assert shipped == expected
