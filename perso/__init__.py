"""The top of the house: the ``perso`` command, the process supervisor behind ``perso up``
and ``perso demo`` (``stack``, ``supervision``, ``process``, ``worker_processes``), the embedded
Redis, the demo and the operator's views (``worker_status``). Imports the services; no
package of the product imports it (settings live in ``config``)."""
