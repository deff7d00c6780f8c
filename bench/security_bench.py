"""TLS and SASL costs on one broker, in one run (issue 15).

One broker process with PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL listeners (certificates made
here with trustme). Measured:

- produce and consume throughput (confluent-kafka, 10 KiB values by default) through the PLAINTEXT and the SSL
  listener, each workload run on both listeners in turn, best of ``--rounds``; the SSL figures as a
  ratio of the plaintext ones (a TLS fetch cannot use sendfile: file regions are read and encrypted);
- the latency of connecting and authenticating with SCRAM-SHA-256 and SCRAM-SHA-512 (TCP connect,
  SaslHandshake v1, two SaslAuthenticate round trips; scramp is the client), of a TLS handshake,
  and of both (SASL_SSL): median and 95th percentile over ``--handshakes`` connections.

    PYTHONPATH=src python bench/security_bench.py [--mb 100] [--rounds 2] [--handshakes 100]
"""

from __future__ import annotations

import argparse
import socket
import ssl
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

import trustme
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from scramp import ScramClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
from brokers import HOST, OdradekBroker, free_port  # noqa: E402

MB = 1024.0 * 1024.0
PASSWORD = "bench-secret"


def _frame(api_key: int, version: int, corr: int, body: bytes) -> bytes:
    client = b"bench"
    payload = struct.pack(">hhih", api_key, version, corr, len(client)) + client + body
    return struct.pack(">i", len(payload)) + payload


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed by the broker")
        buf += chunk
    return bytes(buf)


def _roundtrip(s: socket.socket, api_key: int, version: int, corr: int, body: bytes) -> bytes:
    s.sendall(_frame(api_key, version, corr, body))
    (size,) = struct.unpack(">i", _recv_exact(s, 4))
    resp = _recv_exact(s, size)
    assert struct.unpack_from(">i", resp)[0] == corr
    return resp[4:]


def _scram_login(s: socket.socket, mechanism: str, user: str) -> None:
    mech = mechanism.encode()
    resp = _roundtrip(s, 17, 1, 1, struct.pack(">h", len(mech)) + mech)  # SaslHandshake v1
    assert struct.unpack_from(">h", resp)[0] == 0, resp
    client = ScramClient([mechanism], user, PASSWORD)
    for corr, token in ((2, client.get_client_first()), (3, None)):
        if token is None:
            token = client.get_client_final()
        data = token.encode()
        resp = _roundtrip(s, 36, 1, corr, struct.pack(">i", len(data)) + data)  # SaslAuthenticate v1
        (code,) = struct.unpack_from(">h", resp)
        assert code == 0, resp
        (mlen,) = struct.unpack_from(">h", resp, 2)
        pos = 4 + max(mlen, 0)
        (blen,) = struct.unpack_from(">i", resp, pos)
        reply = resp[pos + 4 : pos + 4 + blen].decode()
        if corr == 2:
            client.set_server_first(reply)
        else:
            client.set_server_final(reply)


def handshake_latencies(port: int, n: int, *, tls: ssl.SSLContext | None, scram: str | None) -> list[float]:
    out: list[float] = []
    for _ in range(n):
        t0 = time.perf_counter()
        raw = socket.create_connection((HOST, port), timeout=10)
        s: socket.socket = tls.wrap_socket(raw, server_hostname=HOST) if tls is not None else raw
        try:
            if scram is not None:
                _scram_login(s, scram, "bench")
            out.append(time.perf_counter() - t0)
        finally:
            s.close()
    return out


