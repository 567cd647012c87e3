"""Building blocks for hand-written Alembic migrations (see ``migrations/README.md``).

Each helper comes in two forms: ``*_statements(...)`` returns the SQL (to read,
test or run by other means) and the plain verb (``enable_tenant_rls``,
``create_outbox_table``, ...) runs it with ``alembic.op.execute`` inside the
migration's transaction.

Row-level security
------------------
A tenant-scoped table has ``ENABLE`` and ``FORCE ROW LEVEL SECURITY`` and a
policy comparing its tenant column with the transaction-local setting
``disco.tenant_id`` that the kit's sessions set at the start of every
transaction (and, for user-private rows, its user column with
``disco.user_id``). A transaction that set no tenant sees no row and can
write none.

The migration owner (the role running ``disco db upgrade``) gets a policy of
its own that allows everything: it owns the tables and could disable RLS
anyway, so this adds no power, and it is what lets a ``SECURITY DEFINER``
function owned by it run a cross-tenant system job (the registry's TTL
sweeper, for instance) while the application role itself has no BYPASSRLS.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

__all__ = [
    "create_erasure_functions",
    "create_outbox_table",
    "create_system_function",
    "create_tenant_call",
    "disable_tenant_rls",
    "drop_erasure_functions",
    "drop_outbox_table",
    "drop_system_function",
    "drop_tenant_call",
    "enable_tenant_rls",
    "load_migration",
    "outbox_table_statements",
    "system_function_statements",
    "tenant_call_statements",
    "tenant_rls_statements",
]

TENANT_SETTING = "disco.tenant_id"
USER_SETTING = "disco.user_id"

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_VOLATILITY = frozenset({"VOLATILE", "STABLE", "IMMUTABLE"})
_LANGUAGES = frozenset({"sql", "plpgsql"})
_BODY_QUOTE = "$disco$"


def _ident(value: str, what: str) -> str:
    if not _IDENTIFIER.fullmatch(value):
        raise ValueError(
            f"{what} {value!r} must be a lower-case SQL identifier "
            "(letters, digits and '_', starting with a letter or '_')"
        )
    return f'"{value}"'


def _execute(statements: list[str]) -> None:
    from alembic import op

    for statement in statements:
        op.execute(statement)


def _setting(name: str) -> str:
    # NULLIF: once a setting was used in a session it reads '' after its
    # transaction ends; '' must never match a row.
    return f"NULLIF(current_setting('{name}', true), '')"


# -- row-level security ------------------------------------------------------


def tenant_rls_statements(
    schema: str,
    table: str,
    *,
    user_scoped: bool = False,
    public_read_column: str | None = None,
    tenant_column: str = "tenant_id",
    user_column: str = "user_id",
) -> list[str]:
    """The SQL that puts ``schema.table`` under tenant row-level security.

    Args:
        schema: the service's schema.
        table: the table (it has ``tenant_column``, and ``user_column`` when user-scoped).
        user_scoped: rows are private to their user within the tenant.
        public_read_column: a boolean column; rows where it is true are readable
            (not writable) by every user of the tenant. Only with ``user_scoped``.
        tenant_column: the column holding the tenant id.
        user_column: the column holding the user id.
    """
    if public_read_column is not None and not user_scoped:
        raise ValueError("public_read_column only makes sense with user_scoped=True")
    qualified = f"{_ident(schema, 'schema')}.{_ident(table, 'table')}"
    tenant_match = f"{_ident(tenant_column, 'tenant column')} = {_setting(TENANT_SETTING)}"
    row_match = tenant_match
    if user_scoped:
        row_match += f" AND {_ident(user_column, 'user column')} = {_setting(USER_SETTING)}"
    statements = [
        f"ALTER TABLE {qualified} ENABLE ROW LEVEL SECURITY",
        f"ALTER TABLE {qualified} FORCE ROW LEVEL SECURITY",
        f"CREATE POLICY {_ident(table + '_tenant_isolation', 'policy')} ON {qualified} "
        f"AS PERMISSIVE FOR ALL TO PUBLIC USING ({row_match}) WITH CHECK ({row_match})",
        f"CREATE POLICY {_ident(table + '_owner_maintenance', 'policy')} ON {qualified} "
        "AS PERMISSIVE FOR ALL TO CURRENT_USER USING (true) WITH CHECK (true)",
    ]
    if public_read_column is not None:
        public = _ident(public_read_column, "public read column")
        statements.append(
            f"CREATE POLICY {_ident(table + '_public_read', 'policy')} ON {qualified} "
            f"AS PERMISSIVE FOR SELECT TO PUBLIC USING ({tenant_match} AND {public})"
        )
    return statements


def enable_tenant_rls(
    schema: str,
    table: str,
    *,
    user_scoped: bool = False,
    public_read_column: str | None = None,
    tenant_column: str = "tenant_id",
    user_column: str = "user_id",
) -> None:
    """Put ``schema.table`` under tenant row-level security (in a migration).

    See :func:`tenant_rls_statements` for the arguments.
    """
    _execute(
        tenant_rls_statements(
            schema,
            table,
            user_scoped=user_scoped,
            public_read_column=public_read_column,
            tenant_column=tenant_column,
            user_column=user_column,
        )
    )


def disable_tenant_rls(schema: str, table: str) -> None:
    """Undo :func:`enable_tenant_rls` (for a ``downgrade``)."""
    qualified = f"{_ident(schema, 'schema')}.{_ident(table, 'table')}"
    _execute(
        [
            *(
                f"DROP POLICY IF EXISTS {_ident(table + suffix, 'policy')} ON {qualified}"
                for suffix in ("_tenant_isolation", "_owner_maintenance", "_public_read")
            ),
            f"ALTER TABLE {qualified} NO FORCE ROW LEVEL SECURITY",
            f"ALTER TABLE {qualified} DISABLE ROW LEVEL SECURITY",
        ]
    )


# -- outbox ------------------------------------------------------------------


def outbox_table_statements(schema: str) -> list[str]:
    """The SQL creating ``schema.outbox``, the service's transactional outbox.

    No row-level security on purpose: only the kit reads it (the relay, which
    serves every tenant), no endpoint exposes it, and each row keeps its
    tenant inside the envelope and in ``tenant_id`` for operators.
    """
    owned = _ident(schema, "schema")
    return [
        f"CREATE TABLE {owned}.outbox ("
        "id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
        "topic text NOT NULL CHECK (topic <> ''), "
        "envelope jsonb NOT NULL, "
        "tenant_id text, "
        "created_at timestamptz NOT NULL DEFAULT now())",
        f"COMMENT ON TABLE {owned}.outbox IS "
        "'Envelopes to publish after commit; drained by the disco_service outbox relay.'",
    ]


def create_outbox_table(schema: str) -> None:
    """Create ``schema.outbox`` (in a migration)."""
    _execute(outbox_table_statements(schema))


def drop_outbox_table(schema: str) -> None:
    """Drop ``schema.outbox`` (for a ``downgrade``)."""
    _execute([f"DROP TABLE IF EXISTS {_ident(schema, 'schema')}.outbox"])


# -- cross-tenant system jobs --------------------------------------------------


def system_function_statements(
    schema: str,
    name: str,
    *,
    arguments: str = "",
    returns: str,
    body: str,
    language: str = "sql",
    volatility: str = "VOLATILE",
) -> list[str]:
    """The SQL creating a ``SECURITY DEFINER`` function for a cross-tenant system job.

    The function runs as the migration owner, whose policy lets it see every
    tenant's rows, so the application role (no BYPASSRLS) can run exactly
    this job across tenants and nothing else. ``search_path`` is pinned to
    ``pg_catalog, pg_temp``: write every table name schema-qualified in
    ``body``. ``disco db upgrade`` grants the application role EXECUTE on it.

    Args:
        schema: the service's schema.
        name: the function's name.
        arguments: the argument list, e.g. ``"cutoff timestamptz"``.
        returns: the return type, e.g. ``"integer"`` or ``"SETOF text"``.
        body: the function body (SQL or PL/pgSQL).
        language: ``sql`` or ``plpgsql``.
        volatility: ``VOLATILE``, ``STABLE`` or ``IMMUTABLE``.
    """
    if language not in _LANGUAGES:
        raise ValueError(f"language must be one of {sorted(_LANGUAGES)}")
    if volatility.upper() not in _VOLATILITY:
        raise ValueError(f"volatility must be one of {sorted(_VOLATILITY)}")
    if _BODY_QUOTE in body:
        raise ValueError(f"the function body must not contain {_BODY_QUOTE}")
    qualified = f"{_ident(schema, 'schema')}.{_ident(name, 'function')}"
    return [
        f"CREATE OR REPLACE FUNCTION {qualified}({arguments}) RETURNS {returns} "
        f"LANGUAGE {language} {volatility.upper()} SECURITY DEFINER "
        "SET search_path = pg_catalog, pg_temp "
        f"AS {_BODY_QUOTE}{body}{_BODY_QUOTE}",
        # Functions are executable by PUBLIC by default; only the app role may run it.
        f"REVOKE ALL ON FUNCTION {qualified}({arguments}) FROM PUBLIC",
    ]


def create_system_function(
    schema: str,
    name: str,
    *,
    arguments: str = "",
    returns: str,
    body: str,
    language: str = "sql",
    volatility: str = "VOLATILE",
) -> None:
    """Create a ``SECURITY DEFINER`` system function (see :func:`system_function_statements`)."""
    _execute(
        system_function_statements(
            schema,
            name,
            arguments=arguments,
            returns=returns,
            body=body,
            language=language,
            volatility=volatility,
        )
    )


def drop_system_function(schema: str, name: str, *, arguments: str = "") -> None:
    """Drop a system function (for a ``downgrade``)."""
    qualified = f"{_ident(schema, 'schema')}.{_ident(name, 'function')}"
    _execute([f"DROP FUNCTION IF EXISTS {qualified}({arguments})"])


# -- tenant calls -----------------------------------------------------------------

_TENANT_CALL_ARGUMENTS = "p_tenant text, p_user text"
_CALL_QUOTE = "$call$"


def tenant_call_statements(
    schema: str, name: str, *, arguments: str, returns: str, body: str, declare: str = ""
) -> list[str]:
    """The SQL creating ``<schema>.<name>(p_tenant text, p_user text, <arguments>)``: a
    hot call in one statement (see "Hot calls in one statement" in migrations/README.md).

    A ``SECURITY INVOKER`` PL/pgSQL function: it sets ``disco.tenant_id`` and
    ``disco.user_id`` for its own implicit transaction (what a unit of work sets
    from the caller's token; the service passes the caller's verified tenant and
    user), then runs ``body``, so row-level security binds it as it binds a
    session's statements.

    Args:
        schema: the service's schema.
        name: the function's name, ending in ``_as``.
        arguments: the arguments after the tenant and user, e.g. ``"p_ids text[]"``.
        returns: the return type, e.g. ``"text"`` or ``"TABLE (o_id text)"``.
        body: the statements after the scope (PL/pgSQL, ending with ``;``).
        declare: the variables, if any (PL/pgSQL ``DECLARE`` section, without the keyword).
    """
    if not name.endswith("_as"):
        raise ValueError(f"a tenant call's name ends in '_as' (it acts as a caller): {name!r}")
    if _CALL_QUOTE in body or _CALL_QUOTE in declare:
        raise ValueError(f"the body must not contain {_CALL_QUOTE}")
    qualified = f"{_ident(schema, 'schema')}.{_ident(name, 'function')}"
    section = f"DECLARE\n{declare}\n" if declare else ""
    return [
        f"CREATE OR REPLACE FUNCTION {qualified}({_TENANT_CALL_ARGUMENTS}, {arguments}) "
        f"RETURNS {returns} LANGUAGE plpgsql VOLATILE SECURITY INVOKER AS {_CALL_QUOTE}\n"
        f"{section}BEGIN\n"
        f"    PERFORM set_config('{TENANT_SETTING}', coalesce(p_tenant, ''), true),\n"
        f"            set_config('{USER_SETTING}', coalesce(p_user, ''), true);\n"
        f"{body}\nEND\n{_CALL_QUOTE}"
    ]


def create_tenant_call(
    schema: str, name: str, *, arguments: str, returns: str, body: str, declare: str = ""
) -> None:
    """Create a tenant call (see :func:`tenant_call_statements`)."""
    _execute(
        tenant_call_statements(
            schema, name, arguments=arguments, returns=returns, body=body, declare=declare
        )
    )


def drop_tenant_call(schema: str, name: str, *, arguments: str) -> None:
    """Drop a tenant call (for a ``downgrade``)."""
    drop_system_function(schema, name, arguments=f"{_TENANT_CALL_ARGUMENTS}, {arguments}")


# -- erasure --------------------------------------------------------------------

_ERASURE_RETURNS = "TABLE(table_name text, deleted bigint)"


def _erasure_body(schema: str, *, tenant_wide: bool) -> str:
    declare = "    target_user text := NULL;\n" if tenant_wide else ""
    # schema is a checked identifier (_ident); the tables are quoted by format(%I).
    return f"""
