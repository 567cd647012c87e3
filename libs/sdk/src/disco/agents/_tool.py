"""Layer 2: :class:`Tool`, synchronous request/response over ``action-requests``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import structlog
from pydantic import JsonValue

from disco._steps import StepNotRecordedError
from disco.agents._agent import Agent
from disco.agents._common import answer, derived_id
from disco.agents._handlers import describe, error_info, inspect_handler, to_json
from disco.agents._progress import ProgressReporter
from disco_common.a2a import A2AAnswer, A2AArtifact, A2AMessageContext, A2APart
from disco_common.envelope import ActionRequest, Envelope
from disco_common.tasks import ActionResultData
from disco_common.topics import Topic

if TYPE_CHECKING:
    from disco.bus import BusClient

__all__ = ["InvocationContext", "Tool"]

_log = structlog.get_logger("disco.agents")

InputT = TypeVar("InputT")
HandlerT = TypeVar("HandlerT", bound=Callable[..., Awaitable[Any]])


class InvocationContext(Generic[InputT]):
    """One tool invocation: the request and its (validated) input.

    Annotate the handler's first parameter ``InvocationContext[MyModel]`` and
    ``request.input`` is the request data validated as ``MyModel``; without a
    model it is the data as it came.

    While the handler works it may send partial answers (an A2A caller sees them
    as status and artifact updates): :meth:`update` and :meth:`artifact`. When an
    A2A caller sent the request through the gateway, :attr:`a2a` is what it sent
    besides the payload (its message id, metadata, extensions...).
    """

    __slots__ = ("_progress", "envelope", "input")

    def __init__(
        self, envelope: ActionRequest, input: InputT, *, bus: BusClient | None = None
    ) -> None:
        self.envelope = envelope
        self.input = input
        self._progress = (
            ProgressReporter(
                bus,
                correlation_id=envelope.correlation_id or envelope.id,
                response_topic=envelope.response_topic or Topic.ACTION_RESULTS.value,
                task_id=envelope.task_id,
            )
            if bus is not None
            else None
        )

    async def update(self, *message: A2APart | str) -> None:
        """Tell the caller how the work goes (an intermediate status message).

        Raises:
            RuntimeError: the context has no bus (built by hand, outside a Tool).
        """
        await self._reporter().update(*message)

    async def artifact(
        self, artifact: A2AArtifact, *, append: bool = False, last_chunk: bool = False
    ) -> None:
        """Hand the caller an artifact or a chunk of one (``append`` to the same ``artifact_id``).

        Raises:
            RuntimeError: the context has no bus (built by hand, outside a Tool).
        """
        await self._reporter().artifact(artifact, append=append, last_chunk=last_chunk)

    def _reporter(self) -> ProgressReporter:
        if self._progress is None:
            raise RuntimeError(
                "this InvocationContext has no bus: partial answers go out only from a "
                "running Tool's handler"
            )
        return self._progress

    @property
    def data(self) -> JsonValue:
        """The request data as it came."""
        return self.envelope.data

    @property
    def a2a(self) -> A2AMessageContext | None:
        """The A2A message the request came from (None: not from an A2A caller).

        Its ``message_id``, ``metadata``, ``extensions`` and ``requested_extensions``
        (what the caller activated), ``reference_task_ids`` and
        ``accepted_output_modes`` (see :class:`~disco_common.a2a.A2AMessageContext`).
        """
        return A2AMessageContext.of(self.envelope.extensions)

    @property
    def event_type(self) -> str:
        return self.envelope.type

    @property
    def request_id(self) -> str:
        """The request envelope's id."""
        return self.envelope.id

    @property
    def correlation_id(self) -> str:
        """The id the answer carries (the request's correlation id, else its id)."""
        return self.envelope.correlation_id or self.envelope.id

    @property
    def response_event(self) -> str:
        return self.envelope.response_event

    @property
    def response_topic(self) -> str:
        return self.envelope.response_topic

    @property
    def tenant_id(self) -> str | None:
        return self.envelope.tenant_id

    @property
    def user_id(self) -> str | None:
        return self.envelope.user_id

    @property
    def session_id(self) -> str | None:
        return self.envelope.session_id

    @property
    def plan_id(self) -> str | None:
        return self.envelope.plan_id


