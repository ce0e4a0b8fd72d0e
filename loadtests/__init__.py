"""Simulated browsers: the traffic model (``traffic``) shared by ``perso demo`` and the
Locust file (``locustfile``), which drives several regions' edges at once; ``make load``'s
runner (``distributed``: a Locust master and one worker per region), where the traffic may
go (``targets``) and the per-region figures read back from Locust's CSV (``report``)."""
