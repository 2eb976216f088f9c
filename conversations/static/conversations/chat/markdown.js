/*
 * Markdown to safe HTML: the parser and the sanitiser are handed in (the page
 * gives the vendored ones, the unit tests the same files with a jsdom window),
 * so this wrapper holds only the rules.
 *
 * The rules: raw HTML in an answer is shown as text, images become links (an
 * answer cannot make the browser load anything), and whatever the parser
 * produced passes DOMPurify with a short list of tags and attributes; links
 * open in a new tab without access to this page (``rel=noopener``).
 */

export const ALLOWED_TAGS = [
  "a", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr",
  "li", "ol", "p", "pre", "strong", "table", "tbody", "td", "th", "thead", "tr", "ul",
];
export const ALLOWED_ATTR = ["href", "title", "class", "start", "align"];

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
export const escapeHtml = (text) => String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);

/** Only a class naming the code's language survives (it picks the highlighting). */
const LANGUAGE_CLASS = /^language-[\w+#.-]{1,40}$/;

/**
 * ``{toSafeHtml(text)}`` from ``Marked`` (the class of the ``marked`` module)
 * and a DOMPurify instance bound to a window.
 */
export function createMarkdown({ Marked, purify }) {
  const parser = new Marked({ gfm: true, breaks: false, async: false });
  parser.use({
    renderer: {
      html(token) {
        return escapeHtml(token.text);
      },
      image(token) {
        const label = escapeHtml(token.text || token.href);
        return `<a href="${escapeHtml(token.href)}">${label}</a>`;
      },
    },
  });
  purify.addHook("uponSanitizeAttribute", (node, data) => {
    if (data.attrName === "class" && !(node.nodeName === "CODE" && LANGUAGE_CLASS.test(data.attrValue))) {
      data.keepAttr = false;
    }
  });
  purify.addHook("afterSanitizeAttributes", (node) => {
    if (node.nodeName === "A" && node.hasAttribute("href")) {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer");
    }
  });
  const config = { ALLOWED_TAGS, ALLOWED_ATTR, ALLOW_DATA_ATTR: false, ALLOW_ARIA_ATTR: false };

  return {
    /** Sanitised HTML of ``text`` read as Markdown. */
    toSafeHtml(text) {
      return purify.sanitize(parser.parse(String(text || "")), config);
    },
  };
}
