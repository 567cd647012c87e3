"""Rewriting PostgreSQL URLs: another database, another user."""

from __future__ import annotations

from urllib.parse import quote, urlsplit, urlunsplit

__all__ = ["redact", "with_database", "with_user"]


def with_database(url: str, database: str) -> str:
    """``url`` pointing at ``database`` on the same server."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{database}"))


def with_user(url: str, user: str, password: str | None = None) -> str:
    """``url`` logging in as ``user`` (with ``password`` when given)."""
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    netloc = quote(user, safe="")
    if password is not None:
        netloc += ":" + quote(password, safe="")
    netloc += f"@{host}"
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def redact(url: str) -> str:
    """``url`` with its password replaced by ``***``, for messages and logs."""
    parts = urlsplit(url)
    if parts.password:
        return url.replace(f":{parts.password}@", ":***@")
    return url
