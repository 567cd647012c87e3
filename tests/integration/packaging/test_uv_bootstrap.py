"""`make uv` (every target's first step) puts uv where a new terminal finds it.

Issue 33 part 1: on a machine without uv, the Makefile installs it where uv's own
installer does (~/.local/bin), so every `uv run …` of the README, the `make dev`
banner and the console works in a new login shell. Each test runs the Makefile's
uv step in a copy of the Makefile and its script, with a temporary HOME and a
PATH without uv, and then asks a clean login shell (`env -i … bash -lc`) for uv.
PyPI gives the wheel (pip's cache is shared, so it is downloaded once).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
DEBIAN_PROFILE = Path("/etc/skel/.profile")


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """The Makefile, its uv script and the files `make -n bootstrap` looks at."""
    copy = tmp_path / "checkout"
    (copy / ".ci").mkdir(parents=True)
    for name in ("Makefile", ".ci/install-uv.sh", "uv.lock", "pyproject.toml", "VERSION"):
        shutil.copy2(ROOT / name, copy / name)
    return copy


@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


def make(checkout: Path, home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``make ARGS`` as on a machine without uv: HOME=home, a system PATH."""
    assert shutil.which("uv", path=SYSTEM_PATH) is None, "this machine has a uv on its PATH"
    base = {
        "HOME": str(home),
        "PATH": SYSTEM_PATH,
        # The uv wheel is downloaded once for every test (pip's own cache, not HOME's).
        "PIP_CACHE_DIR": str(Path.home() / ".cache" / "pip"),
        "TERM": "dumb",
    }
    for key in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "no_proxy", "PIP_CERT"):
        if key in os.environ:
            base[key] = os.environ[key]
    return subprocess.run(
        ["make", "--no-print-directory", *args],
        cwd=checkout,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def login_shell(home: Path, command: str) -> subprocess.CompletedProcess[str]:
    """``command`` in a new terminal: a login shell from a clean environment."""
    return subprocess.run(
        ["env", "-i", f"HOME={home}", "TERM=dumb", f"PATH={SYSTEM_PATH}", "bash", "-lc", command],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_uv_lands_in_local_bin_and_a_new_login_shell_finds_it(checkout: Path, home: Path) -> None:
    first = make(checkout, home, "uv")
    again = make(checkout, home, "uv")

    assert first.returncode == 0, first.stdout + first.stderr
    binary = home / ".local" / "bin" / "uv"
    assert binary.is_file()
    assert os.access(binary, os.X_OK)
    assert (home / ".local" / "bin" / "uvx").is_file()
    # Said once: what it did and how a new terminal gets it.
    assert first.stdout.count("uv was not on PATH: installed uv 0.13.") == 1
    assert "~/.local/bin" in first.stdout
    assert "~/.profile" in first.stdout
    found = login_shell(home, "command -v uv && uv --version && uvx --version")
    assert found.returncode == 0, found.stdout + found.stderr
    assert found.stdout.splitlines()[0] == str(binary)
    # A second run finds it and says nothing; the profile line is there once.
    assert again.returncode == 0
    assert again.stdout == ""
    assert (home / ".profile").read_text().count('. "$HOME/.local/bin/env"') == 1
    # The Makefile's later steps use it.
    planned = make(checkout, home, "-n", "bootstrap")
    assert f"{binary} sync --locked --compile-bytecode" in planned.stdout
    assert not (checkout / ".tools").exists()


@pytest.mark.skipif(not DEBIAN_PROFILE.is_file(), reason="no Debian /etc/skel files here")
def test_with_debian_s_profile_and_bashrc_new_login_and_non_login_terminals_find_it(
    checkout: Path, home: Path
) -> None:
    # Debian's ~/.profile adds ~/.local/bin when it exists at login, but a terminal
    # that is not a login shell keeps the session's PATH: ~/.bashrc must add it too.
    for name in (".profile", ".bashrc"):
        shutil.copy2(DEBIAN_PROFILE.with_name(name), home / name)

    installed = make(checkout, home, "uv")

    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert "~/.profile ~/.bashrc" in installed.stdout
    for name in (".profile", ".bashrc"):
        assert (home / name).read_text().count('. "$HOME/.local/bin/env"') == 1
    assert login_shell(home, "uv --version").returncode == 0
    interactive = subprocess.run(
        [
            "env",
            "-i",
            f"HOME={home}",
            "TERM=dumb",
            f"PATH={SYSTEM_PATH}",
            "bash",
            "-ic",
            "uv --version",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert interactive.returncode == 0, interactive.stdout + interactive.stderr


def test_a_folder_already_on_path_gets_uv_and_no_shell_file_changes(
    checkout: Path, home: Path
) -> None:
    local_bin = home / ".local" / "bin"

    installed = make(checkout, home, "uv", PATH=f"{local_bin}:{SYSTEM_PATH}")

    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert (local_bin / "uv").is_file()
    assert "which is on your PATH" in installed.stdout
    assert sorted(p.name for p in home.iterdir()) == [".local"]
    assert not (local_bin / "env").exists()


def test_uv_no_modify_path_leaves_the_shell_files_alone_and_says_what_to_do(
    checkout: Path, home: Path
) -> None:
    installed = make(checkout, home, "uv", UV_NO_MODIFY_PATH="1")

    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert (home / ".local" / "bin" / "uv").is_file()
    assert not (home / ".profile").exists()
    assert f'export PATH="{home}/.local/bin:$PATH"' in installed.stdout


def test_a_folder_that_cannot_be_written_falls_back_to_tools_with_a_hint(
    checkout: Path, home: Path
) -> None:
    (home / ".local").write_text("a file where the folder would go")

    installed = make(checkout, home, "uv")
    planned = make(checkout, home, "-n", "bootstrap")

    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert (checkout / ".tools" / "bin" / "uv").is_file()
    assert "cannot be written: installed uv 0.13." in installed.stdout
    assert f'export PATH="{checkout}/.tools/bin:$PATH"' in installed.stdout
    assert f"{checkout}/.tools/bin/uv sync --locked" in planned.stdout


def test_a_uv_on_path_is_used_and_nothing_is_installed(
    checkout: Path, home: Path, tmp_path: Path
) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "uv").write_text("#!/bin/sh\necho 'uv 0.13.9 (a uv of its own)'\n")
    (tools / "uv").chmod(0o755)

    done = make(checkout, home, "uv", PATH=f"{tools}:{SYSTEM_PATH}")
    planned = make(checkout, home, "-n", "bootstrap", PATH=f"{tools}:{SYSTEM_PATH}")

    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == ""
    assert list(home.iterdir()) == []
    assert f"{tools}/uv sync --locked" in planned.stdout
