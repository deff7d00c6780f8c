"""The hand decoder of DescribeTransactions responses, against kio's encoder."""

from __future__ import annotations

import datetime

import pytest
from kio.schema.describe_transactions.v0 import response as r

from odradek.cli.transactions_cmd import Described, decode_describe_transactions
from odradek.protocol import codec


def test_decodes_what_kio_encodes() -> None:
    start = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    resp = codec.make(
        r.DescribeTransactionsResponse, throttle_time=0, transaction_states=(
            codec.make(r.TransactionState, error_code=0, transactional_id="app-1", transaction_state="Ongoing",
                       transaction_timeout=datetime.timedelta(seconds=60), transaction_start_time=start,
                       producer_id=7, producer_epoch=3,
                       topics=(r.TopicData(topic="a", partitions=(0, 2)), r.TopicData(topic="b", partitions=(1,)))),
            codec.make(r.TransactionState, error_code=105, transactional_id="gone", transaction_state="",
                       transaction_timeout=datetime.timedelta(0), transaction_start_time=start,
                       producer_id=-1, producer_epoch=-1, topics=()),
        ))
    got = decode_describe_transactions(codec.encode(resp))
    ms = int(start.timestamp() * 1000)
    assert got == [
        Described(0, "app-1", "Ongoing", 60000, ms, 7, 3, [("a", 0), ("a", 2), ("b", 1)]),
        Described(105, "gone", "", 0, ms, -1, -1, []),
    ]


def test_minus_one_start_time_and_lies() -> None:
    body = bytes.fromhex("00000000" "02" "0000" "0261" "06456d707479" "0000ea60" "ffffffffffffffff"
                         "0000000000000007" "0003" "01" "00" "00")
    (d,) = decode_describe_transactions(body)
    assert (d.transactional_id, d.state, d.start_time_ms, d.producer_id) == ("a", "Empty", -1, 7)
    with pytest.raises(ValueError):
        decode_describe_transactions(bytes.fromhex("00000000" "ffffff7f"))  # a count past the response
    with pytest.raises(ValueError):
        decode_describe_transactions(body[:-6])
