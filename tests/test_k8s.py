"""deploy/k8s agrees with the code and with what the issue asks of a deployment.

The overlays are rendered with `kubectl kustomize` (schema validation is
`make k8s-check`'s job, in tests/integration/deploy); these tests read the
rendered objects: every DISCO_* name is a real setting, the services have
probes on real routes, resources, PDBs, HPAs and a locked-down securityContext,
migrations run before the services, and only the gateway takes outside traffic.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from disco.clients import ServiceClientSettings
from disco.settings import BusSettings
from disco_gateway import GatewaySettings
from disco_memory import MemorySettings
from disco_registry import RegistrySettings
from disco_service import settings_env_vars
from disco_tracker import TrackerSettings

ROOT = Path(__file__).resolve().parents[1]
OVERLAYS = ["dev", "prod"]
SERVICES = {
    "registry": RegistrySettings,
    "memory": MemorySettings,
    "tracker": TrackerSettings,
    "gateway": GatewaySettings,
}

pytestmark = pytest.mark.skipif(
    shutil.which("kubectl") is None,
    reason="kubectl is not installed (`make k8s-check` installs it)",
)


@cache
def rendered(overlay: str) -> tuple[dict[str, Any], ...]:
    out = subprocess.run(
        ["kubectl", "kustomize", str(ROOT / "deploy" / "k8s" / "overlays" / overlay)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return tuple(doc for doc in yaml.safe_load_all(out) if doc)


def objects(overlay: str, kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in rendered(overlay) if o["kind"] == kind}


def pod(overlay: str, kind: str, name: str) -> dict[str, Any]:
    spec: dict[str, Any] = objects(overlay, kind)[name]["spec"]["template"]["spec"]
    return spec


def _unhashed(name: str) -> str:
    """A generated Secret's name without the content hash kustomize appends."""
    return re.sub(r"-[a-z0-9]{10}$", "", name)


