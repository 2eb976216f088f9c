"""Tests of the live event transports (conversations.events)."""
