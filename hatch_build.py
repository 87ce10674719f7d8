"""Build hook: the package index's README (``readme`` is dynamic in pyproject.toml).

The index shows README.md outside the repository, where a relative link such as
``docs/reviews.md`` leads nowhere. This hook gives the index the same text with every relative
link made absolute under ``[project.urls] Source`` (``<Source>/blob/v<version>/<path>``), or,
when no ``Source`` URL is configured, written as plain text naming the file in the source
distribution. The checkout's README.md is unchanged.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hatchling.metadata.plugin.interface import MetadataHookInterface

_LINK = re.compile(r"\[([^\]]+)\]\((?!https?://|mailto:|#)([^)\s]+)\)")


def index_readme(text: str, source: str | None, version: str) -> str:
    """``text`` with every relative markdown link made absolute (or plain text without ``source``)."""

    def fix(m: re.Match[str]) -> str:
        label, target = m.group(1), m.group(2)
        if source:
            kind = "tree" if target.endswith("/") else "blob"
            return f"[{label}]({source.rstrip('/')}/{kind}/v{version}/{target})"
        if label.strip("`").rstrip("/") == target.rstrip("/"):
            return f"{label} (in the sdist)"
        return f"{label} (`{target}` in the sdist)"

    return _LINK.sub(fix, text)


class CustomMetadataHook(MetadataHookInterface):
    """Sets ``readme`` from README.md for the package index (module docstring)."""

    def update(self, metadata: dict[str, Any]) -> None:
        text = (Path(self.root) / "README.md").read_text(encoding="utf-8")
        source = (metadata.get("urls") or {}).get("Source")
        metadata["readme"] = {"content-type": "text/markdown",
                              "text": index_readme(text, source, str(metadata["version"]))}
