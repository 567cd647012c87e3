"""``disco plans``: the state machine ``show`` draws (each move with its event and, when it
has one, the condition that picks it among the moves on that event), and which planners
``list`` says are not running; ``disco status``'s live agents. The registry is a stand-in
HTTP server answering ``GET /v1/agents``."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from pydantic import SecretStr
from rich.console import Console

from disco._cli.plans import _machine, _planners_down
from disco._dev.ports import free_port
from disco._dev.status import live_agents
from disco.auth import DEV_AUTH_SECRET
from disco.clients import RegistryClient, ServiceClientSettings
from disco_common.plans import PlanDefinition, PlanStatus, StateConfig, StateTransition
from disco_common.tracker import PlanProgress, PlanTypeRecord, PlanView

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
TRIP = PlanDefinition(
    plan_type="trip",
    initial_state="searching",
    states=[
        StateConfig(
            state_name="searching",
            transitions=[
                StateTransition(on_event="found", to_state="failed", condition="!success"),
                StateTransition(on_event="found", to_state="done"),
            ],
        ),
        StateConfig(state_name="done", is_terminal=True),
        StateConfig(state_name="failed", is_terminal=True, is_failure=True),
    ],
)


def test_a_conditional_move_shows_its_condition_beside_its_event() -> None:
    view = PlanView(
        plan=PlanProgress(
            plan_id="p-1", status=PlanStatus.RUNNING, current_state="searching", updated_at=NOW
        ),
        definition=PlanTypeRecord(
            plan_type="trip", version="1.0.0", definition=TRIP, content_hash="h", created_at=NOW
        ),
    )
    console = Console(width=200, record=True)

    panel = _machine(view)
    assert panel is not None
    console.print(panel)
    text = console.export_text()

    assert "found [!success] → failed; found → done" in text
    assert "failed   (end, failed)" in text


def _agent(
    name: str, status: str, instances: int, agent_id: str | None = None
) -> dict[str, object]:
    at = NOW.isoformat()
    return {
        "agent_id": agent_id or f"{name}.1", "tenant_id": "acme", "name": name,
        "version": "1.0.0", "ttl_seconds": 30, "status": status, "registered_at": at,
        "updated_at": at, "last_heartbeat_at": at, "expires_at": at,
        "live_instances": instances,
    }  # fmt: skip


@pytest.fixture
def registry() -> Iterator[str]:
    """A registry answering ``GET /v1/agents`` with one live planner and one expired."""
    body = json.dumps(
        {
            "items": [
                _agent("trip-planner", "live", 2),
                _agent("gone-planner", "expired", 0),
                _agent("trip-planner", "live", 1, "trip-planner.2"),
            ]
        }
    ).encode()

    class Agents(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path.startswith("/v1/agents") else 404)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Agents)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _settings(registry_url: str) -> ServiceClientSettings:
    return ServiceClientSettings(
        registry_url=registry_url, auth_secret=SecretStr(DEV_AUTH_SECRET), tenant_id="acme"
    )


def _plan(plan_id: str, status: PlanStatus, planner: str) -> PlanProgress:
    return PlanProgress(plan_id=plan_id, status=status, agent_name=planner, updated_at=NOW)


async def test_list_names_the_planners_of_unfinished_plans_with_no_live_registration(
    registry: str,
) -> None:
    plans = [
        _plan("p-1", PlanStatus.RUNNING, "trip-planner"),
        _plan("p-2", PlanStatus.PAUSED, "gone-planner"),
        _plan("p-3", PlanStatus.COMPLETED, "old-planner"),
    ]

    assert await _planners_down(plans, _settings(registry)) == {"gone-planner"}


async def test_when_the_registry_cannot_be_reached_no_planner_is_named() -> None:
    plans = [_plan("p-1", PlanStatus.RUNNING, "gone-planner")]

    assert await _planners_down(plans, _settings(f"http://127.0.0.1:{free_port()}")) == set()


async def test_status_lists_the_live_agents_by_name_with_their_instances(registry: str) -> None:
    lines = await live_agents(_settings(registry), 5)

    assert [(line.name, line.instances, line.last_heard) for line in lines] == [
        ("trip-planner", 3, NOW)
    ]


async def test_live_agent_names_gives_up_past_the_registrations_it_may_look_at(
    registry: str,
) -> None:
    settings = _settings(registry)
    async with RegistryClient(registry, token=settings.token_provider(), retries=0) as client:
        assert await client.live_agent_names(at_most=10) == {"trip-planner"}
        assert await client.live_agent_names(at_most=2) is None  # 3 registrations listed
