"""The MCP door: every agent skill a caller may call is a tool for MCP clients, at ``/mcp``.

Built on the official ``mcp`` SDK (its low-level ``Server``, its Streamable HTTP
transport and its request-state seal); what is written here is the door (the
gateway's token, tenant, rate limits and public agents), the sessions of 2025
protocol versions kept in Postgres, and the mapping between MCP and disco's
envelopes and A2A tasks (:mod:`disco_gateway.mcp.mapping`).
"""
