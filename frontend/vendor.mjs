// Copies the chat page's pinned libraries from node_modules into the static
// files (and axe-core into the browser tests), and records their sha256.
//
//   node vendor.mjs           refresh the copies and VENDOR.sha256 (after `npm ci`)
//   node vendor.mjs --check   fail unless every copy matches node_modules and VENDOR.sha256
//
// `npm ci` already checks each package against the lock file's integrity hash;
// the manifest makes a hand-edited or stale copy in the repository visible.
import { createHash } from "node:crypto";
import { copyFileSync, mkdirSync, readFileSync, writeFileSync, existsSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..");
const modules = join(here, "node_modules");
const statics = join(root, "conversations", "static", "conversations", "vendor");
const testsOnly = join(root, "tests", "browser", "vendor");
const MANIFEST = join(here, "VENDOR.sha256");

const HLJS = "@highlightjs/cdn-assets";
const LANGUAGES = ["bash", "css", "javascript", "json", "python", "shell", "sql", "typescript", "xml", "yaml"];

/** [from (under node_modules), to (absolute)] for every vendored file. */
export const FILES = [
  ["marked/lib/marked.esm.js", join(statics, "marked", "marked.esm.js")],
  ["marked/LICENSE", join(statics, "marked", "LICENSE")],
  ["dompurify/dist/purify.es.mjs", join(statics, "dompurify", "purify.es.mjs")],
  ["dompurify/LICENSE", join(statics, "dompurify", "LICENSE")],
  [`${HLJS}/es/core.min.js`, join(statics, "highlight", "core.min.js")],
  [`${HLJS}/LICENSE`, join(statics, "highlight", "LICENSE")],
  [`${HLJS}/styles/github.min.css`, join(statics, "highlight", "github.min.css")],
  [`${HLJS}/styles/github-dark.min.css`, join(statics, "highlight", "github-dark.min.css")],
  ...LANGUAGES.map((name) => [
    `${HLJS}/es/languages/${name}.min.js`,
    join(statics, "highlight", "languages", `${name}.min.js`),
  ]),
  ["axe-core/axe.min.js", join(testsOnly, "axe.min.js")],
  ["axe-core/LICENSE", join(testsOnly, "axe-core.LICENSE")],
];

const sha256 = (path) => createHash("sha256").update(readFileSync(path)).digest("hex");
const version = (name) => JSON.parse(readFileSync(join(modules, name, "package.json"), "utf8")).version;

function manifest() {
  const lines = [
    `# sha256 of the vendored files; written by frontend/vendor.mjs from: marked ${version("marked")},`,
    `# dompurify ${version("dompurify")}, ${HLJS} ${version(HLJS)}, axe-core ${version("axe-core")}.`,
  ];
  for (const [, to] of FILES) {
    lines.push(`${sha256(to)}  ${relative(root, to)}`);
  }
  return `${lines.join("\n")}\n`;
}

function check() {
  const problems = [];
  for (const [from, to] of FILES) {
    if (!existsSync(to)) {
      problems.push(`${relative(root, to)} is missing`);
    } else if (sha256(join(modules, from)) !== sha256(to)) {
      problems.push(`${relative(root, to)} differs from node_modules/${from}`);
    }
  }
  if (!problems.length && (!existsSync(MANIFEST) || readFileSync(MANIFEST, "utf8") !== manifest())) {
    problems.push(`${relative(root, MANIFEST)} does not match the vendored files`);
  }
  if (problems.length) {
    console.error(`Vendored files are stale or edited (run \`make vendor\`):\n  ${problems.join("\n  ")}`);
    process.exit(1);
  }
  console.log(`${FILES.length} vendored files match node_modules and ${relative(root, MANIFEST)}.`);
}

if (process.argv.includes("--check")) {
  check();
} else {
  for (const [from, to] of FILES) {
    mkdirSync(dirname(to), { recursive: true });
    copyFileSync(join(modules, from), to);
  }
  writeFileSync(MANIFEST, manifest());
  console.log(`Copied ${FILES.length} files; their sha256 are in ${relative(root, MANIFEST)}.`);
}
