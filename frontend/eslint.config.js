// ESLint for the chat page's modules, the vendoring script and the unit tests.
// Run from the repository root: `make lint-js` (the vendored files are not ours to lint).
import js from "@eslint/js";
import globals from "globals";

export default [
  {
    ignores: ["**/vendor/**", "**/node_modules/**", "**/*.min.js"],
  },
  js.configs.recommended,
  {
    files: ["conversations/static/conversations/**/*.js"],
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: "module",
      globals: globals.browser,
    },
  },
  {
    files: ["frontend/**/*.{js,mjs}"],
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: "module",
      globals: globals.node,
    },
  },
  {
    rules: {
      "no-unused-vars": ["error", { args: "after-used", caughtErrors: "none" }],
      eqeqeq: "error",
      "no-var": "error",
      "prefer-const": "error",
      "max-lines": ["error", { max: 300 }],
    },
  },
];
