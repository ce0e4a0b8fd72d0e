"""Simulated browsers: the traffic model (``traffic``) shared by ``perso demo`` and the
Locust file (``locustfile``), which drives several regions' edges at once."""
