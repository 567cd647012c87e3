"""An agent that comes and goes while a test watches: ``python -m tests.e2e.gateway.newcomer NAME``.

A tool named NAME with one skill (``NAME.requested``), for tenant ``DISCO_TENANT_ID``;
it registers when it starts and deregisters when it is stopped (SIGTERM).
"""

from __future__ import annotations

import sys

from pydantic import BaseModel

from disco import Tool


class Question(BaseModel):
    text: str


def main(name: str) -> None:
    tool = Tool(name, description=f"The newcomer {name}.")

    @tool.on_invoke(f"{name}.requested")
    async def answer(request: Question) -> dict[str, str]:
        """Says who answers."""
        return {"text": f"{name}: {request.text}"}

    tool.serve()


if __name__ == "__main__":
    main(sys.argv[1])
