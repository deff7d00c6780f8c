"""Client quotas (KIP-13, KIP-55, KIP-124, KIP-219, KIP-546, KIP-599): ``rate`` the sampled rates
and token buckets, ``manager`` the entities, Kafka's precedence and the throttle times."""
