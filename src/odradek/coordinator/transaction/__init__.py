"""Transactions (KIP-98): the transaction coordinator on ``__transaction_state``.

- :mod:`.records`: Kafka's TransactionLogKey/TransactionLogValue records and partitionFor;
- :mod:`.state`: TransactionState, TransactionMetadata and its transitions;
- :mod:`.coordinator`: TransactionCoordinator, a pure core with injected edges.
"""
