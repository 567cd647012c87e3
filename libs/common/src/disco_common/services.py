"""How an installed disco service makes itself known to the disco tooling.

Each service package publishes one :class:`ServiceManifest` under the entry-point
group :data:`SERVICE_ENTRY_POINT_GROUP` of its ``pyproject.toml``::

    [project.entry-points."disco.services"]
    registry = "disco_registry.main:SERVICE"

``disco db upgrade`` and ``disco dev up`` find the services, their migrations
and their default ports there: nothing lists the services by name. The
migrations' sources sit at the top of the repository (``migrations/<name>/``)
and each service's wheel carries its own inside its package.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["SERVICE_ENTRY_POINT_GROUP", "ServiceManifest"]

SERVICE_ENTRY_POINT_GROUP = "disco.services"
"""The entry-point group every service package publishes its manifest under."""


class ServiceManifest(BaseModel):
    """What the tooling needs to migrate and run one service."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(
        pattern=r"^[a-z][a-z0-9_]{0,30}$",
        description=(
            "The service's name: its Postgres schema, its entry-point name and the "
            "`<NAME>` of its DISCO_<NAME>_PORT and DISCO_<NAME>_URL variables."
        ),
    )
    module: str = Field(
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$",
        description="The module that runs the service: `python -m <module>`.",
    )
    default_port: int = Field(ge=1, le=65535, description="The HTTP port it listens on by default.")
    migrations: str = Field(
        pattern=r"^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z0-9_./-]+$",
        description=(
            "Its Alembic environment as `<package>:<folder>`, a folder of that package "
            "holding env.py, script.py.mako and versions/ (in a checkout, where the "
            "package is installed editable: the repository's migrations/<name>/)."
        ),
    )
    start_order: int = Field(
        default=100,
        ge=0,
        description="Services start in ascending order (then by name) and stop in reverse.",
    )
