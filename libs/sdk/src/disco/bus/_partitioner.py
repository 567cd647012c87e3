"""Kafka's default key partitioning (murmur2), a word at a time.

aiokafka's ``DefaultPartitioner`` hashes keys byte by byte in Python; with
disco's 36-byte UUID keys that was the largest single cost of a publish
(measured). This computes the very same hash (Java client's
``Utils.murmur2``) from 32-bit words unpacked in one C call, so records land
on the partitions every other Kafka client picks for the same key.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Sequence
from functools import lru_cache

__all__ = ["murmur2", "partition_for"]

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


@lru_cache(maxsize=64)
def _words(count: int) -> struct.Struct:
    return struct.Struct(f"<{count}I")


def murmur2(data: bytes) -> int:
    """MurmurHash2 of ``data`` exactly as the Java Kafka client computes it."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    count = length >> 2
    if count:
        for k in _words(count).unpack_from(data):
            k = (k * _M) & _MASK
            k ^= k >> 24
            k = (k * _M) & _MASK
            h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    if tail:
        base = count << 2
        if tail == 3:
            h ^= data[base + 2] << 16
        if tail >= 2:
            h ^= data[base + 1] << 8
        h ^= data[base]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


def partition_for(
    key: bytes | None, all_partitions: Sequence[int], available: Sequence[int]
) -> int:
    """aiokafka's partitioner interface with Kafka's default key hashing."""
    if key is None:
        return random.choice(available or all_partitions)
    return all_partitions[(murmur2(key) & 0x7FFFFFFF) % len(all_partitions)]
