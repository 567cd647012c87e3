"""The services installed beside the SDK, found by their package metadata.

Every service package publishes a :class:`~disco_common.services.ServiceManifest`
under the ``disco.services`` entry-point group (see :mod:`disco_common.services`):
its name, the module that runs it, its default port and where its Alembic
environment sits inside the package. Nothing here names a service; a service
installed in the environment is found, one that is not is not.

Loading a manifest imports its service's package: only ``disco db upgrade``
and ``disco dev up`` do, which run or migrate the services anyway.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from importlib.metadata import entry_points
from pathlib import Path

from disco._dev.errors import DevStackError
from disco_common.services import SERVICE_ENTRY_POINT_GROUP, ServiceManifest

__all__ = ["installed_services", "migrations_dir", "select_services"]


def installed_services() -> list[ServiceManifest]:
    """Every installed service, in start order (``start_order``, then name).

    Raises:
        DevStackError: an entry point does not load, is not a manifest, or two
            packages publish one name.
    """
    found: dict[str, ServiceManifest] = {}
    for entry in entry_points(group=SERVICE_ENTRY_POINT_GROUP):
        try:
            manifest = entry.load()
        except Exception as exc:
            raise DevStackError(
                f"the {entry.name!r} service's entry point ({entry.value}) does not load: {exc}"
            ) from exc
        if not isinstance(manifest, ServiceManifest):
            raise DevStackError(
                f"the {entry.name!r} entry point ({entry.value}) of {SERVICE_ENTRY_POINT_GROUP!r} "
                "is not a disco_common.services.ServiceManifest"
            )
        if manifest.name != entry.name:
            raise DevStackError(
                f"the entry point {entry.name!r} ({entry.value}) publishes the service "
                f"{manifest.name!r}: name the entry point after its service"
            )
        if manifest.name in found and found[manifest.name] != manifest:
            raise DevStackError(f"two installed packages publish the service {manifest.name!r}")
        found[manifest.name] = manifest
    return sorted(found.values(), key=lambda service: (service.start_order, service.name))


def select_services(names: Sequence[str] | None = None) -> list[ServiceManifest]:
    """The installed services named in ``names`` (every one when None), in start order.

    Raises:
        DevStackError: a name is not an installed service (the message lists them).
    """
    installed = installed_services()
    if names is None:
        return installed
    known = [service.name for service in installed]
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise DevStackError(
            f"unknown service(s) {unknown}; installed: {known or 'none'} (a service is found "
            f"by the {SERVICE_ENTRY_POINT_GROUP!r} entry point of its package)"
        )
    return [service for service in installed if service.name in names]


def migrations_dir(service: ServiceManifest) -> Path:
    """The folder of ``service``'s Alembic environment, inside its installed package.

    Raises:
        DevStackError: the package has no such folder, or it holds no ``env.py``.
    """
    package, _, folder = service.migrations.partition(":")
    try:
        location = Path(str(resources.files(package).joinpath(folder)))
    except ModuleNotFoundError as exc:
        raise DevStackError(
            f"the {service.name} service's migrations name the package {package!r}, "
            "which is not installed"
        ) from exc
    if not (location / "env.py").is_file():
        raise DevStackError(
            f"no Alembic environment for {service.name}: {location / 'env.py'} is missing "
            f"(its manifest names {service.migrations!r})"
        )
    return location