def _known_variables() -> set[str]:
    names: set[str] = set()
    for settings_cls in (*SERVICES.values(), BusSettings, ServiceClientSettings):
        names |= set(settings_env_vars(settings_cls))
    return names


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_config_map_sets_only_real_settings_with_values_they_accept(
    overlay: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = objects(overlay, "ConfigMap")["disco-config"]["data"]
    unknown = sorted(set(data) - _known_variables())
    assert unknown == [], f"{overlay}: variables no setting reads: {unknown}"
    # Each service builds its settings from the map (+ the secrets' stand-ins).
    for key, value in data.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("DISCO_DATABASE_URL", "postgresql://disco_app:s3cr3t-Pw@db:5432/disco")
    if data.get("DISCO_KAFKA_SECURITY_PROTOCOL", "").startswith("SASL_"):
        monkeypatch.setenv("DISCO_KAFKA_SASL_PASSWORD", "from-the-secret")
    monkeypatch.setattr("ssl.SSLContext.load_verify_locations", lambda *a, **k: None)
    for name, settings_cls in SERVICES.items():
        settings = settings_cls()
        assert settings.host == "0.0.0.0", name  # noqa: S104 - inside a pod
    assert (data["DISCO_ENV"] == "production") == (overlay == "prod")


@pytest.mark.parametrize("overlay", OVERLAYS)
@pytest.mark.parametrize("name", list(SERVICES))
def test_each_service_has_probes_resources_and_a_locked_down_security_context(
    overlay: str, name: str
) -> None:
    spec = pod(overlay, "Deployment", f"disco-{name}")
    [container] = spec["containers"]
    assert container["command"] == ["python", "-m", f"disco_{name}"]
    port = SERVICES[name].model_fields["port"].default
    assert container["ports"][0] == {"name": "http", "containerPort": port}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert {"cpu", "memory"} <= set(container["resources"]["requests"])
    assert {"cpu", "memory"} <= set(container["resources"]["limits"])
    for c in [*spec["initContainers"], container]:
        security = c["securityContext"]
        assert security["allowPrivilegeEscalation"] is False
        assert security["readOnlyRootFilesystem"] is True
        assert security["capabilities"]["drop"] == ["ALL"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] == 10001  # the Dockerfile's user
    assert spec["serviceAccountName"] == "disco"
    assert spec["automountServiceAccountToken"] is False
    env = {e["name"]: e for e in container["env"]}
    secret = env["DISCO_DATABASE_URL"]["valueFrom"]["secretKeyRef"]["name"]
    assert _unhashed(secret) == "disco-secrets"
    assert "DISCO_DATABASE_ADMIN_URL" not in env  # owner credentials only in the Job


@pytest.mark.parametrize("overlay", OVERLAYS)
@pytest.mark.parametrize("name", list(SERVICES))
def test_each_service_has_a_pdb_and_an_hpa_on_its_deployment(overlay: str, name: str) -> None:
    deployment = objects(overlay, "Deployment")[f"disco-{name}"]
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert objects(overlay, "PodDisruptionBudget")[f"disco-{name}"]["spec"]["selector"] == {
        "matchLabels": selector
    }
    hpa = objects(overlay, "HorizontalPodAutoscaler")[f"disco-{name}"]["spec"]
    assert hpa["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": f"disco-{name}",
    }
    assert 1 <= hpa["minReplicas"] <= hpa["maxReplicas"]
    assert deployment["spec"]["replicas"] == hpa["minReplicas"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_migration_job_migrates_each_service_with_its_own_image_before_they_start(
    overlay: str,
) -> None:
    job = objects(overlay, "Job")["disco-migrate"]["spec"]["template"]["spec"]
    steps = [*job["initContainers"], *job["containers"]]
    assert [step["command"][-1] for step in steps] == list(SERVICES)
    images = objects(overlay, "Deployment")
    for step, name in zip(steps, SERVICES, strict=True):
        assert step["command"] == ["disco", "db", "upgrade", "--service", name]
        service_image = images[f"disco-{name}"]["spec"]["template"]["spec"]["containers"][0]
        assert step["image"] == service_image["image"]
        [source] = step["envFrom"]
        assert _unhashed(source["secretRef"]["name"]) == "disco-migrate"
    # Each service's pod waits for its schema before it starts.
    for name in SERVICES:
        [wait] = pod(overlay, "Deployment", f"disco-{name}")["initContainers"]
        assert wait["command"][:5] == ["disco", "db", "wait", "--service", name]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_only_the_memory_image_is_the_one_with_the_embedding_model(overlay: str) -> None:
    images = {
        name: pod(overlay, "Deployment", f"disco-{name}")["containers"][0]["image"]
        for name in SERVICES
    }
    assert len(set(images.values())) == 4
    assert all(name in image for name, image in images.items())


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_only_the_gateway_takes_traffic_from_outside_disco(overlay: str) -> None:
    policies = objects(overlay, "NetworkPolicy")
    deny = policies["disco-default-deny-ingress"]["spec"]
    assert deny["podSelector"] == {"matchLabels": {"app.kubernetes.io/part-of": "disco"}}
    assert "ingress" not in deny
    open_to_all = [
        name
        for name, policy in policies.items()
        for rule in policy["spec"].get("ingress", [])
        if "from" not in rule
    ]
    assert open_to_all == ["disco-gateway-public"]
    assert policies["disco-gateway-public"]["spec"]["podSelector"] == {
        "matchLabels": {"app.kubernetes.io/name": "disco-gateway"}
    }
    internal = policies["disco-internal-services"]["spec"]
    assert internal["podSelector"]["matchExpressions"][0]["values"] == [
        "disco-registry",
        "disco-memory",
        "disco-tracker",
    ]
    # Every disco pod carries the label the policies select on.
    for kind in ("Deployment", "Job"):
        for name, obj in objects(overlay, kind).items():
            labels = obj["spec"]["template"]["metadata"]["labels"]
            assert labels["app.kubernetes.io/part-of"] == "disco", name


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_gateway_serves_the_grpc_binding_on_a_port_the_policies_open(overlay: str) -> None:
    [container] = pod(overlay, "Deployment", "disco-gateway")["containers"]
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    config = objects(overlay, "ConfigMap")["disco-config"]["data"]
    service = objects(overlay, "Service")["disco-gateway"]["spec"]
    public = objects(overlay, "NetworkPolicy")["disco-gateway-public"]["spec"]

    assert ports == {"http": 8080, "grpc": int(config["DISCO_GATEWAY_GRPC_PORT"])}
    assert {"name": "grpc", "port": 8090, "targetPort": "grpc", "appProtocol": "grpc"} in (
        service["ports"]
    )
    assert [port["port"] for port in public["ingress"][0]["ports"]] == ["http", "grpc"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_example_agent_scales_as_one_consumer_group_and_serves_metrics(
    overlay: str,
) -> None:
    spec = pod(overlay, "Deployment", "disco-agent-hello")
    [container] = spec["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["DISCO_METRICS_PORT"] == "9464"
    assert env["DISCO_METRICS_HOST"] == "0.0.0.0"  # noqa: S104 - inside a pod
    assert set(env) - {"DISCO_KAFKA_SASL_PASSWORD"} <= _known_variables()
    hpa = objects(overlay, "HorizontalPodAutoscaler")["disco-agent-hello"]["spec"]
    [metric] = hpa["metrics"]
    assert metric["external"]["metric"]["name"] == "disco_bus_consumer_lag"
    assert hpa["minReplicas"] == 1


def test_prod_uses_sasl_ssl_jwks_and_names_its_external_kafka() -> None:
    data = objects("prod", "ConfigMap")["disco-config"]["data"]
    assert data["DISCO_KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL"
    assert data["DISCO_AUTH_JWKS_URL"].startswith("https://")
    assert "example.internal" in data["DISCO_KAFKA_BOOTSTRAP"]
    assert objects("prod", "Secret") == {}  # secrets are made outside git
    ingresses = objects("prod", "Ingress")
    ingress = ingresses["disco-gateway"]["spec"]
    backend = ingress["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend["name"] == "disco-gateway"
    # The gRPC binding on a host of its own, the one its cards name.
    grpc_ingress = ingresses["disco-gateway-grpc"]
    annotations = grpc_ingress["metadata"]["annotations"]
    assert annotations["nginx.ingress.kubernetes.io/backend-protocol"] == "GRPC"
    grpc_rule = grpc_ingress["spec"]["rules"][0]
    assert grpc_rule["http"]["paths"][0]["backend"]["service"] == {
        "name": "disco-gateway",
        "port": {"name": "grpc"},
    }
    assert data["DISCO_GATEWAY_GRPC_PUBLIC_ADDRESS"] == f"{grpc_rule['host']}:443"
    for name in SERVICES:
        mounts = pod("prod", "Deployment", f"disco-{name}")["containers"][0]["volumeMounts"]
        assert {"name": "kafka-ca", "mountPath": "/etc/disco/kafka-ca", "readOnly": True} in mounts
