"""The wheel's metadata: the MIT licence file it names, classifiers and project URLs."""

from __future__ import annotations

import email
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_wheel_carries_the_licence_classifiers_and_urls(tmp_path: Path) -> None:
    build = ["pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path)]
    subprocess.run(
        [sys.executable, "-m", *build, str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    wheel = next(tmp_path.glob("relay_runtime-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (metadata_name,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = email.message_from_bytes(archive.read(metadata_name))
        (licence_name,) = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        licence = archive.read(licence_name).decode("utf-8")
    assert metadata["License-Expression"] == "MIT"
    assert metadata.get_all("License-File") == ["LICENSE"]
    assert licence.startswith("MIT License\n") and licence == (ROOT / "LICENSE").read_text()
    classifiers = metadata.get_all("Classifier")
    assert "Programming Language :: Python :: 3.11" in classifiers
    assert "Typing :: Typed" in classifiers
    urls = dict(url.split(", ", 1) for url in metadata.get_all("Project-URL"))
    assert {"Homepage", "Documentation", "Source", "Issues"} <= set(urls)
