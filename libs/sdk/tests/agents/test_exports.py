"""The public names of `disco`, `disco.agents`, `disco.llm` and `disco.testing` are pinned."""

from __future__ import annotations

import disco
import disco.agents
import disco.conditions
import disco.llm
import disco.testing


def test_disco_exports_exactly_its_public_api() -> None:
    assert sorted(disco.__all__) == [
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
    assert all(hasattr(disco, name) for name in disco.__all__)


def test_disco_agents_exports_the_four_layers_their_contexts_and_errors() -> None:
    assert sorted(disco.agents.__all__) == [
        "Agent",
        "AgentDefinitionError",
        "AgentError",
        "AgentIdentity",
        "AgentMemory",
        "AgentOptions",
        "GoalContext",
        "HandlerSignatureError",
        "InvocationContext",
        "PlanConflictError",
        "PlanContext",
        "PlanError",
        "Planner",
        "PlatformContext",
        "ResultContext",
        "StaleResultError",
        "StateConflictError",
        "TaskConflictError",
        "TaskContext",
        "TaskStateError",
        "Tool",
        "TransitionContext",
        "Worker",
        "serve",
    ]
    assert all(hasattr(disco.agents, name) for name in disco.agents.__all__)


def test_disco_llm_conditions_and_testing_export_their_public_api() -> None:
    assert sorted(disco.llm.__all__) == [
        "ChatMessage",
        "Completion",
        "LLMDriver",
        "LLMError",
        "NextStep",
        "OpenAICompatibleDriver",
        "ScriptedDriver",
        "next_step_from_llm",
        "plan_from_llm",
    ]
    assert sorted(disco.conditions.__all__) == [
        "CONDITION_VARIABLES",
        "ConditionError",
        "TemplateError",
        "check_condition",
        "evaluate_condition",
        "render_template",
    ]
    assert sorted(disco.testing.__all__) == [
        "AgentTestKit",
        "CRASH_ENV",
        "CRASH_EXIT_CODE",
        "Crash",
        "CrashPoint",
        "HandlerFailedError",
        "InMemoryMemory",
        "Published",
        "SimulatedCrash",
    ]
    for module in (disco.llm, disco.conditions, disco.testing):
        assert all(hasattr(module, name) for name in module.__all__)


def test_disco_a2a_exports_the_answer_builders_and_the_gateway_helper() -> None:
    import disco.a2a

    assert sorted(disco.a2a.__all__) == [
        "A2AAnswer",
        "A2AArtifact",
        "A2ACardSource",
        "A2AGatewayHelper",
        "A2AMappingError",
        "A2AMessage",
        "A2AMessageContext",
        "A2APart",
        "A2ATaskState",
        "A2A_RESPONSE_EVENT",
        "ACTION_PROGRESSED",
        "ActionProgressedData",
    ]
    assert all(hasattr(disco.a2a, name) for name in disco.a2a.__all__)
