"""The tasks exported as BEIR folders, as an mteb-native dataset, and as the files of an mteb pull request."""

from __future__ import annotations

from disastir_mteb.exports.beir import export_beir
from disastir_mteb.exports.mteb_dataset import export_mteb, mteb_subset

__all__ = ["export_beir", "export_mteb", "mteb_subset"]