def throughput(conf: dict[str, object], topic: str, total_mb: int, value_size: int) -> tuple[float, float]:
    value = b"x" * value_size
    n = int(total_mb * MB / len(value))
    p = Producer({**conf, "linger.ms": 5, "batch.size": 1 << 20, "queue.buffering.max.kbytes": 1 << 20,
                  "acks": "1"})
    t0 = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value, partition=0)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(120) == 0
    produce_s = time.perf_counter() - t0
    c = Consumer({**conf, "group.id": "bench", "enable.auto.commit": False, "fetch.max.bytes": 50 << 20,
                  "max.partition.fetch.bytes": 10 << 20})
    # read the messages just written
    low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    c.assign([TopicPartition(topic, 0, high - n)])
    got = 0
    t0 = time.perf_counter()
    while got < n:
        msgs = c.consume(10000, 0.05)
        got += sum(1 for m in msgs if m.error() is None)
    consume_s = time.perf_counter() - t0
    c.close()
    return total_mb / produce_s, total_mb / consume_s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=100, help="MiB produced and consumed per workload")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--value-size", type=int, default=10240, help="bytes per record value")
    ap.add_argument("--handshakes", type=int, default=100)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="odradek-security-bench-"))
    ca = trustme.CA()
    server = ca.issue_cert(HOST)
    ca.cert_pem.write_to_path(str(work / "ca.pem"))
    server.private_key_and_cert_chain_pem.write_to_path(str(work / "server.pem"))
    ports = {name: free_port() for name in ("SSL", "SASL_PLAINTEXT", "SASL_SSL")}
    b = OdradekBroker(work / "broker", {
        "listeners": f"PLAINTEXT://{HOST}:{{port}}," + ",".join(f"{n}://{HOST}:{p}" for n, p in ports.items()),
        "ssl.keystore.location": str(work / "server.pem"),
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
    })
    b.overrides["listeners"] = b.overrides["listeners"].replace("{port}", str(b.port))
    b.start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for f in admin.alter_user_scram_credentials([
            UserScramCredentialUpsertion("bench", ScramCredentialInfo(m, 4096), PASSWORD.encode())
            for m in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)
        ]).values():
            f.result(30)
        admin.create_topics([NewTopic("tput", 1, 1)])["tput"].result(30)
        plain = {"bootstrap.servers": b.bootstrap}
        tls_conf = {"bootstrap.servers": f"{HOST}:{ports['SSL']}", "security.protocol": "SSL",
                    "ssl.ca.location": str(work / "ca.pem")}
        best: dict[str, list[float]] = {"PLAINTEXT": [0.0, 0.0], "SSL": [0.0, 0.0]}
        for _ in range(args.rounds):
            for name, conf in (("PLAINTEXT", plain), ("SSL", tls_conf)):
                prod, cons = throughput(conf, "tput", args.mb, args.value_size)
                best[name] = [max(best[name][0], prod), max(best[name][1], cons)]
        print(f"throughput, {args.mb} MiB of {args.value_size}-byte values, best of {args.rounds} (MiB/s):")
        for name, (prod, cons) in best.items():
            print(f"  {name:9s} produce {prod:7.1f}  consume {cons:7.1f}")
        print(f"  SSL/PLAINTEXT ratio: produce {best['SSL'][0] / best['PLAINTEXT'][0]:.2f}, "
              f"consume {best['SSL'][1] / best['PLAINTEXT'][1]:.2f}")
        ctx = ssl.create_default_context(cafile=str(work / "ca.pem"))
        print(f"connection set-up latency over {args.handshakes} connections (ms, median / p95):")
        cases = [
            ("TCP only (PLAINTEXT)", b.port, None, None),
            ("TLS handshake (SSL)", ports["SSL"], ctx, None),
            ("SCRAM-SHA-256 (SASL_PLAINTEXT)", ports["SASL_PLAINTEXT"], None, "SCRAM-SHA-256"),
            ("SCRAM-SHA-512 (SASL_PLAINTEXT)", ports["SASL_PLAINTEXT"], None, "SCRAM-SHA-512"),
            ("TLS + SCRAM-SHA-256 (SASL_SSL)", ports["SASL_SSL"], ctx, "SCRAM-SHA-256"),
        ]
        for label, port, tls, scram in cases:
            lat = sorted(handshake_latencies(port, args.handshakes, tls=tls, scram=scram))
            p95 = lat[min(len(lat) - 1, int(len(lat) * 0.95))]
            print(f"  {label:32s} {statistics.median(lat) * 1000:7.2f} / {p95 * 1000:7.2f}")
    finally:
        b.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
