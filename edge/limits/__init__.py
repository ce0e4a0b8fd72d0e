"""Rate limits at the edge: the per-key token bucket, GCRA, and the PoP's limit shared by its
processes."""
