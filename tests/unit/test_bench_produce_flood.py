"""bench/produce_flood.py: its pre-encoded requests are Produce v7 frames the broker's own decoder reads
(every partition once per round, CRC-valid batches), and it reads error codes from the broker's responses."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import produce_flood  # noqa: E402

from odradek.protocol.framing import parse_request_header  # noqa: E402
from odradek.protocol.produce import decode_produce_request, encode_produce_response  # noqa: E402
from odradek.protocol.records import validate_batches  # noqa: E402


def _decode(req: bytearray) -> tuple[int, list[tuple[int, int]]]:
    """(acks, [(partition, records in its batch)]) of one request frame."""
    frame = memoryview(req)[4:]
    header = parse_request_header(frame, False)
    assert (header.api_key, header.api_version, header.client_id) == (0, 7, "odradek-flood")
    request = decode_produce_request(7, frame, header.body_offset)
    (td,) = request.topic_data
    out = []
    for pd in td.partition_data:
        (h,) = validate_batches(bytes(pd.records or b""))  # framing and CRC-32C checked
        out.append((pd.index, h.record_count))
    return request.acks, out


def test_requests_go_round_every_partition() -> None:
    requests, per_request = produce_flood.build_requests("p10000", 2500, 1024, 1 << 20, -1)
    assert per_request == 1024 and len(requests) == 3
    seen = []
    for req in requests:
        acks, parts = _decode(req)
        assert acks == -1 and all(n == 1 for _, n in parts)
        seen += [p for p, _ in parts]
    assert len(requests[0]) > 1024 * 1024  # ~1 MB of 1 KB records
    assert sorted(set(seen)) == list(range(2500))  # every partition; the last request wraps round


def test_few_partitions_get_full_batches() -> None:
    requests, per_request = produce_flood.build_requests("p6", 6, 1024, 1 << 20, 1)
    assert len(requests) == 1 and per_request == 6 * 170
    acks, parts = _decode(requests[0])
    assert acks == 1 and parts == [(p, 170) for p in range(6)]


def test_errors_counted_from_the_response() -> None:
    body = encode_produce_response(7, [("t", [(0, 0, 5, -1, 0, None, ()), (1, 6, -1, -1, -1, None, ())])])
    assert produce_flood._errors_in_response(b"\x00\x00\x00\x07" + body) == 1
