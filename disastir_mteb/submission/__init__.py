"""Where results are checked and prepared for the MTEB results repository.

- ``submit``: ``disastir-mteb submit``, DisastIR results -> a folder the repository's checks accept.
- ``checks``: the repository's checks, offline (``submit --check``), with ``results_repository`` (what the
  repository enforces, what a clone says) and ``run_settings_check`` (advice it does not enforce).
"""
