"""The Vercel AI SDK's wire protocol: ``useChat``'s request, and a run as its UI message stream.

``views`` takes the default transport's request and answers with the stream
(or the history as UI messages), ``stream`` turns a run's stored rows and
live deltas into the protocol's chunks, ``chunks`` holds what both share.
"""
