"""The edge's request paths: personalize, feedback, explain, the origin fill and the answer
ranked from a pool."""
