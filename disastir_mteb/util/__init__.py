"""Plumbing every folder shares: nothing here knows about DisastIR or its models."""
