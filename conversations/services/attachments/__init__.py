"""Attachments: files stored once per owner, by content, on a Django storage.

The face of the capability for the rest of the app. ``storing`` takes an
upload (hashed, measured and sniffed while read, deduplicated by owner,
sha256 and media type); ``sniffing`` tells a file's type from its bytes;
``reading`` gives the bytes back (and loads the parts of messages before a
provider call); ``fallbacks`` makes what a model is sent of the parts (native
parts it reads, text for the rest, ``pdf_text`` bounded); ``removal`` deletes
what no message references any more, and each stored object after its row.
"""

from .fallbacks import MODALITIES, fallback_text, prepare_for_model
from .pdf_text import PdfText, extract_pdf_text
from .reading import load_parts, open_attachment, read_attachment
from .removal import (
    connect_signals,
    delete_stored_file,
    delete_unreferenced_attachments,
    purge_attachments,
)
from .sniffing import NEVER_ALLOWED, sanitise_name, sniff_media_type
from .storing import StoredAttachment, allowed_media_types, check_size, store_attachment

__all__ = [
    "MODALITIES",
    "NEVER_ALLOWED",
    "PdfText",
    "StoredAttachment",
    "allowed_media_types",
    "check_size",
    "connect_signals",
    "delete_stored_file",
    "delete_unreferenced_attachments",
    "extract_pdf_text",
    "fallback_text",
    "load_parts",
    "open_attachment",
    "prepare_for_model",
    "purge_attachments",
    "read_attachment",
    "sanitise_name",
    "sniff_media_type",
    "store_attachment",
]
