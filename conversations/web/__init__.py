"""The chat page, served by the app and built on the REST API."""
