"""Signals for extensions: the tool-call lifecycle, approvals and finished runs.

All are sent synchronously by the tool loop, outside any transaction:

- ``tool_call_started(sender=ToolCall model, tool_call, run)``: just before a tool
  runs (from the loop's thread; the tool itself runs in a worker thread or task).
- ``tool_call_finished(sender=ToolCall model, tool_call, run, result)``: after it
  ran (``tool_call.status`` says how it went; ``result`` is what the model sees).
- ``run_finished(sender=Run model, run)``: a run reached a terminal status.
- ``approval_requested(sender=ToolApproval model, approval, run)``: a call waits
  for a human decision (send mail, post to Slack...); sent once the held turn
  is committed.
- ``approval_decided(sender=ToolApproval model, approval, run)``: a decision
  was stored (``approval.decided_by`` is empty when the system decided: a
  timeout or a cancellation).
- ``budget_warning(sender=Budget model, budget, run, period_start)``: a ``warn``
  budget reached its limit; sent once per period, after the call that reached
  it was committed.

A receiver that raises propagates the exception (Django's ``send``); use
``send_robust`` semantics in your receiver if it must never interfere.
"""

from django.dispatch import Signal

tool_call_started = Signal()
tool_call_finished = Signal()
run_finished = Signal()
approval_requested = Signal()
approval_decided = Signal()
budget_warning = Signal()
