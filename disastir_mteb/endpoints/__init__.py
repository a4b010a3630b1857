"""OpenAI-compatible servers: the one place that handles endpoints, retries and keys."""