DECLARE
{declare}    tenant text := NULLIF(current_setting('{TENANT_SETTING}', true), '');
    t record;
    n bigint;
BEGIN
    IF tenant IS NULL THEN
        RAISE EXCEPTION 'erasure needs a tenant-scoped transaction';
    END IF;
    -- Every table of the schema with a tenant_id column, found now: a table a
    -- later migration adds is erased without touching this function. Tables
    -- holding foreign keys go first, so children go before their parents.
    FOR t IN
        SELECT c.relname AS name,
               EXISTS (SELECT 1 FROM pg_attribute u
                        WHERE u.attrelid = c.oid AND u.attname = 'user_id'
                          AND NOT u.attisdropped) AS has_user,
               (SELECT count(*) FROM pg_constraint f
                 WHERE f.conrelid = c.oid AND f.contype = 'f') AS foreign_keys
          FROM pg_class c
          JOIN pg_namespace s ON s.oid = c.relnamespace
          JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'tenant_id'
                             AND NOT a.attisdropped
         WHERE s.nspname = '{schema}' AND c.relkind IN ('r', 'p') AND NOT c.relispartition
         ORDER BY foreign_keys DESC, c.relname
    LOOP
        IF target_user IS NULL THEN
            EXECUTE format('DELETE FROM %I.%I WHERE tenant_id = $1', '{schema}', t.name)
               USING tenant;
        ELSIF t.has_user THEN
            EXECUTE format('DELETE FROM %I.%I WHERE tenant_id = $1 AND user_id = $2',
                           '{schema}', t.name)
               USING tenant, target_user;
        ELSE
            CONTINUE;  -- no user of its own: its rows go with their parent's (cascade)
        END IF;
        GET DIAGNOSTICS n = ROW_COUNT;
        table_name := t.name;
        deleted := n;
        RETURN NEXT;
    END LOOP;
    RETURN;
