"""The web console served at ``/`` on ``http.listeners`` (odradek.http): brokers, topics, records,
consumer groups, live charts and a few admin actions, each going through the Kafka request
handlers as the HTTP user's principal (see :mod:`odradek.console.dispatch`)."""
