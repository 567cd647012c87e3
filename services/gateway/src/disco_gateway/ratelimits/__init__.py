"""Rate limits of the calls that put work on the bus, shared by every instance."""

from disco_gateway.ratelimits.service import CallLimits, SharedWindows, parse_limits

__all__ = ["CallLimits", "SharedWindows", "parse_limits"]
