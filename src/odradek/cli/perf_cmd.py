"""``odradek perf produce|consume|e2e``: throughput and latency tools (kafka-*-perf-test.sh, EndToEndLatency).

Progress lines every 5 s and a final summary go to stdout; with ``--json`` stdout carries exactly one JSON
object at the end and the progress lines go to stderr. Exit code 0 on success, 1 when the broker is
unreachable, the run timed out or records failed.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from odradek.progress import add_progress_argument

MODES = {
    "produce": "producer throughput and per-record delivery latency (kafka-producer-perf-test.sh)",
    "consume": "consumer throughput and fetch statistics (kafka-consumer-perf-test.sh)",
    "e2e": "produce→consume latency at --throughput records/s (EndToEndLatency)",
}


def add_parser(sub: Any) -> None:
    p = sub.add_parser("perf", help="measure produce/consume throughput and end-to-end latency")
    modes = p.add_subparsers(dest="perf_mode", required=True, metavar="{produce,consume,e2e}")
    for mode, help_text in MODES.items():
        m = modes.add_parser(mode, help=help_text, description=help_text)
        m.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
        m.add_argument("--topic", required=True)
        m.add_argument("--num-records", type=int, required=True, metavar="N")
        m.add_argument("--record-size", type=int, default=100, metavar="BYTES",
                       help="value size in bytes (default 100)")
        m.add_argument("--throughput", type=float, default=-1.0, metavar="R",
                       help="records/s to aim at; -1 (default) is unthrottled "
                            "(e2e: one record in flight at a time)")
        m.add_argument("--acks", choices=["0", "1", "all", "-1"], default="1")
        m.add_argument("--partitions", type=int, default=None,
                       help="partitions when the topic has to be created (default 1)")
        m.add_argument("--command-config", "--producer.config", "--consumer.config", dest="command_config",
                       metavar="FILE", help="a client properties file (security settings; Java client names)")
        m.add_argument("--producer-props", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                       help="librdkafka producer properties")
        m.add_argument("--consumer-props", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                       help="librdkafka consumer properties")
        m.add_argument("--group", default=None,
                       help="consume: subscribe through this consumer group (default: assign all partitions)")
        m.add_argument("--json", action="store_true", help="print one JSON object at the end, nothing else on stdout")
        m.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS",
                       help="bound on the whole run (default 300)")
        m.add_argument("--idle-timeout", type=float, default=10.0, metavar="SECONDS",
                       help="consume/e2e: give up when no record arrived for this long (default 10)")
        m.add_argument("--reporting-interval", type=float, default=5.0, metavar="SECONDS",
                       help="seconds between progress lines (default 5)")
        m.add_argument("--verbose", action="store_true", help="show librdkafka's log")
        add_progress_argument(m)
        m.set_defaults(func=run)


def _client_props(command_config: str | None) -> dict[str, str]:
    from odradek.client.command_config import librdkafka_settings, read_properties

    return librdkafka_settings(read_properties(command_config)) if command_config else {}


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException

    from odradek.perf.common import PerfError, PerfOptions, emit_json, parse_props

    try:
        if args.num_records < 0 or args.record_size < 0:
            raise PerfError("--num-records and --record-size must not be negative")
        opts = PerfOptions(
            bootstrap=args.bootstrap_server,
            topic=args.topic,
            num_records=args.num_records,
            record_size=args.record_size,
            throughput=args.throughput,
            acks="all" if args.acks == "-1" else args.acks,
            partitions=args.partitions,
            client_props=_client_props(args.command_config),
            producer_props=parse_props(args.producer_props, "--producer-props"),
            consumer_props=parse_props(args.consumer_props, "--consumer-props"),
            json=args.json,
            timeout=args.timeout,
            idle_timeout=args.idle_timeout,
            group=args.group,
            report_interval=args.reporting_interval,
            verbose=args.verbose,
            progress=args.progress,
        )
        if args.perf_mode == "produce":
            from odradek.perf.produce import run_produce as runner
        elif args.perf_mode == "consume":
            from odradek.perf.consume import run_consume as runner
        else:
            from odradek.perf.e2e import run_e2e as runner
        result, code = runner(opts)
    except (PerfError, KafkaException, OSError, ValueError) as e:  # OSError/ValueError: --command-config
        print(f"Error: {e}", file=sys.stderr)
        if args.json:
            emit_json({"mode": args.perf_mode, "error": str(e)})
        return 1
    except KeyboardInterrupt:
        print("Interrupted", file=sys.stderr)
        return 130
    if args.json:
        emit_json(result)
    if code and "error" in result:
        print(f"Error: {result['error']}", file=sys.stderr)
    return code
