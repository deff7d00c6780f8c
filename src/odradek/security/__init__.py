"""Security: listeners' protocols, TLS, SASL (PLAIN, SCRAM) and the ACL authorizer.

The pure parts (principal mapping, JAAS parsing, the SASL state machine, ACL semantics) import
no sockets or asyncio; ``tls_channel`` drives an ``ssl.SSLObject`` over memory BIOs so the
connection keeps its own non-blocking socket I/O.
"""
