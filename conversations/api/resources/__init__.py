"""The REST resources, one module each: conversations, messages, runs, branches, approvals ...

Views are thin: validate the input, call one service, serialise the output.
"""
