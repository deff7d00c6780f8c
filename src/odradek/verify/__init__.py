"""Jepsen-style verification: histories of a Kafka workload (history), and the checker that reads
them and names the anomalies it finds (checker)."""
