"""Layer 2, a Tool: the handler's return value is the answer.

    uv run python examples/hello_tool.py              # serves until Ctrl-C
    uv run disco ask hello.requested '{"name": "Ada"}'

Type hints drive everything: the request is validated as ``Greeting``, the
answer is ``Hello``, and both schemas are registered with the registry, so a
caller (or an LLM) can discover how to ask and what comes back.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from disco import Tool


class Greeting(BaseModel):
    name: str = Field(min_length=1, description="Who to greet.")
    language: str = Field(default="en", description="en, fr or de.")


class Hello(BaseModel):
    message: str


_WORDS = {"en": "Hello", "fr": "Bonjour", "de": "Hallo"}

tool = Tool("hello", description="Greets people in a few languages.")


@tool.on_invoke("hello.requested")
async def greet(request: Greeting) -> Hello:
    """Greets someone by name."""
    if request.language not in _WORDS:
        # An exception is an error answer: the caller gets {success: false, error}.
        raise ValueError(f"unknown language {request.language!r}; try one of {sorted(_WORDS)}")
    return Hello(message=f"{_WORDS[request.language]}, {request.name}!")


if __name__ == "__main__":
    tool.serve()
