"""Discovery: "who can do X?", answered with live agents and full schemas (``/v1/discover``)."""
