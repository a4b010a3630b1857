"""Judging the holes of the pool: unjudged top-10 passages labelled with the authors' own protocol."""
