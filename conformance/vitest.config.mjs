import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: [`suite.test.mjs`],
    // Same defaults the package's own CLI uses (it passes no config), so
    // per-test timeouts come from the suite itself.
    testTimeout: 5_000,
    hookTimeout: 10_000,
    // One file; keep its tests in declaration order.
    fileParallelism: false,
    watch: false,
  },
})
