"""The edge (PoP) node: answers from a segment-keyed cache, calls the origin on a miss and
to forward feedback. Deployed alone: nothing here imports ``origin``."""
