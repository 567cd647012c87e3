"""`make k8s-check` renders every overlay and validates it offline; a broken manifest fails it.

Integration-marked (by folder): it installs kubectl with apt when missing and
runs kubernetes-validate through uv, which takes seconds, not milliseconds.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CHECK = ROOT / "deploy" / "k8s" / "check.sh"


def _can_get_kubectl() -> bool:
    if shutil.which("kubectl"):
        return True
    return shutil.which("apt-get") is not None and os.geteuid() == 0


pytestmark = pytest.mark.skipif(
    not _can_get_kubectl(),
    reason="kubectl is not installed and apt-get (as root) is not available to install it",
)


def _check(k8s_dir: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if k8s_dir is not None:
        env["K8S_DIR"] = str(k8s_dir)
    env.setdefault("UV", shutil.which("uv") or "uv")
    return subprocess.run(
        ["bash", str(CHECK)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )


def _broken_copy(tmp_path: Path, file: str, old: str, new: str) -> Path:
    copy = tmp_path / "k8s"
    shutil.copytree(ROOT / "deploy" / "k8s", copy)
    target = copy / file
    text = target.read_text()
    assert old in text, f"{old!r} is not in {file}"
    target.write_text(text.replace(old, new, 1))
    return copy


def test_make_k8s_check_validates_both_overlays() -> None:
    result = subprocess.run(
        ["make", "--no-print-directory", "k8s-check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "k8s-check: dev:" in result.stdout
    assert "k8s-check: prod:" in result.stdout
    assert "valid against Kubernetes 1.32.0" in result.stdout


def test_a_field_of_the_wrong_type_fails_the_check(tmp_path: Path) -> None:
    broken = _broken_copy(
        tmp_path, "base/registry.yaml", "containerPort: 8081", "containerPort: eighty-one"
    )

    result = _check(broken)

    assert result.returncode == 1
    assert "deployment/disco-registry" in result.stdout + result.stderr
    assert "'eighty-one' is not of type 'integer'" in result.stdout + result.stderr


def test_an_unknown_field_fails_the_check(tmp_path: Path) -> None:
    broken = _broken_copy(
        tmp_path, "base/gateway.yaml", "          readinessProbe:", "          readinesProbe:"
    )

    result = _check(broken)

    assert result.returncode == 1
    assert "disco-gateway" in result.stdout + result.stderr


def test_an_overlay_that_does_not_render_fails_the_check(tmp_path: Path) -> None:
    broken = _broken_copy(
        tmp_path, "overlays/prod/kustomization.yaml", "  - ingress.yaml", "  - nowhere.yaml"
    )

    result = _check(broken)

    assert result.returncode == 1
    assert "prod: kustomize could not render" in result.stderr
