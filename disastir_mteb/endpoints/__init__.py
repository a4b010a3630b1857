"""OpenAI-compatible servers: the one place that handles endpoints, retries and keys.

- :mod:`~disastir_mteb.endpoints.pool`: several base URLs sharing one stream of requests through the
  official ``openai`` client, bounded concurrency per server, retries honouring ``Retry-After`` (capped,
  shown, and given up on after a bounded time), answers read and checked in one place, the key from an
  environment variable only and redacted from whatever a server sends back.
"""
