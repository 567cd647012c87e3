"""The agents the gateway's end-to-end tests call: ``python -m tests.e2e.fleet gateway``.

Each answers one way an agent can answer an A2A caller.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel, Field

from disco import (
    A2AAnswer,
    A2AArtifact,
    A2APart,
    Agent,
    InvocationContext,
    ResultContext,
    TaskContext,
    Tool,
    Worker,
)
from disco_common.registry import Visibility


class Text(BaseModel):
    text: str


class Strict(BaseModel):
    name: str = Field(max_length=10)
    count: int


class Numbers(BaseModel):
    a: int
    b: int


def build() -> list[Agent]:
    echo = Tool("gw-echo", description="Echoes text.")

    @echo.on_invoke("gw.echo.requested")
    async def do_echo(request: Text) -> dict[str, str]:
        """Echoes the text it is given."""
        return {"text": f"echo: {request.text}"}

    failing = Tool("gw-fail", description="Always fails.")

    @failing.on_invoke("gw.fail.requested")
    async def do_fail(request: Text) -> None:
        """Fails, saying why."""
        raise RuntimeError(f"the tool refuses: {request.text}")

    strict = Tool("gw-strict", description="Has a strict request schema.")

    @strict.on_invoke("gw.strict.requested")
    async def do_strict(request: Strict) -> dict[str, Any]:
        """Counts names."""
        return {"name": request.name, "count": request.count}

    greet = Tool("gw-greet", description="Answers with a direct message.")

    @greet.on_invoke("gw.greet.requested")
    async def do_greet(request: Text) -> A2AAnswer:
        """Greets, with a message rather than a task."""
        return A2AAnswer.message(f"Hi {request.text}!")

    story = Tool("gw-story", description="Streams a story in chunks.")

    @story.on_invoke("gw.story.requested")
    async def do_story(request: InvocationContext[Text]) -> A2AAnswer:
        """Tells a story: a status update, a chunked artifact, a file."""
        await request.update("Thinking of a story...")
        await request.artifact(A2AArtifact(artifact_id="story", parts=[A2APart.from_text("Once ")]))
        await request.artifact(
            A2AArtifact(artifact_id="story", parts=[A2APart.from_text("upon a time.")]),
            append=True,
            last_chunk=True,
        )
        return A2AAnswer.completed(
            A2AArtifact(
                artifact_id="book",
                name="story.txt",
                parts=[
                    A2APart.from_file(
                        b"Once upon a time.", name="story.txt", media_type="text/plain"
                    ),
                    A2APart.from_url("https://example.com/cover.png", media_type="image/png"),
                    A2APart.from_data({"words": 4, "about": request.input.text}),
                ],
            )
        )

    city = Tool("gw-city", description="Forecasts, when it knows the city.")

    @city.on_invoke("gw.city.requested")
    async def do_city(request: Text) -> A2AAnswer:
        """Asks for a city, refuses Mordor, forecasts the rest."""
        if not request.text.startswith("city:"):
            return A2AAnswer.input_required("Which city? Answer with city:<name>.")
        name = request.text.removeprefix("city:")
        if name == "Mordor":
            return A2AAnswer.rejected("One does not simply forecast Mordor.")
        return A2AAnswer.completed(result={"city": name, "sky": "clear"})

    multi = Tool("gw-math", description="Two skills: add and mul.")

    @multi.on_invoke("gw.add.requested")
    async def add(request: Numbers) -> dict[str, int]:
        """Adds."""
        return {"total": request.a + request.b}

    @multi.on_invoke("gw.mul.requested")
    async def mul(request: Numbers) -> dict[str, int]:
        """Multiplies."""
        return {"total": request.a * request.b}

    # Registered for every tenant: another tenant reaches it (and none of acme's tasks).
    slow = Worker(
        "gw-slow", description="Works until it is cancelled.", visibility=Visibility.PUBLIC
    )

    @slow.on_task("gw.slow.requested")
    async def do_slow(task: TaskContext[Text]) -> None:
        """Works on and on (until cancelled)."""
        await task.update(f"Working slowly on {task.input.text}...")
        await asyncio.Event().wait()

    asker = Worker("gw-asker", description="Asks a human for a name.")

    @asker.on_task("gw.ask.requested")
    async def do_ask(task: TaskContext[Text]) -> None:
        """Asks a person for a name, then greets them."""
        await task.request_human_input(
            "What is your name?",
            response_event="gw.ask.answered",
            timeout_seconds=600,
            options=["Ada", "Grace"],
        )

    @asker.on_human_input("gw.ask.answered")
    async def answered(result: ResultContext) -> None:
        task = await result.restore_task()
        await task.complete({"text": f"Hello, {result.answer}!"})

    form = Worker("gw-form", description="Asks a person to fill in a form.")

    @form.on_task("gw.form.requested")
    async def do_form(task: TaskContext[Text]) -> None:
        """Asks for a name and an age (a form), then greets; nobody answering is said so."""
        await task.request_human_input(
            f"Who are you, {task.input.text}?",
            response_event="gw.form.answered",
            timeout_seconds=600,
            answer_schema={
                "type": "object",
                "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                "required": ["name"],
            },
        )

    @form.on_human_input("gw.form.answered")
    async def filled(result: ResultContext) -> None:
        task = await result.restore_task()
        if result.timed_out:
            await task.complete({"text": "nobody answered"})
            return
        answer = result.answer if isinstance(result.answer, dict) else {}
        await task.complete({"text": f"Hello, {answer.get('name')} ({answer.get('age')})!"})

    relay = Worker("gw-relay", description="Waits for a gate someone else opens.")

    @relay.on_task("gw.relay.requested")
    async def do_relay(task: TaskContext[Text]) -> None:
        """Hands the text to whoever answers gw.gate.requested (the test), then reports it."""
        await task.delegate(
            "gw.gate.requested", {"text": task.input.text}, response_event="gw.gate.opened"
        )

    @relay.on_result("gw.gate.opened")
    async def opened(result: ResultContext) -> None:
        task = await result.restore_task()
        await task.complete({"text": f"relayed: {result.result}"})

    return [echo, failing, strict, greet, story, city, multi, slow, asker, form, relay, *_runtime()]


def _runtime() -> list[Agent]:
    """LLM agents on the runtime (scripted model) for the session stream tests.

    ``gw-assistant`` and ``gw-helper`` share sessions as a team; ``gw-hasty``
    gives a person 2 seconds to approve a call.
    """
    from disco.runtime import AgentRunner, ScriptedDriver, StepsLimit
    from tests.e2e.runtime_agents import book_trip, lookup_weather, script

    workers: list[Agent] = []
    for name, timeout in (("gw-assistant", 900), ("gw-helper", 900), ("gw-hasty", 2)):
        runner = AgentRunner(
            name,
            driver=ScriptedDriver(responder=script),
            system_prompt="You are a gateway e2e assistant.",
            tools=[lookup_weather, book_trip],
            criteria=[StepsLimit(6)],
            approval_timeout_seconds=timeout,
        )
        worker = Worker(name, description="An LLM agent for the session stream tests.")
        runner.attach_worker(worker, f"{name}.requested")
        workers.append(worker)
    return workers
