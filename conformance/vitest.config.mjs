import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: [`suite.test.mjs`],
    // Same defaults the package's own CLI uses (it passes no config), so
    // per-test timeouts come from the suite itself. A run against a
    // cluster of debug builds raises it (CONFORMANCE_TEST_TIMEOUT_MS): the
    // property-based tests make hundreds of writes in one test, each a
    // Raft commit there.
    testTimeout: Number(process.env.CONFORMANCE_TEST_TIMEOUT_MS ?? 5_000),
    hookTimeout: 10_000,
    // One file; keep its tests in declaration order.
    fileParallelism: false,
    watch: false,
  },
})
