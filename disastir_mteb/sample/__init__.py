"""Where the sample is generated: a synthetic dataset in the published layout, and DevLite folders from it."""
