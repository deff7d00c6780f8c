"""The length check in front of kio's native decoder: it accepts every honest encoding and refuses the
lying counts that made kio abort the process."""

from __future__ import annotations

import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.serial import entity_writer

from odradek.protocol import codec, kio_guard
from odradek.server.handlers import registry

CASES = sorted(
    (h.api_key, v) for h in registry.values() if h.decode is None for v in range(h.min_version, h.max_version + 1)
)


@pytest.mark.parametrize(("api_key", "version"), CASES)
def test_honest_encodings_pass_and_decode(api_key: int, version: int) -> None:
    cls = load_request_schema(api_key, version)

    @settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(st.from_type(cls))
    def one(req: object) -> None:
        buf = io.BytesIO()
        entity_writer(cls)(buf, req)
        data = buf.getvalue()
        kio_guard.check(cls, data, 0)
        try:
            assert codec.decode_request(api_key, version, data, 0) == req
        except codec.DecodeError as e:
            # kio's own limit, not the guard's: a duration field past what datetime.timedelta holds
            # (OffsetCommit's retention_time near Long.MAX_VALUE ms) does not decode
            assert "timedelta" in str(e), e
        # every truncation is refused by one or the other, never a crash
        for cut in range(0, len(data), max(1, len(data) // 16)):
            with pytest.raises(codec.DecodeError):
                codec.decode_request(api_key, version, data[:cut], 0)

    one()


def test_a_lying_array_count_is_refused_before_kio_allocates() -> None:
    # Metadata v12, topics = compact array with a count of ~2^34: kio's reader asked for 138 GB and aborted
    body = b"\xc3\xc3\xc3\xc3\x40"
    with pytest.raises(codec.DecodeError, match="array of"):
        codec.decode_request(3, 12, body, 0)
    # the legacy encoding: Metadata v4 with a topics count of 2^31 - 1
    with pytest.raises(codec.DecodeError, match="array of"):
        codec.decode_request(3, 4, b"\x7f\xff\xff\xff\x01", 0)
