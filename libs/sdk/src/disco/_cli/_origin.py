"""Where the running ``disco`` came from: a checkout, wheel files, or a package index.

``disco new`` makes a project that takes disco-sdk and disco-common from the same
place, never from a package index by name alone (nobody publishes ``disco-sdk``
yet; a package of that name on an index would not be disco's). The installer
records the place in each distribution's ``direct_url.json`` (PEP 610): an
editable folder (this repository, installed by ``uv sync``), a wheel or sdist
file (``pip install dist/disco_sdk-….whl``), or a URL; a distribution without
one came from an index.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from importlib.metadata import Distribution, PackageNotFoundError, distribution
from pathlib import Path
from urllib.parse import unquote, urlparse

__all__ = ["DiscoOrigin", "OriginError", "OriginKind", "Source", "running_disco"]


class OriginError(Exception):
    """The running disco's origin cannot be given to a new project."""


class OriginKind(StrEnum):
    """Where the running disco was installed from."""

    FOLDER = "folder"
    """A source folder: a disco checkout (editable, as ``uv sync`` installs it) or a copy."""
    FILE = "file"
    """Wheel or sdist files (``make dist`` builds them)."""
    URL = "url"
    """Files at a URL."""
    INDEX = "index"
    """A package index (a published release)."""


@dataclass(frozen=True)
class Source:
    """Where one distribution of the running disco came from."""

    name: str
    """The distribution: ``disco-sdk`` or ``disco-common``."""
    location: str
    """A local path (folder or file), or a URL; empty for an index."""
    editable: bool = False


@dataclass(frozen=True)
class DiscoOrigin:
    """Where the running disco-sdk and disco-common were installed from."""

    kind: OriginKind
    version: str
    """disco-sdk's version (disco-common's is the same: one version for all)."""
    sources: tuple[Source, ...]
    """disco-sdk then disco-common; empty for an index."""

    @property
    def checkout(self) -> Path | None:
        """The disco checkout the sources sit in (``<root>/libs/sdk``), if a folder."""
        if self.kind is not OriginKind.FOLDER:
            return None
        sdk = Path(self.sources[0].location)
        return sdk.parents[1] if sdk.parent.name == "libs" else None


def _direct_url(dist: Distribution) -> dict[str, object] | None:
    text = dist.read_text("direct_url.json")
    if not text:
        return None
    try:
        loaded = json.loads(text)
    except json.JSONDecodeError:
        return None
    return loaded if isinstance(loaded, dict) else None


def _local_path(url: str) -> Path | None:
    parsed = urlparse(url)
    return Path(unquote(parsed.path)) if parsed.scheme == "file" else None


def _sibling_file(sdk_file: Path, name: str, version: str) -> Path | None:
    """``name``'s wheel (else sdist) of ``version`` in the folder of disco-sdk's file."""
    stem = f"{name.replace('-', '_')}-{version}"
    for pattern in (f"{stem}-*.whl", f"{stem}.tar.gz"):
        found = sorted(sdk_file.parent.glob(pattern))
        if found:
            return found[0]
    return None


def _source(dist: Distribution, name: str, sdk: Source | None, version: str) -> Source:
    recorded = _direct_url(dist)
    url = recorded.get("url") if recorded is not None else None
    if not isinstance(url, str):
        if sdk is None:
            return Source(name, "")  # from an index
        # disco-common from an index or a --find-links folder: its file beside disco-sdk's.
        sdk_path = Path(sdk.location)
        found = _sibling_file(sdk_path, name, version) if sdk_path.is_file() else None
        if found is None:
            raise OriginError(
                f"disco-sdk was installed from {sdk.location}, but {name} {version} was not "
                "installed from a file and none lies beside it: install both wheels "
                "(`pip install dist/disco_sdk-*.whl dist/disco_common-*.whl`)"
            )
        return Source(name, str(found))
    local = _local_path(url)
    if local is None:
        return Source(name, url)
    if not local.exists():
        raise OriginError(
            f"{name} was installed from {local}, which is gone: rebuild it (`make dist` in a "
            "disco checkout) or install disco again, then run `disco new` again"
        )
    dir_info = recorded.get("dir_info") if recorded is not None else None
    editable = isinstance(dir_info, dict) and bool(dir_info.get("editable"))
    return Source(name, str(local), editable=editable)


def running_disco(find: Callable[[str], Distribution] = distribution) -> DiscoOrigin:
    """Where the running disco-sdk and disco-common were installed from.

    Args:
        find: looks a distribution up by name (``importlib.metadata.distribution``).

    Raises:
        OriginError: disco-sdk or disco-common is not installed as a distribution,
            or the files they were installed from are gone.
    """
    try:
        sdk_dist = find("disco-sdk")
        common_dist = find("disco-common")
    except PackageNotFoundError as exc:
        raise OriginError(f"{exc} is not installed as a package: install disco") from exc
    version = sdk_dist.version
    sdk = _source(sdk_dist, "disco-sdk", None, version)
    if not sdk.location:
        return DiscoOrigin(OriginKind.INDEX, version, ())
    common = _source(common_dist, "disco-common", sdk, version)
    if "://" in sdk.location:
        kind = OriginKind.URL
    else:
        kind = OriginKind.FOLDER if Path(sdk.location).is_dir() else OriginKind.FILE
    return DiscoOrigin(kind, version, (sdk, common))
