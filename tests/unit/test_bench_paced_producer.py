"""bench/paced_producer.py: the JSON line of our rate-paced C producer (bench/lat_producer.c) and the
command it is run with. Runs of the binary need bench/build_rdkafka.sh, outside the suite."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import paced_producer  # noqa: E402

LINE = ('{"records": 10000, "delivered": 10000, "failed": 0, "in_queue": 0, "elapsed_s": 9.999, '
        '"records_per_sec": 1000.1, "mb_per_sec": 0.977, "behind_max_ms": 0.412, "queue_full": 0, '
        '"cpu_s": 0.84, "ack_ms": {"p50": 1.2, "p99": 3.4, "p999": 5.6, "max": 7.8, "avg": 1.3}}')


def test_parse_output_reads_the_last_json_line() -> None:
    out = paced_producer.parse_output("%4|1764|CONFWARN|x: warning\n" + LINE + "\n")
    assert "error" not in out
    assert out["records_per_sec"] == 1000.1
    assert out["ack_ms"]["p99"] == 3.4
    assert out["behind_max_ms"] == 0.412


def test_parse_output_flags_failed_or_undelivered_messages() -> None:
    failed = json.loads(LINE) | {"delivered": 9990, "failed": 10}
    assert paced_producer.parse_output(json.dumps(failed))["error"] == "9990 of 10000 delivered, 10 failed"
    short = json.loads(LINE) | {"delivered": 9999}
    assert "error" in paced_producer.parse_output(json.dumps(short))


def test_parse_output_without_a_result_line_or_with_missing_keys() -> None:
    assert paced_producer.parse_output("produce: Local: Unknown topic\n")["error"] == "no result line from lat_producer"
    partial = json.loads(LINE)
    del partial["ack_ms"]
    assert paced_producer.parse_output(json.dumps(partial))["error"] == "lat_producer output lacks ack_ms"
    assert "error" in paced_producer.parse_output("{not json\n")


def test_command_paces_acks_all_with_warmup_and_random_partitions() -> None:
    cmd = paced_producer.command(Path("/x/lat_producer"), "127.0.0.1:9092", "w", 1000, 1024, 500,
                                 warmup_partitions=6, props={"linger.ms": "0"})
    assert cmd[:3] == ["/x/lat_producer", "-b", "127.0.0.1:9092"]
    joined = " ".join(cmd)
    assert "-r 500 -c 1000 -s 1024 -a all -T 1000 -W 6" in joined
    assert "-X linger.ms=0" in joined and "-X linger.ms=1" not in joined
    assert "-X sticky.partitioning.linger.ms=0" in joined


def test_c_e2e_summary_in_perf_form() -> None:
    import c_e2e

    s = c_e2e.e2e_summary(list(range(1, 1001)))
    assert s["records"] == 1000 and s["p999"] == 1.0
    form = c_e2e.perf_form(s)
    assert form["p99_9"] == 1.0 and form["p99"] == 0.991
    assert "records" not in form and "p999" not in form
    assert c_e2e.perf_form(c_e2e.e2e_summary([])) == {}


def test_run_reads_w4_settings_for_the_c_clients() -> None:
    import run

    w4 = run.workloads(quick=False)["W4"]
    assert run.e2e_settings(w4.args) == {"rate": 5000, "linger_ms": 5, "fetch_wait_max_ms": 100}
    assert run.e2e_settings(["--throughput", "250", "--producer-props", "acks=all,linger.ms=0"]) == {
        "rate": 250, "linger_ms": 0, "fetch_wait_max_ms": 500}
