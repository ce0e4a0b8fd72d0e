"""The product's runtime: settings, the embedded Redis, the process supervisor behind
``perso up`` and ``perso demo``, and the ``perso`` command itself."""
