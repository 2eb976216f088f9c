"""The app's admin: the stored history read-only, the configuration records editable.

``history`` registers conversations and runs, ``records`` single tool calls
and messages (view-only, actions through services); ``config`` registers
providers, language models, profiles and the tool switches; ``usage`` the
model-call ledger, budgets and the usage page.
"""

from . import config, history, records, usage

__all__ = ["config", "history", "records", "usage"]
