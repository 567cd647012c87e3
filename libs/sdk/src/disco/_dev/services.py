"""The services installed beside the SDK, found by their package metadata.

Every service package publishes a :class:`~disco_common.services.ServiceManifest`
under the ``disco.services`` entry-point group (see :mod:`disco_common.services`):
its name, the module that runs it, its default port and where its Alembic
environment sits inside the package. Nothing here names a service; a service
installed in the environment is found, one that is not is not.

The migrations' sources live at the top of the repository (``migrations/<service>/``);
each service's wheel carries its own inside the package (its build hook puts them
there), so an installed wheel or the container image finds them in the package,
and a checkout (the packages installed editable) finds them at the top.

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
    """The folder of ``service``'s Alembic environment.

    Inside its installed package (a wheel, the container image), else, for a
    package installed editable from a checkout, the checkout's
    ``migrations/<service>/`` (the folder of the repository that holds the
    package's source).

    Raises:
        DevStackError: the package is not installed, or neither place holds an ``env.py``.
    """
    package, _, folder = service.migrations.partition(":")
    try:
        location = Path(str(resources.files(package).joinpath(folder)))
    except ModuleNotFoundError as exc:
        raise DevStackError(
            f"the {service.name} service's migrations name the package {package!r}, "
            "which is not installed"
        ) from exc
    if (location / "env.py").is_file():
        return location
    checkout = _checkout_migrations(location.parent, service.name)
    if checkout is not None:
        return checkout
    raise DevStackError(
        f"no Alembic environment for {service.name}: {location / 'env.py'} is missing "
        f"(its manifest names {service.migrations!r}), and no migrations/{service.name}/env.py "
        "sits above the package (a checkout). A wheel built from the service's source or "
        "sdist carries it: rebuild it (`make dist`) or reinstall the package"
    )


def _checkout_migrations(package_dir: Path, name: str) -> Path | None:
    """``migrations/<name>/`` of the checkout holding ``package_dir``, if any.

    A package installed editable runs from ``services/<svc>/src/<package>/`` of a
    checkout: the nearest folder above it with a ``migrations/<name>/env.py``
    is the checkout's root. An installed package (site-packages) has none.
    """
    for folder in package_dir.parents:
        candidate = folder / "migrations" / name
        if (candidate / "env.py").is_file():
            return candidate
    return None
