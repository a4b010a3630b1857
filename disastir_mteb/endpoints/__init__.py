"""OpenAI-compatible servers: the one place that handles endpoints, retries and keys.

- :mod:`~disastir_mteb.endpoints.pool`: several base URLs sharing one stream of requests through the
  official ``openai`` client, which does the retries (its event hooks count them and read each answer within
  bounds); bounded concurrency per server, long ``Retry-After`` waits capped and shown, a server answering only
  429 given up after a bounded time, the key from an environment variable only and redacted from whatever a
  server sends back.
"""
