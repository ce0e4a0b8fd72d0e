"""Ranking at the edge: a pool ranked for a user, the banks of runs, the users' models and views
held, the items' live posteriors and the shadow evaluation."""
