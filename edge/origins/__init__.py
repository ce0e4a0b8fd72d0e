"""The edge's origins: the client that asks them, the link to each, their rotation (ejection and
re-admission) and what their answers carry."""
