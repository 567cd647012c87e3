"""An MCP server built with the official ``mcp`` SDK: the tools ``examples/mcp_assistant.py`` uses.

    uv run python examples/mcp_server.py                 # over stdio (the assistant starts it so)
    uv run python examples/mcp_server.py --http 8765     # Streamable HTTP at http://127.0.0.1:8765/mcp

Two tools: ``forecast`` (a city's weather) and ``book_table`` (a restaurant
table; the assistant asks a person before it calls it). Nothing here is disco:
any MCP server works the same way.
"""

from __future__ import annotations

import argparse

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, Field

server = MCPServer(
    "travel-tools", instructions="The weather of a city, and tables booked at its restaurants."
)

SKIES = {"lisbon": ("sunny", 24), "atlantis": ("stormy", 18), "oslo": ("snowing", -3)}


class Forecast(BaseModel):
    city: str
    sky: str
    celsius: int


class Booking(BaseModel):
    reference: str
    restaurant: str
    time: str
    people: int


@server.tool()
def forecast(city: str = Field(description="The city, e.g. Lisbon.")) -> Forecast:
    """Today's weather in a city."""
    sky, celsius = SKIES.get(city.lower(), ("mild", 20))
    return Forecast(city=city, sky=sky, celsius=celsius)


@server.tool()
def book_table(
    restaurant: str = Field(description="The restaurant's name."),
    time: str = Field(description="When, HH:MM."),
    people: int = Field(default=2, ge=1, le=12, description="How many people."),
) -> Booking:
    """Book a table at a restaurant."""
    reference = f"TBL-{restaurant[:3].upper()}-{time.replace(':', '')}-{people}"
    return Booking(reference=reference, restaurant=restaurant, time=time, people=people)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--http", type=int, metavar="PORT", help="serve Streamable HTTP")
    args = parser.parse_args()
    if args.http is None:
        server.run()
    else:
        server.run("streamable-http", host="127.0.0.1", port=args.http)


if __name__ == "__main__":
    main()
