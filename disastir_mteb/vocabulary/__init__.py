"""The names and settings every layer shares (pure data and stdlib: no mteb, no numpy)."""
