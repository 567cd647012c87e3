"""Publishing for HTTP clients: checked like the SDK checks, then on the bus.

A request on ``action-requests`` must name its ``response_event`` and its
payload must fit the schema registered for its event type (the SDK's
:class:`~disco.registry.PayloadValidator`, asked on behalf of the caller's
tenant). With ``wait`` the gateway waits for the correlated response like
``BusClient.request(wait=...)`` (a group-less reader of the response topic).
"""

from __future__ import annotations

from collections import OrderedDict

from disco.bus import BusClient, CorrelationInUseError, RequestTimeout
from disco.clients import RegistryClient, acting_for
from disco.registry import PayloadValidationError, PayloadValidator
from disco_common.envelope import Envelope, EnvelopeError
from disco_common.ids import new_id
from disco_common.topics import Topic
from disco_gateway.errors import InvalidPayload, NoResponse
from disco_gateway.publish.schemas import Published, PublishRequest
from disco_service import BadRequest, Conflict, Identity, UnprocessableEntity

__all__ = ["Publisher"]

_TENANTS = 1000


class Publisher:
    """The publish bridge (one per instance): validators per tenant, the bus."""

    def __init__(self, bus: BusClient, registry: RegistryClient) -> None:
        self._bus = bus
        self._registry = registry
        self._validators: OrderedDict[str, PayloadValidator] = OrderedDict()

    def _validator(self, tenant_id: str) -> PayloadValidator:
        # One per tenant: a validator caches definitions by event type alone.
        validator = self._validators.get(tenant_id)
        if validator is None:
            validator = self._validators[tenant_id] = PayloadValidator(self._registry)
            while len(self._validators) > _TENANTS:
                self._validators.popitem(last=False)
        self._validators.move_to_end(tenant_id)
        return validator

    async def publish(
        self, identity: Identity, request: PublishRequest, *, wait: float | None
    ) -> Published:
        """Publish ``request`` for ``identity``; with ``wait``, return the response too.

        Raises:
            UnprocessableEntity: no ``response_event`` on a request, or an envelope that
                cannot be built from the fields.
            InvalidPayload: the payload breaks the registered schema (violations listed).
            BadRequest: ``wait`` on a topic nobody answers.
            NoResponse: ``wait`` passed without a response.
            Conflict: ``wait`` with a ``correlation_id`` the tenant's other request still
                waits on.
        """
        tenant_id, user_id = identity.tenant_id, identity.user_id
        if request.topic is Topic.ACTION_REQUESTS:
            if request.response_event is None:
                raise UnprocessableEntity(
                    "a request on action-requests names its response_event (the event type "
                    "the responder answers with)",
                    # The shape of every validation_failed violation (README: HTTP API
                    # conventions), as if the body's model had required the field.
                    details=[
                        {
                            "location": ["body", "response_event"],
                            "message": "Field required on action-requests",
                            "type": "missing",
                        }
                    ],
                )
            with acting_for(tenant_id, user_id):
                try:
                    await self._validator(tenant_id).validate(request.event_type, request.data)
                except PayloadValidationError as exc:
                    raise InvalidPayload(
                        str(exc).split("\n", 1)[0],
                        details=[v.model_dump(mode="json") for v in exc.violations],
                    ) from None
        elif wait is not None:
            raise BadRequest(
                "wait is for requests: publish on action-requests to wait for an answer"
            )
        try:
            if request.topic is Topic.ACTION_REQUESTS and wait is not None:
                assert request.response_event is not None
                # The request's id is ours to give: an answer need not name it (a
                # responder that is not the SDK may leave causation_id out).
                request_id = new_id()
                answer = await self._bus.request(
                    request.event_type,
                    request.data,
                    response_event=request.response_event,
                    correlation_id=request.correlation_id,
                    wait=wait,
                    tenant_id=tenant_id,
                    user_id=user_id,
                    session_id=request.session_id,
                    id=request_id,
                )
                return Published(
                    id=request_id,
                    topic=request.topic,
                    event_type=request.event_type,
                    correlation_id=answer.correlation_id,
                    response=answer.model_dump(mode="json", exclude_none=True),
                )
            envelope: Envelope = await self._bus.publish(
                request.topic,
                request.event_type,
                request.data,
                correlation_id=request.correlation_id,
                response_event=request.response_event,
                tenant_id=tenant_id,
                user_id=user_id,
                session_id=request.session_id,
            )
        except RequestTimeout as exc:
            raise NoResponse(str(exc)) from None
        except CorrelationInUseError as exc:
            raise Conflict(str(exc)) from None
        except EnvelopeError as exc:
            raise UnprocessableEntity(f"no valid envelope: {exc.reason}") from None
        return Published(
            id=envelope.id,
            topic=request.topic,
            event_type=request.event_type,
            correlation_id=envelope.correlation_id,
        )
