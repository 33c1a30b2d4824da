"""The HTTP API (FastAPI). Build it with :func:`service.api.app.create_app`."""
