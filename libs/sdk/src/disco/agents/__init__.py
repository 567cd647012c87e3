"""The agent layers, from raw envelopes to autonomous plans.

====== =========== ===================================== ==========================================
layer  class       decorators                            what the handler does
====== =========== ===================================== ==========================================
1      Agent       ``on_event(topic, event_type)``       handles raw envelopes; explicit topics only
2      Tool        ``on_invoke(event_type)``             returns the answer (exceptions: errors)
3      Worker      ``on_task``, ``on_result``,           saves, delegates, fans out/in, asks humans,
                   ``on_human_input``                    completes later
4      Planner     ``on_goal``, ``on_transition``,       runs goals as event-driven state
                   ``add_plan``                          machines
====== =========== ===================================== ==========================================

Every layer takes the same keyword options (:class:`AgentOptions`, documented
there once) besides its own (``task_ttl_seconds`` of a Worker, ``llm`` of a Planner).

An agent script ends with ``agent.serve()``, or ``serve(a, b)`` for several
agents in one process: Ctrl-C or SIGTERM stops them cleanly.
"""

from disco.agents._agent import Agent, AgentIdentity, PlatformContext
from disco.agents._agent_process import serve
from disco.agents._errors import (
    AgentDefinitionError,
    AgentError,
    HandlerSignatureError,
    PlanConflictError,
    PlanError,
    StaleResultError,
    StateConflictError,
    TaskConflictError,
    TaskStateError,
)
from disco.agents._goal import GoalContext
from disco.agents._options import AgentOptions
from disco.agents._plan import PlanContext, TransitionContext
from disco.agents._planner import Planner
from disco.agents._ports import AgentMemory
from disco.agents._result import ResultContext
from disco.agents._task import TaskContext
from disco.agents._tool import InvocationContext, Tool
from disco.agents._worker import Worker

__all__ = [
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
