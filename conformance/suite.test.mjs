// Runs @durable-streams/server-conformance-tests 0.3.6 through its
// programmatic entry point. Driven by run.sh; configuration comes from env:
//
//   CONFORMANCE_BASE_URL   server base URL, e.g. http://127.0.0.1:4437 (required)
//   CONFORMANCE_MODE       "array" (default) or "ndjson"
//   CONFORMANCE_EXCLUSIONS file of exact test names excluded in ndjson mode
//                          (default: ./exclusions-ndjson.txt)
//
// Exclusions are applied by exact full test name, i.e. the describe path and
// the test title joined with " > ", for example
//   "Idempotent Producer Operations > should store and read back JSON object correctly"
// Every test under a top-level describe whose name starts with "Fork - " is
// excluded unless CONFORMANCE_FORKS=1 (run.sh --forks).
// Excluded tests are reported as skipped; they never send a request.

import { readFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeEach } from "vitest"
import { runConformanceTests } from "@durable-streams/server-conformance-tests"

const here = dirname(fileURLToPath(import.meta.url))

const baseUrl = process.env.CONFORMANCE_BASE_URL
if (!baseUrl) throw new Error(`CONFORMANCE_BASE_URL is required (use run.sh)`)

const mode = process.env.CONFORMANCE_MODE ?? `array`
if (mode !== `array` && mode !== `ndjson`) {
  throw new Error(`CONFORMANCE_MODE must be "array" or "ndjson", got ${mode}`)
}

export const FORK_PREFIX = `Fork - `

/** Parse exclusions: one `full test name<TAB>deciding spec section` per line. */
export function loadExclusions(file) {
  const names = new Map()
  const lines = readFileSync(file, `utf8`).split(`\n`)
  lines.forEach((line, i) => {
    if (line.trim() === `` || line.startsWith(`#`)) return
    const parts = line.split(`\t`)
    if (parts.length !== 2 || !parts[0] || !parts[1].trim()) {
      throw new Error(`${file}:${i + 1}: expected "full test name<TAB>spec section"`)
    }
    if (names.has(parts[0])) throw new Error(`${file}:${i + 1}: duplicate ${parts[0]}`)
    names.set(parts[0], parts[1].trim())
  })
  return names
}

const exclusions =
  mode === `ndjson`
    ? loadExclusions(
        process.env.CONFORMANCE_EXCLUSIONS ?? join(here, `exclusions-ndjson.txt`)
      )
    : new Map()

/** Describe path + title of a test, e.g. ["Stream Closure", "Edge Cases", "title"]. */
function titlePath(task) {
  const names = []
  for (let t = task; t && t !== task.file; t = t.suite) names.unshift(t.name)
  return names
}

beforeEach((ctx) => {
  const path = titlePath(ctx.task)
  if (path[0].startsWith(FORK_PREFIX) && process.env.CONFORMANCE_FORKS !== `1`) {
    ctx.skip(`fork tests are excluded`)
    return
  }
  const fullName = path.join(` > `)
  if (exclusions.has(fullName)) {
    ctx.skip(`ndjson mode: ${exclusions.get(fullName)}`)
  }
})

afterAll(({}, file) => {
  // Exclusion by name must be exact: every listed name must be the full name
  // of a collected test (a typo or a renamed test would otherwise silently
  // run, or silently exclude nothing). Checked against the collected tree,
  // so it also holds when a -t filter keeps some tests from running.
  const collected = new Set()
  const walk = (task) => {
    if (task.type === `test`) collected.add(titlePath(task).join(` > `))
    for (const child of task.tasks ?? []) walk(child)
  }
  walk(file)
  const unknown = [...exclusions.keys()].filter((n) => !collected.has(n))
  if (unknown.length > 0) {
    throw new Error(
      `exclusions-ndjson.txt names that match no test exactly:\n  ${unknown.join(`\n  `)}`
    )
  }
})

runConformanceTests({ baseUrl })
