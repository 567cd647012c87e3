"""Build hook: the service's Alembic environment goes into its sdist and its wheel.

The sources sit at the top of the repository (``migrations/<service>/``, see
migrations/README.md); ``disco db upgrade`` finds them inside the installed
package (``<package>/migrations``). Built from the repository, both the sdist
(as ``src/<package>/migrations``) and the wheel (as ``<package>/migrations``)
take them from there; a wheel built from the sdist finds them in the package
already. An editable install takes nothing: disco reads the checkout's folder.

Each service has this same file: hatchling loads a build hook from the project's
own folder, and an sdist must build its wheel without the repository around it.
The service's ``pyproject.toml`` names the folder and the package:

    [tool.hatch.build.hooks.custom]
    migrations = "../../migrations/<service>"
    package = "disco_<service>"
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class MigrationsHook(BuildHookInterface):
    """Force-include the repository's ``migrations/<service>/`` into the package."""

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version == "editable":
            return
        package = str(self.config["package"])
        root = Path(self.root)
        if (root / "src" / package / "migrations" / "env.py").is_file():
            return  # built from the sdist: the package holds them already
        source = (root / str(self.config["migrations"])).resolve()
        if not (source / "env.py").is_file():
            raise FileNotFoundError(
                f"{package}: no Alembic environment at {source} (nor inside the package): "
                "build from a disco checkout or from the service's sdist"
            )
        inside = f"{package}/migrations"
        build_data["force_include"][str(source)] = (
            inside if self.target_name == "wheel" else f"src/{inside}"
        )
