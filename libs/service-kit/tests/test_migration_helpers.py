"""The SQL the migration helpers emit (run for real by the kit's integration tests)."""

from __future__ import annotations

import pytest

from disco_service.migration_helpers import (
    outbox_table_statements,
    system_function_statements,
    tenant_call_statements,
    tenant_rls_statements,
)


def test_a_tenant_table_gets_forced_rls_and_a_tenant_policy() -> None:
    sql = tenant_rls_statements("gateway", "a2a_tasks")
    assert sql[:2] == [
        'ALTER TABLE "gateway"."a2a_tasks" ENABLE ROW LEVEL SECURITY',
        'ALTER TABLE "gateway"."a2a_tasks" FORCE ROW LEVEL SECURITY',
    ]
    policy = sql[2]
    assert "current_setting('disco.tenant_id', true)" in policy
    assert "disco.user_id" not in policy
    assert "USING (" in policy
    assert "WITH CHECK (" in policy


def test_a_user_scoped_table_also_matches_the_user() -> None:
    policy = tenant_rls_statements("memory", "episodes", user_scoped=True)[2]
    assert "current_setting('disco.user_id', true)" in policy


def test_public_rows_get_a_read_only_policy() -> None:
    sql = tenant_rls_statements("memory", "semantic", user_scoped=True, public_read_column="public")
    assert sql[-1].startswith('CREATE POLICY "semantic_public_read"')
    assert "FOR SELECT" in sql[-1]


def test_public_rows_need_user_scoping() -> None:
    with pytest.raises(ValueError, match="user_scoped"):
        tenant_rls_statements("memory", "semantic", public_read_column="public")


@pytest.mark.parametrize("name", ['x"; DROP TABLE y; --', "Upper", "1starts_with_digit", ""])
def test_names_that_are_not_plain_identifiers_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="identifier"):
        tenant_rls_statements("gateway", name)


def test_the_outbox_table_has_an_ordered_id_a_topic_and_the_envelope() -> None:
    create = outbox_table_statements("tracker")[0]
    assert create.startswith('CREATE TABLE "tracker".outbox')
    for column in ("id bigint GENERATED ALWAYS AS IDENTITY", "topic text", "envelope jsonb"):
        assert column in create


def test_a_system_function_is_security_definer_with_a_pinned_search_path() -> None:
    create, revoke = system_function_statements(
        "registry",
        "expire_agents",
        arguments="cutoff timestamptz",
        returns="integer",
        body="SELECT 0",
    )
    assert "SECURITY DEFINER" in create
    assert "SET search_path = pg_catalog, pg_temp" in create
    assert revoke == (
        'REVOKE ALL ON FUNCTION "registry"."expire_agents"(cutoff timestamptz) FROM PUBLIC'
    )


def test_a_tenant_call_scopes_its_own_transaction_to_the_caller_first() -> None:
    (create,) = tenant_call_statements(
        "memory",
        "thing_as",
        arguments="p_id text",
        returns="text",
        declare="v_found text;",
        body="    SELECT t.name INTO v_found FROM memory.things t WHERE t.id = p_id;\n"
        "    RETURN v_found;",
    )

    assert create.startswith(
        'CREATE OR REPLACE FUNCTION "memory"."thing_as"(p_tenant text, p_user text, p_id text) '
        "RETURNS text LANGUAGE plpgsql VOLATILE SECURITY INVOKER"
    )
    declared, scoped = create.index("v_found text;"), create.index("set_config('disco.tenant_id'")
    assert declared < create.index("BEGIN") < scoped < create.index("SELECT t.name")
    assert "set_config('disco.user_id', coalesce(p_user, ''), true)" in create


@pytest.mark.parametrize(
    ("name", "body"), [("thing", "RETURN NULL;"), ("thing_as", "RETURN $call$;")]
)
def test_a_tenant_call_must_say_it_acts_as_someone_and_keep_its_quote(name: str, body: str) -> None:
    with pytest.raises(ValueError, match=r"_as|\$call\$"):
        tenant_call_statements("memory", name, arguments="p_id text", returns="text", body=body)
