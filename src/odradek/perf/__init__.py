"""Performance tools: ``odradek perf produce|consume|e2e`` (confluent-kafka clients).

The counterparts of Kafka's kafka-producer-perf-test.sh, kafka-consumer-perf-test.sh and
EndToEndLatency; ``bench/run.py`` drives them against fresh brokers.
"""

from odradek.perf.common import PerfError, PerfOptions

__all__ = ["PerfError", "PerfOptions"]
