"""OpenAI-compatible servers: the one place that handles endpoints, retries and keys.

:mod:`~disastir_mteb.endpoints.pool` shares one stream of requests over several base URLs through the ``openai``
client; :mod:`~disastir_mteb.endpoints.urls` checks a base URL before anything is sent;
:mod:`~disastir_mteb.endpoints.answers` reads what an answer holds.
"""
