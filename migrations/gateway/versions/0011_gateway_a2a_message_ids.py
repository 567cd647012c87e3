"""gateway: a message sent again is the same message (A2A ``messageId``), on any instance.

Revision ID: gateway_0011
Revises: gateway_0010
Create Date: 2026-12-01

A client that sends a message again with the same ``messageId`` (it timed out,
its connection dropped) gets the task the first one made, not a second one.
The turn a message starts is now recorded before its request goes out, and
that record is the claim:

- ``a2a_add_turn(...)`` returns whether it recorded the turn (false: the turn
  is taken, by this message sent before or by another one);
- ``a2a_turns.answer_message_id``: the message that answered the question to a
  human a turn waits on (an answer starts no turn; its id is claimed here);
- ``a2a_turns.reply``: the direct message an agent answered a turn with (no task
  holds it), for the same message sent again.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "gateway_0011"
down_revision: str | None = "gateway_0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ADD_TURN_ARGS = (
    "p_tenant text, p_user text, p_task_id text, p_turn integer, p_correlation_id text, "
    "p_context_id text, p_agent text, p_skill text, p_event_type text, p_message jsonb"
)
_ADD_TURN_SIGNATURE = "text, text, text, integer, text, text, text, text, text, jsonb"
_SCOPE = """
            PERFORM set_config('disco.tenant_id', p_tenant, true),
                    set_config('disco.user_id', coalesce(p_user, ''), true);"""
_INSERT = """
            INSERT INTO gateway.a2a_turns (tenant_id, task_id, turn, correlation_id,
                                           context_id, user_id, agent, skill, event_type,
                                           message)
            VALUES (p_tenant, p_task_id, p_turn, p_correlation_id, p_context_id, p_user,
                    p_agent, p_skill, p_event_type, p_message)
            ON CONFLICT DO NOTHING"""


def _add_turn(returns: str, body: str) -> None:
    op.execute(f"DROP FUNCTION IF EXISTS gateway.a2a_add_turn({_ADD_TURN_SIGNATURE})")
    op.execute(
        f"""
        CREATE FUNCTION gateway.a2a_add_turn({_ADD_TURN_ARGS}) RETURNS {returns}
        LANGUAGE plpgsql VOLATILE SECURITY INVOKER AS $$
        BEGIN{_SCOPE}{body}
        END
        $$
        """
    )


def upgrade() -> None:
    op.execute(
        """
        ALTER TABLE gateway.a2a_turns
            ADD COLUMN answer_message_id text,
            ADD COLUMN reply             jsonb
        """
    )
    _add_turn("boolean", f"{_INSERT};\n            RETURN FOUND;")


def downgrade() -> None:
    _add_turn("void", f"{_INSERT};")
    op.execute("ALTER TABLE gateway.a2a_turns DROP COLUMN answer_message_id, DROP COLUMN reply")
