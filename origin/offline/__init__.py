"""Offline evaluation at the origin: the decision, context and reward logs of a window read
from Redis and joined (``window``), candidates estimated on them (``evaluation``), and the
shadow policy run beside the live one (``shadow``)."""
