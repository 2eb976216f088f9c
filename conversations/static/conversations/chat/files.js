/*
 * Files on the chat page, the pure part: how a size reads, which files show
 * as pictures, and what a refused upload says (tested with node --test).
 */

export const IMAGE_TYPES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);

/** Whether a media type is shown as a picture (the other files are chips that download). */
export function isImage(mediaType) {
  return IMAGE_TYPES.has(String(mediaType || "").toLowerCase());
}

/** A size in bytes as people read it: "812 B", "4.2 KB", "20.0 MB". */
export function fileSize(bytes) {
  const size = Number(bytes) || 0;
  if (size < 1000) {
    return `${size} B`;
  }
  if (size < 1_000_000) {
    return `${(size / 1000).toFixed(1)} KB`;
  }
  return `${(size / 1_000_000).toFixed(1)} MB`;
}

/** A file's chip text: its name, type and size. */
export function fileLabel(file) {
  const name = file.name || "file";
  const type = file.media_type || file.type || "";
  return [name, type, fileSize(file.size)].filter(Boolean).join(" · ");
}

function detailOf(data) {
  // Without its closing period: the sentence it joins ends with one.
  return data && typeof data.detail === "string" ? data.detail.trim().replace(/\.$/, "") : "";
}

/**
 * Why an upload of ``name`` was refused, for the person who picked it: the
 * HTTP status and the API's answer ({code, detail}) as one sentence.
 */
export function refusalText(name, status, data) {
  const file = `“${name || "the file"}”`;
  const detail = detailOf(data);
  const code = data && data.code;
  if (status === 413 || code === "attachment_too_large") {
    return `${file} is too large to attach${detail ? `: ${detail}` : ""}.`;
  }
  if (status === 415 || code === "unsupported_media_type") {
    return `${file} cannot be attached: this type of file is not accepted${detail ? ` (${detail})` : ""}. Images (PNG, JPEG, GIF, WebP), PDFs and text files are.`;
  }
  if (status === 0) {
    return `${file} could not be uploaded: the server could not be reached.`;
  }
  return `${file} could not be uploaded${detail ? `: ${detail}` : ` (the server answered ${status})`}.`;
}

/** The upload's progress as a whole percentage (0 when the size is not known). */
export function percent(loaded, total) {
  if (!total || total <= 0) {
    return 0;
  }
  return Math.max(0, Math.min(100, Math.round((loaded / total) * 100)));
}

/** The files of a paste or a drop that are files (a pasted picture, dropped documents). */
export function filesOf(transfer) {
  if (!transfer) {
    return [];
  }
  return [...(transfer.files || [])].filter((file) => file && typeof file.size === "number");
}