END
"""  # noqa: S608


def create_erasure_functions(schema: str) -> None:
    """Create ``<schema>.erase_user(target_user)`` and ``<schema>.erase_tenant()``.

    Both delete, in the calling transaction's tenant (``disco.tenant_id``, never
    an argument), from every table of ``schema`` that has a ``tenant_id``
    column, found in the catalog when they run, so tables added later are
    covered: ``erase_tenant`` every row of the tenant, ``erase_user`` the rows
    whose ``user_id`` is the user's (tables without a ``user_id`` column lose
    their rows through their parents' cascades). Each returns
    ``(table_name, deleted)`` per table it touched. They are system functions
    (``SECURITY DEFINER``, see :func:`create_system_function`): they see every
    user's rows of the tenant, which the application role alone does not.
    """
    _ident(schema, "schema")  # refuses anything but a plain identifier
    name = schema
    create_system_function(
        name,
        "erase_user",
        arguments="target_user text",
        returns=_ERASURE_RETURNS,
        language="plpgsql",
        body=_erasure_body(name, tenant_wide=False),
    )
    create_system_function(
        name,
        "erase_tenant",
        returns=_ERASURE_RETURNS,
        language="plpgsql",
        body=_erasure_body(name, tenant_wide=True),
    )


def drop_erasure_functions(schema: str) -> None:
    """Drop the functions :func:`create_erasure_functions` made (for a ``downgrade``)."""
    drop_system_function(schema, "erase_tenant")
    drop_system_function(schema, "erase_user", arguments="target_user text")


def load_migration(path: Path | str) -> ModuleType:
    """The migration file at ``path``, loaded as a module (a migration reading an earlier one).

    Migration files are not importable by a package name: their names start with
    digits, and their folder is ``migrations/<service>/versions`` in a checkout and
    ``<package>/migrations/versions`` in a wheel. Load an earlier one by its path,
    next to the running one: ``load_migration(Path(__file__).with_name("0003_x.py"))``.
    """
    path = Path(path)
    spec = importlib.util.spec_from_file_location(f"_disco_migration_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"no migration at {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
