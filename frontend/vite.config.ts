import { defineConfig } from "vitest/config";

// The UI is plain Preact compiled by esbuild's automatic JSX runtime (see
// tsconfig.json), so no framework plugin is needed.
export default defineConfig({
  build: { outDir: "dist", emptyOutDir: true, target: "es2022" },
  test: {
    environment: "jsdom",
    include: ["src/**/*.test.ts", "src/**/*.test.tsx"],
  },
});
