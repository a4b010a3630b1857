"""mteb's own leaderboard app, offline, with DisastIR in its menu (``disastir-mteb leaderboard``)."""
