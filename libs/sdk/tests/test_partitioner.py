"""The bus's partitioner picks the partitions Kafka's default one picks."""

from __future__ import annotations

from aiokafka.partitioner import DefaultPartitioner
from aiokafka.partitioner import murmur2 as reference_murmur2
from hypothesis import given
from hypothesis import strategies as st

from disco.bus._partitioner import murmur2, partition_for


@given(st.binary(max_size=300))
def test_murmur2_equals_the_java_compatible_reference(data: bytes) -> None:
    assert murmur2(data) == reference_murmur2(data)


@given(st.binary(min_size=0, max_size=100), st.integers(min_value=1, max_value=64))
def test_a_key_lands_on_the_partition_the_default_partitioner_picks(key: bytes, count: int) -> None:
    partitions = list(range(count))

    assert partition_for(key, partitions, partitions) == DefaultPartitioner()(
        key, partitions, partitions
    )


def test_a_record_without_a_key_goes_to_an_available_partition() -> None:
    assert partition_for(None, [0, 1, 2], [1]) == 1
    assert partition_for(None, [0, 1, 2], []) in {0, 1, 2}
