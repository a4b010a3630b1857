"""Where the leaderboard is: mteb's own leaderboard app, offline, with DisastIR in its menu.

- ``app``: ``disastir-mteb leaderboard`` (serve, or one PNG); ``rows`` its rows (the user's result sets and
  the authors' published models); ``mteb_patch`` the one place it touches mteb's app where mteb offers no
  setting; ``browser`` headless Chromium over its DevTools pipe (the ``--screenshot`` PNG).
"""
