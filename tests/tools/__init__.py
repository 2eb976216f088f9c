"""Tests of conversations.tools and the demo tools (no database)."""
