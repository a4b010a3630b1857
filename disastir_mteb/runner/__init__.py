"""The encode-once runner behind ``disastir_mteb.evaluate`` and ``disastir-mteb run``."""
