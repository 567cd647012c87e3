"""disco: the agent SDK.

Agents, from raw envelopes to autonomous plans (:mod:`disco.agents`)::

    from disco import Tool

    tool = Tool("calculator")

    @tool.on_invoke("add.requested")
    async def add(request: Addition) -> Total:
        return Total(total=request.a + request.b)

    if __name__ == "__main__":
        tool.serve()  # several agents in one process: disco.serve(a, b)

:class:`Agent` (raw envelopes on explicit topics), :class:`Tool` (the return
value is the answer), :class:`Worker` (tasks that delegate, fan out/in and ask
humans), :class:`Planner` (goals as event-driven state machines). The contracts
they speak (:class:`DelegationSpec`, :class:`StateConfig`...) come from
``disco_common`` and are re-exported here. :mod:`disco.testing` runs agents in a
unit test without a broker.

The handler context is reachable from anywhere a handler runs:
:func:`current_envelope` and :func:`current_context` (they raise
:class:`NotInHandlerError` elsewhere), and so is :func:`step`: an effect run
once per envelope, its result recorded before the handler goes on. The bus
lives in :mod:`disco.bus`, the
service clients in :mod:`disco.clients`, LLM drivers in :mod:`disco.llm`,
the LLM agent runtime (state, tools, approvals, snapshots) in :mod:`disco.runtime`,
what an agent answers an A2A caller with (:class:`A2AAnswer`, partial answers)
and what it knows of the caller's A2A message (:class:`A2AMessageContext`)
in :mod:`disco.a2a`. :func:`configure_logging` and :func:`configure_tracing`
(:mod:`disco.telemetry`) give an agent the services' JSON logs and traces.
"""

from disco._context import (
    HandlerContext,
    NotInHandlerError,
    current_context,
    current_envelope,
    handler_context,
)
from disco._steps import Step, StepError, StepNotRecordedError, step
from disco.agents import (
    Agent,
    AgentDefinitionError,
    AgentError,
    AgentIdentity,
    GoalContext,
    HandlerSignatureError,
    InvocationContext,
    PlanConflictError,
    PlanContext,
    PlanError,
    Planner,
    PlatformContext,
    ResultContext,
    StaleResultError,
    StateConflictError,
    TaskConflictError,
    TaskContext,
    TaskStateError,
    Tool,
    TransitionContext,
    Worker,
    serve,
)
from disco.telemetry import configure_logging, configure_tracing
from disco_common.a2a import A2AAnswer, A2AArtifact, A2AMessageContext, A2APart
from disco_common.plans import PlanDefinition, StateAction, StateConfig, StateTransition
from disco_common.registry import AgentCapability, EventDefinition, EventDirection
from disco_common.tasks import ActionResultData, DelegationSpec, ErrorInfo
from disco_common.topics import Topic

__all__ = [
    "A2AAnswer",
    "A2AArtifact",
    "A2AMessageContext",
    "A2APart",
    "ActionResultData",
    "Agent",
    "AgentCapability",
    "AgentDefinitionError",
    "AgentError",
    "AgentIdentity",
    "DelegationSpec",
    "ErrorInfo",
    "EventDefinition",
    "EventDirection",
    "GoalContext",
    "HandlerContext",
    "HandlerSignatureError",
    "InvocationContext",
    "NotInHandlerError",
    "PlanConflictError",
    "PlanContext",
    "PlanDefinition",
    "PlanError",
    "Planner",
    "PlatformContext",
    "ResultContext",
    "StaleResultError",
    "StateAction",
    "StateConfig",
    "StateConflictError",
    "StateTransition",
    "Step",
    "StepError",
    "StepNotRecordedError",
    "TaskConflictError",
    "TaskContext",
    "TaskStateError",
    "Tool",
    "Topic",
    "TransitionContext",
    "Worker",
    "configure_logging",
    "configure_tracing",
    "current_context",
    "current_envelope",
    "handler_context",
    "serve",
    "step",
]
