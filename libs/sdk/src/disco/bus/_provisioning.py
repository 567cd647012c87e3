"""Topic creation through Kafka's admin API: :func:`create_topics`."""

from __future__ import annotations

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError

from disco.bus._errors import BusUnavailableError, TopicProvisioningError
from disco.settings import BusSettings

__all__ = ["create_topics"]

# Kafka error codes that mean "already there", which provisioning accepts.
_TOPIC_ALREADY_EXISTS = 36


async def create_topics(settings: BusSettings, names: list[str]) -> None:
    """Create the broker topics ``names`` with the configured partitions and
    replication factor; topics that already exist are left as they are.

    Raises:
        TopicProvisioningError: the broker refused to create one.
        BusUnavailableError: the broker could not be reached.
    """
    admin = AIOKafkaAdminClient(**settings.kafka_connection_options())
    try:
        await admin.start()
        response = await admin.create_topics(
            [
                NewTopic(name, settings.kafka_partitions, settings.kafka_replication_factor)
                for name in names
            ]
        )
    except KafkaError as exc:
        raise BusUnavailableError(
            f"cannot provision topics at {settings.kafka_bootstrap}: {exc}"
        ) from exc
    finally:
        await admin.close()
    for name, code, message, *_ in response.topic_errors:
        if code not in (0, _TOPIC_ALREADY_EXISTS):
            raise TopicProvisioningError(
                f"the broker refused to create topic {name!r} (error {code}: {message}); "
                "check DISCO_KAFKA_PARTITIONS and DISCO_KAFKA_REPLICATION_FACTOR against the "
                "cluster"
            )
