"""Tool-calling LLM conversations as a typed, persisted, inspectable record."""
