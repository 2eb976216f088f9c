/* The alert region (errors, with the API's code) and the status line. */

import { ApiError } from "./api.js";
import { ui } from "./dom.js";

export function showError(error) {
  let text = (error && (error.detail || error.message)) || String(error);
  const code = error && error.code;
  if (code && !code.startsWith("http_") && code !== "network_error") {
    text += ` [${code}]`;
  }
  ui.alertText.textContent = text;
  ui.alert.hidden = false;
  if (!(error instanceof ApiError) && !(error && error.code !== undefined)) {
    console.error(error); // a bug of this script: keep the stack for whoever debugs it
  }
}

export function hideError() {
  ui.alert.hidden = true;
  ui.alertText.textContent = "";
}

export function setProgress(text) {
  ui.progress.textContent = text || "";
  ui.progress.hidden = !text;
}
