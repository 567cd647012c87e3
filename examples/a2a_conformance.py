"""Every answer an A2A caller can get from a disco agent, one per shape the caller names.

    uv run python examples/a2a_conformance.py &                       # serves until Ctrl-C
    uv run python examples/a2a_call.py a2a-conformance '{"shape": "artifacts"}'
    uv run python examples/a2a_call.py a2a-conformance stream       # text works too

A Worker, reached through the gateway as any A2A v1.0 agent. The message says
which shape of answer it wants (a data part ``{"shape": "..."}``, or the shape as
text):

- ``text``, ``file``, ``file-url``, ``data``: a completed task with one artifact
  of that kind; ``artifacts``: all four;
- ``message``: a direct message instead of a task;
- ``ask``: a task in ``input-required``, asking a name; the caller's next message
  on the task answers, and the task completes greeting it;
- ``reject``, ``fail``: a rejected or failed task, saying why;
- ``stream``: status updates while it works, an artifact in three chunks
  (``append``, ``lastChunk``), then completed;
- ``long``: a task that works on (a status update every half second) until the
  caller cancels it; subscribe to it again from any gateway instance;
- ``context``: a completed task whose data artifact is what the agent was told of
  the caller's message (``task.a2a``: its id, metadata, extensions, referenced
  tasks, accepted output modes).

Anything else is rejected, naming the shapes.
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel, Field

from disco import A2AAnswer, A2AArtifact, A2APart, ResultContext, TaskContext, Worker

SHAPES = (
    "text",
    "file",
    "file-url",
    "data",
    "artifacts",
    "message",
    "ask",
    "reject",
    "fail",
    "stream",
    "long",
    "context",
)
LONG_TASK_SECONDS = 600
"""How long a ``long`` task works if nobody cancels it."""
TICK_SECONDS = 0.5


class Shape(BaseModel):
    """What the caller sends: the shape of answer it wants."""

    shape: str = Field(default="", description=f"One of {', '.join(SHAPES)}.")
    text: str = Field(default="", description="The shape as text (a text part).")

    @property
    def wanted(self) -> str:
        return (self.shape or self.text).strip().lower()


def text_artifact() -> A2AArtifact:
    return A2AArtifact(artifact_id="text", name="text", parts=[A2APart.from_text("Hello, A2A.")])


def file_artifact() -> A2AArtifact:
    return A2AArtifact(
        artifact_id="file",
        name="hello.txt",
        parts=[A2APart.from_file(b"Hello, A2A.\n", name="hello.txt", media_type="text/plain")],
    )


def file_url_artifact() -> A2AArtifact:
    return A2AArtifact(
        artifact_id="file-url",
        name="logo",
        parts=[
            A2APart.from_url(
                "https://a2a-protocol.org/latest/assets/a2a-logo-black.svg",
                name="a2a-logo.svg",
                media_type="image/svg+xml",
            )
        ],
    )


def data_artifact() -> A2AArtifact:
    return A2AArtifact(
        artifact_id="data",
        name="figures",
        parts=[A2APart.from_data({"answer": 42, "units": ["m", "s"], "ok": True})],
    )


_ARTIFACTS = {
    "text": text_artifact,
    "file": file_artifact,
    "file-url": file_url_artifact,
    "data": data_artifact,
}

worker = Worker(
    "a2a-conformance",
    description="Answers an A2A caller in the shape its message names (see its skill).",
)


@worker.on_task("conformance.requested")
async def conform(task: TaskContext[Shape]) -> None:
    """Answers in the shape the message names: text, file, file-url, data, artifacts,
    message, ask, reject, fail, stream, long or context."""
    wanted = task.input.wanted
    if wanted in _ARTIFACTS:
        await task.complete(A2AAnswer.completed(_ARTIFACTS[wanted]()))
    elif wanted == "artifacts":
        await task.complete(A2AAnswer.completed(*(make() for make in _ARTIFACTS.values())))
    elif wanted == "message":
        await task.complete(A2AAnswer.message("Hello from a direct message: no task was kept."))
    elif wanted == "ask":
        await task.request_human_input(
            "What is your name?",
            response_event="conformance.answered",
            options=["Ada", "Grace"],
            timeout_seconds=3600,
        )
    elif wanted == "reject":
        await task.complete(A2AAnswer.rejected("This agent does not take that kind of work."))
    elif wanted == "fail":
        await task.fail(RuntimeError("the work broke down, as asked"))
    elif wanted == "stream":
        await stream(task)
    elif wanted == "long":
        await work_until_cancelled(task)
    elif wanted == "context":
        a2a = task.a2a
        told = a2a.model_dump(mode="json", by_alias=True) if a2a is not None else None
        await task.complete(
            A2AAnswer.completed(
                A2AArtifact(artifact_id="context", parts=[A2APart.from_data({"a2a": told})])
            )
        )
    else:
        shapes = ", ".join(SHAPES)
        await task.complete(A2AAnswer.rejected(f"no shape {wanted!r}; send one of: {shapes}"))


@worker.on_human_input("conformance.answered")
async def answered(result: ResultContext) -> None:
    """The caller's next message answered the question: greet the name it gave."""
    task = await result.restore_task()
    name = result.answer if isinstance(result.answer, str) else str(result.answer)
    await task.complete(
        A2AAnswer.completed(
            A2AArtifact(
                artifact_id="greeting",
                name="greeting",
                parts=[A2APart.from_text(f"Hello, {name}!")],
            )
        )
    )


async def stream(task: TaskContext[Shape]) -> None:
    """Status updates, then an artifact in three chunks, then done."""
    await task.update("Starting the story...")
    chunks = ("Once upon a time, ", "an agent answered ", "in chunks.")
    for index, chunk in enumerate(chunks):
        await task.artifact(
            A2AArtifact(artifact_id="story", name="story", parts=[A2APart.from_text(chunk)]),
            append=index > 0,
            last_chunk=index == len(chunks) - 1,
        )
    await task.update("The story is told.")
    await task.complete(A2AAnswer.completed(message=["Done."]))


async def work_until_cancelled(task: TaskContext[Shape]) -> None:
    """Works on, saying so every half second; a cancel stops the handler (the Worker
    cancels it on ``task.cancel_requested``)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + LONG_TASK_SECONDS
    tick = 0
    while loop.time() < deadline:
        tick += 1
        await task.update(f"Still working ({tick})...")
        await asyncio.sleep(TICK_SECONDS)
    await task.complete(A2AAnswer.completed(message=["Nobody cancelled me."]))


if __name__ == "__main__":
    worker.serve()
