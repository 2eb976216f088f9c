/*
 * Attaching files: the attach button, drag and drop, pasting a picture; each
 * file uploads at once (POST attachments/, its progress shown) into the tray
 * above the box, and the message sends their ids. A refused file says why.
 * The transcript shows a message's files: pictures as thumbnails that open
 * full size, other files as chips that download.
 */

import { showError } from "./alerts.js";
import { apiRoot, csrfToken } from "./api.js";
import { el, ui } from "./dom.js";
import { fileLabel, filesOf, isImage, percent, refusalText } from "./files.js";

const tray = document.getElementById("llm-attachments");
const picker = document.getElementById("llm-file");
const attach = document.getElementById("llm-attach");

/** The files in the tray: {name, node, bar, done: Promise, attachment}. */
const pending = [];

/** Upload one file with its progress reported; resolves with the attachment, rejects with a sentence. */
export function upload(file, onProgress) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", `${apiRoot}attachments/`);
    xhr.setRequestHeader("Accept", "application/json");
    xhr.setRequestHeader("X-CSRFToken", csrfToken());
    xhr.withCredentials = true;
    xhr.upload.addEventListener("progress", (event) => onProgress(percent(event.loaded, event.total)));
    xhr.addEventListener("load", () => {
      let data;
      try {
        data = JSON.parse(xhr.responseText);
      } catch {
        data = null;
      }
      if (xhr.status === 200 || xhr.status === 201) {
        resolve(data);
      } else {
        reject(new Error(refusalText(file.name, xhr.status, data)));
      }
    });
    xhr.addEventListener("error", () => reject(new Error(refusalText(file.name, 0, null))));
    const body = new FormData();
    body.append("file", file, file.name);
    xhr.send(body);
  });
}

function refreshBox() {
  // A message of files alone may have no text.
  ui.input.required = pending.length === 0;
}

function removeItem(item) {
  const index = pending.indexOf(item);
  if (index >= 0) {
    pending.splice(index, 1);
  }
  item.node.remove();
  tray.hidden = pending.length === 0;
  refreshBox();
}

/** Put files in the tray and start uploading each. */
export function addFiles(files) {
  for (const file of files) {
    const bar = el("progress", { max: "100", value: "0", "aria-label": `Uploading ${file.name}` });
    const remove = el("button", { type: "button", className: "llm-secondary llm-file-remove", "aria-label": `Remove ${file.name}` }, "×");
    const node = el("li", { className: "llm-file-chip llm-uploading" }, el("span", {}, fileLabel(file)), bar, remove);
    const item = { name: file.name, node, bar, attachment: null };
    remove.addEventListener("click", () => removeItem(item));
    item.done = upload(file, (value) => {
      bar.value = value;
    }).then(
      (attachment) => {
        item.attachment = attachment;
        node.classList.remove("llm-uploading");
        bar.remove();
        return attachment;
      },
      (error) => {
        removeItem(item);
        showError(error);
        return null;
      }
    );
    pending.push(item);
    tray.append(node);
  }
  tray.hidden = pending.length === 0;
  refreshBox();
}

/** Whether files wait in the tray. */
export function hasFiles() {
  return pending.length > 0;
}

/** Once every upload has ended: the ids of the files that were accepted, in order. */
export async function attachmentIds() {
  const results = await Promise.all(pending.map((item) => item.done));
  return results.filter(Boolean).map((attachment) => attachment.id);
}

/** Empty the tray (the message that carried its files was sent). */
export function clearFiles() {
  for (const item of [...pending]) {
    removeItem(item);
  }
}

/** A message's files for the transcript: thumbnails for pictures, chips for the rest. */
export function attachmentList(attachments) {
  const items = (attachments || []).map((file) => {
    if (isImage(file.media_type)) {
      return el(
        "li",
        {},
        el(
          "a",
          { className: "llm-thumb", href: file.url, target: "_blank", rel: "noopener", title: fileLabel(file) },
          el("img", { src: file.url, alt: file.name || "picture", loading: "lazy" })
        )
      );
    }
    return el("li", {}, el("a", { className: "llm-file-chip", href: file.url, download: file.name || true }, fileLabel(file)));
  });
  return items.length ? el("ul", { className: "llm-files", "aria-label": "Files" }, ...items) : null;
}

if (attach && picker) {
  attach.addEventListener("click", () => picker.click());
  picker.addEventListener("change", () => {
    addFiles([...picker.files]);
    picker.value = "";
  });
  ui.composer.addEventListener("dragover", (event) => {
    if (event.dataTransfer && [...event.dataTransfer.types].includes("Files")) {
      event.preventDefault();
      ui.composer.classList.add("llm-dropping");
    }
  });
  ui.composer.addEventListener("dragleave", () => ui.composer.classList.remove("llm-dropping"));
  ui.composer.addEventListener("drop", (event) => {
    ui.composer.classList.remove("llm-dropping");
    const files = filesOf(event.dataTransfer);
    if (files.length) {
      event.preventDefault();
      addFiles(files);
    }
  });
  ui.input.addEventListener("paste", (event) => {
    const files = filesOf(event.clipboardData).filter((file) => isImage(file.type));
    if (files.length) {
      event.preventDefault();
      addFiles(files);
    }
  });
}