class Tool(Agent):
    """A synchronous capability: the handler's return value is the answer.

    ``@tool.on_invoke("calculate.requested")`` handles requests on
    ``action-requests``. What the handler returns is published to the caller's
    ``response_event`` on its ``response_topic`` with the request's correlation
    id, as ``{"success": true, "result": ...}``; an exception becomes ``{"success":
    false, "error": {"type", "message"}}`` — the caller never hangs. A handler may
    also return an :class:`~disco_common.a2a.A2AAnswer` to shape what an A2A caller
    sees (a direct message, artifacts, input-required, rejected). The handler's
    type hints drive validation and the schemas registered for the capability::

        class Calculation(BaseModel):
            expression: str

        class Answer(BaseModel):
            value: float

        @tool.on_invoke("calculate.requested")
        async def calculate(request: Calculation) -> Answer:
            return Answer(value=evaluate(request.expression))
    """

    kind = "tool"

    def on_invoke(
        self,
        event_type: str,
        *,
        capability: str | None = None,
        description: str | None = None,
        response_event: str | None = None,
    ) -> Callable[[HandlerT], HandlerT]:
        """Decorator: answer ``event_type`` requests with the handler's return value.

        The handler is ``async def handler(request, context: PlatformContext) ->
        Result``; ``request`` is a pydantic model of the request data, an
        :class:`InvocationContext` (``InvocationContext[Model]`` validates), or
        unannotated (the context parameter is optional).

        Args:
            event_type: the request event type, e.g. ``"calculate.requested"``.
            capability: the registered capability name (default: ``event_type``
                without a ``.requested`` suffix).
            description: for the registry (default: the handler's docstring).
            response_event: the name under which the response schema is registered
                (callers still choose the event type they are answered with).

        Raises:
            AgentDefinitionError: a bad signature or a duplicate handler.
        """

        def register(handler: HandlerT) -> HandlerT:
            spec = inspect_handler(
                handler,
                decorator="on_invoke",
                first="request: InvocationContext | YourModel",
                context_types=(InvocationContext,),
                allow_model_argument=True,
                check_return=True,
            )
            model = spec.input_model
            adapter = spec.return_adapter
            agent = self
            name = describe(handler)

            async def dispatch(envelope: Envelope) -> None:
                request: ActionRequest = envelope  # type: ignore[assignment]
                context = agent.context
                outcome: dict[str, Any]
                try:
                    data = request.data
                    value: Any
                    if spec.model_as_argument:
                        assert model is not None
                        argument: Any = model.model_validate(data)
                    else:
                        argument = InvocationContext(
                            request,
                            model.model_validate(data) if model is not None else data,
                            bus=context.bus,
                        )
                    if spec.takes_context:
                        value = await handler(argument, context)
                    else:
                        value = await handler(argument)
                    if isinstance(value, A2AAnswer):
                        outcome = ActionResultData.of_answer(value).model_dump(
                            mode="json", exclude_none=True
                        )
                    else:
                        outcome = {"success": True, "result": to_json(value, adapter)}
                except StepNotRecordedError:
                    raise  # the bus retries: the step's result is recorded before an answer
                except Exception as exc:
                    _log.warning(
                        "tool handler failed; answering with an error",
                        handler=name,
                        event_type=request.type,
                        error=repr(exc),
                    )
                    outcome = {
                        "success": False,
                        "error": error_info(exc).model_dump(mode="json", exclude_none=True),
                    }
                await answer(
                    context.bus,
                    request.response_event,
                    outcome,
                    correlation_id=request.correlation_id or request.id,
                    topic=request.response_topic or Topic.ACTION_RESULTS.value,
                    id=derived_id(request.id, "answer"),
                    # The task this answers, as the tracker (and Workers) name it.
                    task_id=request.task_id or request.id,
                )

            self._serve_requests(
                event_type,
                spec,
                dispatch,
                capability=capability,
                description=description,
                response_event=response_event,
            )
            return handler

        return register
