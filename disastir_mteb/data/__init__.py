"""Where the data is read: the published layout and DMRetriever's DevLite layout, joined to ids as mteb split data."""
