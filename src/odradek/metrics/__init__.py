"""Broker metrics: plain counters on the hot path, a Prometheus collector at scrape time."""
