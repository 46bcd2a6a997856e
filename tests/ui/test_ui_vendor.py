"""The vendored JavaScript is the reviewed, pinned files VENDORED.md lists (hash, licence beside each), and the
page loads nothing else: no URL to another host anywhere in the page or app code."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from saddler.ui import page

STATIC = Path(page.__file__).parent / "static"
VENDOR = STATIC / "vendor"


def test_vendored_files_match_the_pinned_hashes_with_their_licences() -> None:
    table = (VENDOR / "VENDORED.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([\w.-]+\.js)` \|.*\| `([0-9a-f]{64})` \|$", table, re.M)
    assert {name for name, _ in rows} == {p.name for p in VENDOR.glob("*.js")}
    assert {f"vendor/{name}" for name, _ in rows} <= set(page.SCRIPTS)
    for name, sha in rows:
        assert hashlib.sha256((VENDOR / name).read_bytes()).hexdigest() == sha, name
    for lib in ("cytoscape", "cytoscape-dagre", "dagre"):
        assert "MIT" in (VENDOR / f"LICENSE.{lib}").read_text(encoding="utf-8")
        assert (VENDOR / f"LICENSE.{lib}").stat().st_size > 500


def test_no_source_map_or_remote_url_is_loaded() -> None:
    for path in VENDOR.glob("*.js"):
        assert "sourceMappingURL" not in path.read_text(encoding="utf-8"), path.name
    own = "\n".join((STATIC / name).read_text(encoding="utf-8") for name in ("index.html", "app.js", "app.css"))
    assert not re.search(r"https?://", own)
    assert not re.search(r"@import|url\(", own)
