"""OpenAI-compatible servers: the one place that handles endpoints, retries and keys.

- :mod:`~disastir_mteb.endpoints.pool`: several base URLs sharing one stream of requests through the
  official ``openai`` client, which does the retries (its event hooks count them and read each answer within
  bounds); bounded concurrency per server, long ``Retry-After`` waits capped and shown, a server answering only
  429 given up after a bounded time, the key from an environment variable only and redacted from whatever a
  server sends back.
- :mod:`~disastir_mteb.endpoints.urls`: a server's base URL checked before anything is sent, and the other prefix
  (``/v1`` or none) an engine may answer under.
- :mod:`~disastir_mteb.endpoints.answers`: what an answer holds (JSON, or the chat completion a stream of events
  spells), or why it is not the protocol's.
"""
