// How files read on the chat page: sizes, pictures or chips, and why an upload was refused.
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  fileLabel,
  filesOf,
  fileSize,
  isImage,
  percent,
  refusalText,
} from "../../conversations/static/conversations/chat/files.js";

test("sizes read in bytes, kilobytes and megabytes", () => {
  assert.equal(fileSize(812), "812 B");
  assert.equal(fileSize(4200), "4.2 KB");
  assert.equal(fileSize(20_000_000), "20.0 MB");
  assert.equal(fileSize(undefined), "0 B");
});

test("only the image types the page shows inline are pictures", () => {
  assert.ok(isImage("image/png") && isImage("IMAGE/JPEG") && isImage("image/webp"));
  assert.ok(!isImage("image/svg+xml"));
  assert.ok(!isImage("application/pdf"));
  assert.ok(!isImage(undefined));
});

test("a chip names the file, its type and size, for an attachment or a picked file", () => {
  assert.equal(fileLabel({ name: "q3.pdf", media_type: "application/pdf", size: 4200 }), "q3.pdf · application/pdf · 4.2 KB");
  assert.equal(fileLabel({ name: "a.png", type: "image/png", size: 10 }), "a.png · image/png · 10 B");
});

test("a file too large says so with the server's limit", () => {
  const data = { code: "attachment_too_large", detail: "the file is 26000000 bytes; at most 20971520 bytes are accepted" };
  assert.equal(
    refusalText("big.pdf", 413, data),
    "“big.pdf” is too large to attach: the file is 26000000 bytes; at most 20971520 bytes are accepted."
  );
  assert.equal(refusalText("big.pdf", 413, null), "“big.pdf” is too large to attach.");
});

test("a type not accepted says which types are", () => {
  const data = { code: "unsupported_media_type", detail: "files of type image/svg+xml are not accepted" };
  const text = refusalText("logo.svg", 415, data);
  assert.match(text, /^“logo\.svg” cannot be attached: this type of file is not accepted \(files of type image\/svg\+xml/);
  assert.match(text, /PNG, JPEG, GIF, WebP\), PDFs and text files are\.$/);
});

test("other failures name the status or the network", () => {
  assert.equal(refusalText("a.png", 0, null), "“a.png” could not be uploaded: the server could not be reached.");
  assert.equal(refusalText("a.png", 500, null), "“a.png” could not be uploaded (the server answered 500).");
  assert.equal(refusalText("a.png", 403, { detail: "CSRF failed." }), "“a.png” could not be uploaded: CSRF failed.");
});

test("progress is a bounded whole percentage", () => {
  assert.equal(percent(512, 1024), 50);
  assert.equal(percent(5, 0), 0);
  assert.equal(percent(2000, 1000), 100);
});

test("only real files of a paste or drop are taken", () => {
  const png = { name: "a.png", type: "image/png", size: 3 };
  assert.deepEqual(filesOf({ files: [png, null, { name: "x" }] }), [png]);
  assert.deepEqual(filesOf(null), []);
});
