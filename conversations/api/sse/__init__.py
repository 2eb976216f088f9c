"""A run as Server-Sent Events: its persisted events, the answer in flight, live deltas.

``views`` serves ``GET /api/runs/{id}/events/``, ``posting`` answers a posted
message with the same stream, ``stream`` merges stored rows (``rows``) with
live deltas, ``slots`` bounds the streams one user may hold open.
"""
