// ESLint for the frontend (make test runs it with Prettier's check): the
// TypeScript rules that need types, the hooks rules, and the accessibility
// rules for JSX; formatting is Prettier's alone (eslint-config-prettier).
import js from "@eslint/js";
import prettier from "eslint-config-prettier";
import jsxA11y from "eslint-plugin-jsx-a11y";
import reactHooks from "eslint-plugin-react-hooks";
import globals from "globals";
import tseslint from "typescript-eslint";

export default tseslint.config(
  // wailsjs/: what `wails build` generates (git-ignored), present after a
  // `make run` or a first `make test`.
  { ignores: ["dist/", "node_modules/", "wailsjs/"] },
  js.configs.recommended,
  ...tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      globals: { ...globals.browser },
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { "react-hooks": reactHooks, "jsx-a11y": jsxA11y },
    settings: { "jsx-a11y": { attributes: { for: ["htmlFor", "for"] } } },
    rules: {
      ...jsxA11y.flatConfigs.strict.rules,
      "react-hooks/rules-of-hooks": "error",
      "react-hooks/exhaustive-deps": "error",
      // Preact spells the label's attribute `for` and events `onInput`.
      "jsx-a11y/label-has-associated-control": ["error", { assert: "either" }],
      "@typescript-eslint/restrict-template-expressions": ["error", { allowNumber: true }],
      "@typescript-eslint/no-confusing-void-expression": ["error", { ignoreArrowShorthand: true }],
      "@typescript-eslint/no-misused-promises": ["error", { checksVoidReturn: { attributes: false } }],
      // api.ts mirrors Go methods that return only an error as Promise<void>.
      "@typescript-eslint/no-invalid-void-type": "off",
      "@typescript-eslint/no-unused-vars": ["error", { varsIgnorePattern: "^_", argsIgnorePattern: "^_" }],
    },
  },
  {
    files: ["**/*.test.ts", "**/*.test.tsx", "e2e/**", "src/testing/**"],
    languageOptions: { globals: { ...globals.node } },
    rules: {
      // DOM queries in tests: the types say string where a test may see null.
      "@typescript-eslint/no-unnecessary-condition": "off",
      "@typescript-eslint/no-unnecessary-type-assertion": "off",
      "@typescript-eslint/no-unnecessary-type-parameters": "off",
      "@typescript-eslint/no-non-null-assertion": "off",
      // Fakes of the Go services answer like them (async, Go errors as strings).
      "@typescript-eslint/require-await": "off",
      "@typescript-eslint/only-throw-error": "off",
    },
  },
  // Playwright's fixtures call their argument `use`, which is no React hook.
  { files: ["e2e/**"], rules: { "react-hooks/rules-of-hooks": "off" } },
  { files: ["eslint.config.js"], ...tseslint.configs.disableTypeChecked },
  prettier,
);
